package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// rcvrOID is sFlowRcvrTable column col of row.
func rcvrOID(col, row int) string { return fmt.Sprintf(".1.3.6.1.4.1.14706.1.1.4.1.%d.%d", col, row) }

// TestHostileSNMPSets (SETs aimed at this host's SNMP ports, which already
// held, kept as a bound; with the settings' and names' checks of collectors
// every source of a collector is checked): SETs that make a receiver
// 127.0.0.1 or ::1 at port 161, 162 or 705 are refused
// (inconsistentValue) whole, a valid one is taken, and 500 SETs of wrong
// types and values leave the daemon's memory flat.
func TestHostileSNMPSets(t *testing.T) {
	lab := newLab(t, 1)
	snmp := startSnmpd(t)
	d := startDaemon(t, lab, "-collector", "none", "-ports", "p1", "-polling", "0", "-agentx", "unix:"+snmp.SocketPath)
	g := snmp.Client(t, "private")
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	waitUntil(t, 15*time.Second, "SFLOW-MIB through snmpd", func() bool { return mibAnswers(g) })
	g.Timeout, g.Retries = 2*time.Second, 1
	pid := d.cmd.Process.Pid
	hwm0 := usage(t, pid).HWM
	set := func(row int, addr []byte, port int) gosnmp.SNMPError {
		typ := 1
		if len(addr) == 16 {
			typ = 2
		}
		r, err := g.Set([]gosnmp.SnmpPDU{
			{Name: rcvrOID(2, row), Type: gosnmp.OctetString, Value: "hostile"},
			{Name: rcvrOID(3, row), Type: gosnmp.Integer, Value: 300},
			{Name: rcvrOID(5, row), Type: gosnmp.Integer, Value: typ},
			{Name: rcvrOID(6, row), Type: gosnmp.OctetString, Value: string(addr)},
			{Name: rcvrOID(7, row), Type: gosnmp.Integer, Value: port},
		})
		if err != nil {
			t.Fatalf("SET: %v", err)
		}
		return r.Error
	}
	loop4, loop6 := []byte{127, 0, 0, 1}, make([]byte, 16)
	loop6[15] = 1
	refused := 0
	for _, port := range []int{161, 162, 705} {
		for _, a := range [][]byte{loop4, loop6} {
			if st := set(1, a, port); st == gosnmp.NoError {
				t.Errorf("receiver at %v:%d accepted", a, port)
			} else {
				refused++
			}
		}
	}
	if st := set(1, lab.CollectorAddr.AsSlice(), collectorPort); st != gosnmp.NoError {
		t.Errorf("a valid receiver refused: %v", st)
	}
	// The address and port a SET leaves are checked, not only those it
	// carries: a receiver at 127.0.0.1:6343 (allowed), then a SET of its
	// port alone to 705.
	if st := set(2, loop4, 6343); st != gosnmp.NoError {
		t.Errorf("a receiver at 127.0.0.1:6343 refused: %v", st)
	}
	if r, err := g.Set([]gosnmp.SnmpPDU{{Name: rcvrOID(7, 2), Type: gosnmp.Integer, Value: 705}}); err != nil {
		t.Fatalf("SET: %v", err)
	} else if r.Error == gosnmp.NoError {
		t.Errorf("a SET of the port alone to 705 on a receiver at 127.0.0.1 accepted")
	} else {
		refused++
	}
	// Wrong types and values.
	bad := 0
	for i := 0; i < 500; i++ {
		r, err := g.Set([]gosnmp.SnmpPDU{
			{Name: rcvrOID(2+i%7, 1+i%12), Type: []gosnmp.Asn1BER{gosnmp.Integer, gosnmp.OctetString, gosnmp.Counter32, gosnmp.IPAddress}[i%4],
				Value: []any{i * 7919, strings.Repeat("x", i%300), uint32(i), "198.18.0.1"}[i%4]},
		})
		if err != nil {
			t.Fatalf("SET %d: %v", i, err)
		}
		if r.Error != gosnmp.NoError {
			bad++
		}
	}
	hwm := usage(t, pid).HWM
	if !d.alive() {
		t.Fatalf("daemon died\n%s", tail(d.log(), 3000))
	}
	if hwm > hwm0+16<<20 {
		t.Errorf("peak RSS %s → %s, bound +16 MiB", mib(hwm0), mib(hwm))
	}
	t.Logf("%d reserved-port SETs refused; %d of 500 malformed SETs refused; peak RSS %s → %s", refused, bad, mib(hwm0), mib(hwm))
	recordHostile(t, hostileRow{
		Case:  "SNMP SETs of receivers at 127.0.0.1/::1 ports 161, 162, 705 (also the port alone); 500 SETs of wrong types and values",
		Bound: "reserved ports refused whole; a valid receiver taken; RSS +16 MiB",
		Peak:  fmt.Sprintf("%d/7 refused; %d/500 refused; RSS %s → %s", refused, bad, mib(hwm0), mib(hwm)),
	})
}

// TestHostileSettingsAtBudget: the largest SFLOW-MIB
// and the most collectors the budget allows run, and their memory is
// within the budget: max_ports 4096 × 16 instances (16 collectors), with
// 200 ports present (make hostile: 1000), each port's 16 instances in the
// MIB and every collector a stream of every sub-agent.
func TestHostileSettingsAtBudget(t *testing.T) {
	const bound = 192 << 20
	n := sized(200, 1000)
	lab := netlab.NewScale(t, n, 0)
	args := []string{"-ports", "s*", "-sampling", "1000", "-polling", "0", "-max-ports", "4096", "-snmp-instances", "16"}
	for i := 0; i < 16; i++ {
		args = append(args, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, 10000+i))
	}
	d := startDaemon(t, lab, args...)
	// Up to 90 s: the daemon attaches about 60 ports a second on a busy
	// 2-core machine (bench/scale), 1000 ports in about 17 s.
	waitMetricFor(t, d, fmt.Sprintf("%d ports sampled", n), 90*time.Second, func() (metrics, error) { return fetchMetrics(lab) }, func(m metrics) bool {
		k := 0
		for _, line := range m {
			if strings.HasPrefix(line, "sflowswitchd_port_sampling_rate{") {
				k++
			}
		}
		return k == n
	})
	hwm := usage(t, d.cmd.Process.Pid).HWM
	t.Logf("max_ports 4096, 16 instances, 16 collectors, %d ports: peak RSS %s (bound %s)", n, mib(hwm), mib(bound))
	if hwm > bound {
		t.Errorf("peak RSS %s, bound %s", mib(hwm), mib(bound))
	}
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("at the budget: max_ports 4096 × 16 SFLOW-MIB instances, 16 collectors, %d ports sampled", n),
		Bound: "runs; peak RSS ≤ " + mib(bound),
		Peak:  "peak RSS " + mib(hwm),
	})
}
