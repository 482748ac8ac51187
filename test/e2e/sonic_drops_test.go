package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestSonicDrops: in SONiC mode, drop notifications carry SONiC's
// ifIndex, the numbering of the counters and flow samples. UDP to a
// closed port of an address on Ethernet16 (its netdev), sent from its
// peer, is dropped by the kernel (NO_SOCKET) with Ethernet16's Linux
// ifindex as the input: each discarded_packet says input 17 (SONiC's
// Ethernet16), as our decoder and goflow2 read it. The same drops on the
// device mgmt, which is not a SONiC port, are not sent but counted
// (sflowswitchd_drop_notifications_other_ports_total); no notification
// names a port by a number that is not SONiC's.
func TestSonicDrops(t *testing.T) {
	sl := newSonicLab(t)
	lab := sl.lab
	run := func(ns string, args ...string) {
		t.Helper()
		if out, err := lab.Run(ns, args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(lab.Switch, "ip", "addr", "add", "198.18.7.1/24", "dev", "Ethernet16")
	cfg := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("sonic = true\nsonic_db_config = %q\nsonic_auto_file = %q\nworkers = 1\ndrops = \"on\"\ndrops_limit = 10000\n",
		sl.srv.DBConfig, sl.auto)), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, lab, "-config", cfg)
	timeout := testutil.Scaled(15 * time.Second)
	sl.c1.waitFor(t, timeout, "counter samples of the SONiC ports", func(dgs []datagram) bool { return len(polledSources(dgs)) >= sonicPorts })

	mac := func(ns, dev string) []byte {
		l, err := netnsutil.Link(ns, dev)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().HardwareAddr
	}
	const n = 20
	frames := func(srcMAC, dstMAC []byte, src, dst string) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = netlab.UDPFrame(srcMAC, dstMAC, netip.MustParseAddrPort(src), netip.MustParseAddrPort(fmt.Sprintf("%s:%d", dst, 9)), []byte(strconv.Itoa(i)))
		}
		return out
	}
	mgmtIdx := uint32(lab.LinkIndex(lab.Switch, "mgmt"))
	before := otherPortDrops(t, lab)
	lab.SendOn(t, lab.Switch, "soe4", frames(mac(lab.Switch, "soe4"), mac(lab.Switch, "Ethernet16"), "198.18.7.2:5000", "198.18.7.1"))
	lab.SendOn(t, sl.mgmtNS, "somgc", frames(mac(sl.mgmtNS, "somgc"), mac(lab.Switch, "mgmt"), "198.18.6.2:5000", "198.18.6.1"))
	dgs := waitDropsQuiet(t, sl.c1)
	sonic := sonicSources()
	var fromEth16 int
	for _, r := range dropSamplesOf(dgs) {
		for _, port := range []uint32{r.s.Input, r.s.Output} {
			if port != 0 && !sonic[port] {
				t.Errorf("discarded_packet (%s) names port %d, not a SONiC ifIndex: %+v", r.linux, port, r.s)
			}
		}
		if r.linux == "NO_SOCKET" && r.s.Input == 17 {
			fromEth16++
		}
		if r.linux == "NO_SOCKET" && r.s.Input == mgmtIdx && mgmtIdx != 17 {
			t.Errorf("a drop on mgmt (Linux ifindex %d, not a SONiC port) was sent: %+v", mgmtIdx, r.s)
		}
	}
	if fromEth16 != n {
		t.Errorf("%d NO_SOCKET discarded_packet samples with input 17 (Ethernet16), want %d", fromEth16, n)
	}
	gf := 0
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			if d, ok := s.(goflow.DropSample); ok && d.Input == 17 && d.Reason == uint32(sflow.DropPortUnreachable) {
				gf++
			}
		}
	}
	if gf != n {
		t.Errorf("goflow2: %d discarded_packet samples with input 17 and reason port_unreachable, want %d", gf, n)
	}
	if got := otherPortDrops(t, lab) - before; got < n {
		t.Errorf("sflowswitchd_drop_notifications_other_ports_total grew by %d, want at least the %d drops on mgmt", got, n)
	}
	t.Logf("Linux ifindex of Ethernet16 %d, of mgmt %d; %d drops on Ethernet16 sent with input 17 (goflow2 %d)", lab.LinkIndex(lab.Switch, "Ethernet16"), mgmtIdx, fromEth16, gf)
}

// otherPortDrops reads sflowswitchd_drop_notifications_other_ports_total.
func otherPortDrops(t *testing.T, lab *netlab.Lab) uint64 {
	t.Helper()
	m := mustFetchMetrics(t, lab)
	v, _ := m.value("sflowswitchd_drop_notifications_other_ports_total")
	return v
}
