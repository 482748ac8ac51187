package mib

import (
	"errors"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// TestPortFailureStaysLocal: a port the dataplane cannot sample (the
// 257th port, an ifindex >= 65536) affects only that port.
// Changes, SETs on other ports and their rollbacks keep working, and the
// MIB shows the truth: the failed port's sFlowFsPacketSamplingRate reads 0
// until it can be sampled.
func TestPortFailureStaysLocal(t *testing.T) {
	rec := &recorder{}
	var failing uint32 = 3
	apply := func(c agent.Config) error {
		err := rec.Apply(c)
		for _, s := range c.Samplers {
			if s.IfIndex == failing {
				return errors.Join(err, &agent.PortError{IfIndex: failing, Err: errors.New("all 2 port slots in use")})
			}
		}
		return err
	}
	m := newTestMIB(t, 0, 1)
	m.MIB.cfg.Apply = apply
	m.rec = rec
	if err := m.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000}, {IfIndex: 3, StaticRate: 1000}}); err != nil {
		t.Fatalf("SetPorts with one port failing: %v", err)
	}
	if got := m.getInt(fsOID(colFsRate, 3, 1)); got != 0 {
		t.Errorf("failed port 3 reads rate %d, want 0", got)
	}
	if got := m.getInt(fsOID(colFsRate, 1, 1)); got != 1000 {
		t.Errorf("port 1 reads rate %d, want 1000", got)
	}
	if f := m.FailedPorts(); len(f) != 1 || f[3] == nil {
		t.Errorf("FailedPorts %v, want port 3", f)
	}

	// SNMP keeps working on the other ports while port 3 fails.
	m.claim(2, "mgr", 6343)
	if st, i := m.set(integer(fsOID(colFsReceiver, 2, 2), 2), integer(fsOID(colFsRate, 2, 2), 77)); st != agentx.NoError {
		t.Fatalf("SET on port 2 while port 3 fails: %s at %d", st, i)
	}
	if got := m.getInt(fsOID(colFsRate, 2, 2)); got != 77 {
		t.Errorf("port 2 instance 2 reads %d, want 77", got)
	}
	// A SET on the failing port itself is stored and reads 0 (not sampled).
	if st, i := m.set(integer(fsOID(colFsReceiver, 3, 2), 2), integer(fsOID(colFsRate, 3, 2), 50)); st != agentx.NoError {
		t.Fatalf("SET on failing port 3: %s at %d", st, i)
	}
	if got := m.getInt(fsOID(colFsRate, 3, 2)); got != 0 {
		t.Errorf("failed port 3 instance 2 reads %d, want 0", got)
	}
	// A whole-configuration failure still fails the SET and rolls back.
	rec.fail = errors.New("invalid")
	if st, _ := m.set(integer(fsOID(colFsRate, 2, 2), 78)); st != agentx.CommitFailed {
		t.Errorf("SET with a failing Apply: %s, want commitFailed", st)
	}
	rec.fail = nil

	// The port recovers (a slot was freed): a reapply samples it and the
	// MIB reads its configured rates again.
	failing = 0
	still, err := m.Reapply()
	if err != nil || len(still) != 0 {
		t.Fatalf("Reapply: %v, still failing %v", err, still)
	}
	if a, b := m.getInt(fsOID(colFsRate, 3, 1)), m.getInt(fsOID(colFsRate, 3, 2)); a != 1000 || b != 50 {
		t.Errorf("recovered port 3 reads %d/%d, want 1000/50", a, b)
	}
}

// TestSetRefusesNonUnicastCollector: an SNMP manager
// cannot point a receiver at a broadcast or multicast address, nor at this
// host's SNMP or AgentX port; 0.0.0.0 (send nothing) stays allowed.
func TestSetRefusesNonUnicastCollector(t *testing.T) {
	m := newTestMIB(t, 1, 0)
	m.claim(1, "mgr", 6343)
	for _, c := range []struct {
		name string
		addr string
		port int32
	}{
		{"limited broadcast", "\xff\xff\xff\xff", 6343},
		{"multicast", "\xe0\x00\x00\x01", 6343},
		{"loopback SNMP port", "\x7f\x00\x00\x01", 161},
		{"loopback AgentX port", "\x7f\x00\x00\x01", 705},
	} {
		if st, _ := m.set(octets(rcvrOID(colRcvrAddress, 1), c.addr), integer(rcvrOID(colRcvrPort, 1), c.port)); st != agentx.InconsistentValue {
			t.Errorf("%s: %s, want inconsistentValue", c.name, st)
		}
	}
	if got := m.rec.last(t).Receivers[0].Address.String(); got != "198.19.255.2:6343" {
		t.Errorf("receiver changed to %s by refused SETs", got)
	}
	m.mustSet(octets(rcvrOID(colRcvrAddress, 1), "\x00\x00\x00\x00"))
	m.mustSet(octets(rcvrOID(colRcvrAddress, 1), "\x7f\x00\x00\x01"), integer(rcvrOID(colRcvrPort, 1), 6343))
}
