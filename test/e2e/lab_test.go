package e2e

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// newLab builds a netlab lab with nports ports and gives the collector's
// eth0 a private receive path (see privateCollectorPath).
func newLab(t testing.TB, nports int) *netlab.Lab {
	t.Helper()
	lab := netlab.New(t, nports)
	privateCollectorPath(t, lab)
	return lab
}

// privateCollectorPath attaches an XDP_PASS program to eth0 in the
// collector namespace. Without one, a veth hands every frame to the
// per-CPU backlog (netif_rx), which all namespaces of the machine share
// and which drops when full (net.core.netdev_max_backlog, visible in
// /proc/net/softnet_stat): a burst of flooded frames anywhere on the
// shared machine could then drop one of the daemon's datagrams, and the
// test would blame the daemon for a sequence gap. With an XDP program the
// veth receives through its own NAPI ring instead. The link is released
// at cleanup, before the lab is removed.
func privateCollectorPath(t testing.TB, lab *netlab.Lab) {
	t.Helper()
	privateRxPath(t, lab, lab.Collector)
}

// privateRxPath gives eth0 of namespace ns its own receive path (see
// privateCollectorPath).
func privateRxPath(t testing.TB, lab *netlab.Lab, ns string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "e2e_pass",
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("load XDP_PASS program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	var l link.Link
	err = lab.Do(ns, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: eth.Attrs().Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		t.Fatalf("attach XDP_PASS to eth0 in %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("detach XDP_PASS from eth0 in %s: %v", ns, err)
		}
	})
}
