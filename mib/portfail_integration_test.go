package mib

import (
	"fmt"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestDaemonPortSlotsOverAgentX through the real
// daemon and snmpd: with one port slot and two selected ports, the port
// without a slot reads sFlowFsPacketSamplingRate 0 (the kernel does not
// sample it), and SNMP SETs keep working: a manager claims a receiver and
// sets a sampler on the other port (they used to fail with commitFailed
// while such a port existed).
func TestDaemonPortSlotsOverAgentX(t *testing.T) {
	netlab.RequireRoot(t)
	lab := netlab.New(t, 2)
	s := newTestSnmpd(t)
	col := startCollector(t, lab)
	p1, p2 := uint32(lab.LinkIndex(lab.Switch, "p1")), uint32(lab.LinkIndex(lab.Switch, "p2"))
	lab.Start(t, lab.Switch, daemonBin, "-agentx", "unix:"+s.SocketPath, "-ports", "p1,p2", "-max-ports", "1",
		"-sampling", "100", "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, col.port), "-workers", "1",
		"-agent-address", lab.AgentAddr.String())
	g := s.Client(t, "private")
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	// A bound, not a speed requirement: under software emulation (the
	// Linux 6.1 VM) the daemon alone takes 8 s to load its programs.
	if !waitFor(time.Minute, func() bool {
		res, err := g.Get([]string{"." + fsOID(colFsRate, p2, 1).String()})
		return err == nil && res.Variables[0].Type == gosnmp.Integer
	}) {
		t.Fatalf("daemon's MIB not reachable through snmpd within a minute; snmpd log:\n%s", s.Log())
	}
	g.Timeout, g.Retries = 2*time.Second, 1
	if r1, r2 := getInt(t, g, fsOID(colFsRate, p1, 1)), getInt(t, g, fsOID(colFsRate, p2, 1)); r1 != 100 || r2 != 0 {
		t.Fatalf("static sampler rates p1 %d, p2 %d; want 100 and 0 (p2 has no slot)", r1, r2)
	}
	if st, i := snmpSet(t, g, octets(rcvrOID(colRcvrOwner, 2), "mgr"), integer(rcvrOID(colRcvrTimeout, 2), 300),
		octets(rcvrOID(colRcvrAddress, 2), string(lab.CollectorAddr.AsSlice())), integer(rcvrOID(colRcvrPort, 2), int32(col.port))); st != agentx.NoError {
		t.Fatalf("claiming receiver 2 while p2 cannot be sampled: %s at %d", st, i)
	}
	if st, i := snmpSet(t, g, integer(fsOID(colFsReceiver, p1, 2), 2), integer(fsOID(colFsRate, p1, 2), 50)); st != agentx.NoError {
		t.Fatalf("sampler SET on p1 while p2 cannot be sampled: %s at %d", st, i)
	}
	if r := getInt(t, g, fsOID(colFsRate, p1, 2)); r != 50 {
		t.Errorf("p1 instance 2 reads rate %d, want 50", r)
	}
	// A SET on p2 itself is stored, and reads 0 while p2 has no slot.
	if st, i := snmpSet(t, g, integer(fsOID(colFsReceiver, p2, 2), 2), integer(fsOID(colFsRate, p2, 2), 50)); st != agentx.NoError {
		t.Fatalf("sampler SET on p2: %s at %d", st, i)
	}
	if r := getInt(t, g, fsOID(colFsRate, p2, 2)); r != 0 {
		t.Errorf("p2 instance 2 reads rate %d, want 0 (not sampled)", r)
	}
}
