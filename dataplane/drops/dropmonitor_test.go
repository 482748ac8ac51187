package drops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// The kernel's own drop monitor (net/core/drop_monitor.c, generic netlink
// family NET_DM; include/uapi/linux/net_dropmon.h) as an independent
// reference for the agent's drop notifications.
const (
	netDMCmdConfig      = 2
	netDMCmdStart       = 3
	netDMCmdStop        = 4
	netDMCmdPacketAlert = 5
	netDMAttrAlertMode  = 1
	netDMAttrSymbol     = 3
	netDMAttrPayload    = 7
	netDMAttrSWDrops    = 20
	netDMAttrReason     = 23 // Linux 5.18
	netDMAlertPacket    = 1
)

// dropMonitorProbe answers testskip.Feature for "drop_monitor" (the
// module loaded first where it is one).
type dropMonitorProbe struct{}

func (dropMonitorProbe) Unavailable(name string) error {
	_ = exec.Command("modprobe", "-q", "drop_monitor").Run()
	if _, err := netlink.GenlFamilyGet("NET_DM"); err != nil {
		return fmt.Errorf("generic-netlink family NET_DM (CONFIG_NET_DROP_MONITOR): %w", err)
	}
	return nil
}

// netDM is a NET_DM session in packet mode: software drops, each with its
// payload, multicast to the "events" group (in the initial namespace
// only: the family is not namespace-aware, and monitoring is global).
type netDM struct {
	fam *netlink.GenlFamily
	fd  int
}

func netDMRequest(fam *netlink.GenlFamily, cmd uint8, attrs ...*nl.RtAttr) error {
	req := nl.NewNetlinkRequest(int(fam.ID), unix.NLM_F_ACK)
	req.AddData(&nl.Genlmsg{Command: cmd, Version: 2})
	for _, a := range attrs {
		req.AddData(a)
	}
	_, err := req.Execute(unix.NETLINK_GENERIC, 0)
	return err
}

func startNetDM(t *testing.T) *netDM {
	t.Helper()
	fam, err := netlink.GenlFamilyGet("NET_DM")
	if err != nil {
		t.Fatal(err)
	}
	var group uint32
	for _, g := range fam.Groups {
		if g.Name == "events" {
			group = g.ID
		}
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(group)); err != nil {
		t.Fatal(err)
	}
	m := &netDM{fam: fam, fd: fd}
	if err := netDMRequest(fam, netDMCmdConfig, nl.NewRtAttr(netDMAttrAlertMode, []byte{netDMAlertPacket})); err != nil {
		t.Fatalf("NET_DM packet mode: %v", err)
	}
	if err := netDMRequest(fam, netDMCmdStart, nl.NewRtAttr(netDMAttrSWDrops, nil)); err != nil {
		t.Fatalf("NET_DM start: %v", err)
	}
	t.Cleanup(func() {
		if err := netDMRequest(fam, netDMCmdStop, nl.NewRtAttr(netDMAttrSWDrops, nil)); err != nil {
			t.Errorf("NET_DM stop: %v", err)
		}
		unix.Close(fd)
	})
	return m
}

// dmAlert is one packet alert.
type dmAlert struct {
	reason, symbol string
	payload        []byte
}

// read collects alerts until none came for quiet.
func (m *netDM) read(t *testing.T, quiet time.Duration) []dmAlert {
	t.Helper()
	var out []dmAlert
	buf := make([]byte, 1<<16)
	for {
		tv := unix.NsecToTimeval(quiet.Nanoseconds())
		if err := unix.SetsockoptTimeval(m.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			t.Fatal(err)
		}
		n, err := unix.Read(m.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EWOULDBLOCK) {
			return out
		}
		if err != nil {
			t.Fatalf("NET_DM read: %v", err)
		}
		for b := buf[:n]; len(b) >= 20; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < 20 || l > len(b) {
				break
			}
			if binary.NativeEndian.Uint16(b[4:]) == m.fam.ID && b[16] == netDMCmdPacketAlert {
				out = append(out, parseAlert(b[20:l]))
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

func parseAlert(a []byte) dmAlert {
	var al dmAlert
	for len(a) >= 4 {
		l := int(binary.NativeEndian.Uint16(a))
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch binary.NativeEndian.Uint16(a[2:]) & 0x3fff {
		case netDMAttrReason:
			al.reason = string(bytes.TrimRight(v, "\x00"))
		case netDMAttrSymbol:
			al.symbol = string(bytes.TrimRight(v, "\x00"))
		case netDMAttrPayload:
			al.payload = bytes.Clone(v)
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return al
}

// TestDropMonitorAgrees: the kernel's drop monitor (NET_DM, software
// alerts with payloads) and the agent's drop notifications see the same
// drops: for each of three kinds of drops the lab makes (an nftables ACL,
// a closed UDP port, a full qdisc), as many alerts as notifications, with
// the same reason name. NET_DM reports every namespace; its alerts are
// matched to the lab's frames by their IP and UDP headers, and the drops
// of the lab's hosts (outside the switch's namespace) are told apart.
func TestDropMonitorAgrees(t *testing.T) {
	testskip.Root(t)
	testskip.Feature(t, dropMonitorProbe{}, "drop_monitor")
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)
	dm := startNetDM(t)

	const nACL, nClosed, nBurst = 60, 40, 150
	lab.SendFrames(t, 0, dl.ACLFrames(nACL))
	lab.SendFrames(t, dl.RoutedIdx, dl.ClosedPortFrames(nClosed))
	lab.SendFrames(t, 0, dl.OverflowFrames(nBurst))
	tl := collectDrops(t, d, 500*time.Millisecond)
	alerts := dm.read(t, 2*time.Second)

	kinds := []struct {
		name  string
		frame []byte
	}{
		{"acl", dl.ACLFrames(1)[0]},
		{"closed port", dl.ClosedPortFrames(1)[0]},
		{"qdisc", dl.OverflowFrames(1)[0]},
	}
	dmByKind := map[string]map[string]int{}
	for _, k := range kinds {
		dmByKind[k.name] = map[string]int{}
	}
	matched := 0
	for _, a := range alerts {
		for _, k := range kinds {
			if bytes.Contains(a.payload, k.frame[14:42]) { // IPv4 + UDP headers
				dmByKind[k.name][a.reason]++
				matched++
				break
			}
		}
	}
	t.Logf("NET_DM: %d alerts, %d of this lab: %v; agent: %v", len(alerts), matched, dmByKind, tl.n)
	// NET_DM sees every namespace: the overflow frames the shaper let
	// through are dropped again by their destination host (nothing
	// listens on its UDP port 5001), in the host's namespace, which the
	// agent rightly does not report. Those are exactly the burst minus
	// the qdisc's drops.
	qdisc := dl.QdiscDropped(t)
	if got := dmByKind["qdisc"]["NO_SOCKET"]; uint64(got) != nBurst-qdisc {
		t.Errorf("NET_DM: %d overflow frames dropped at their host, want the %d the qdisc let through", got, nBurst-qdisc)
	}
	delete(dmByKind["qdisc"], "NO_SOCKET")
	agentByReason := map[string]int{}
	for _, k := range kinds {
		if len(dmByKind[k.name]) != 1 {
			t.Errorf("%s drops in the switch: NET_DM reasons %v, want one", k.name, dmByKind[k.name])
		}
		for reason, n := range dmByKind[k.name] {
			agentByReason[reason] += n
		}
	}
	for reason, n := range agentByReason {
		if tl.n[reason] != n {
			t.Errorf("%s: NET_DM %d alerts, the agent %d notifications", reason, n, tl.n[reason])
		}
	}
	for reason, n := range tl.n {
		if _, ok := agentByReason[reason]; !ok {
			t.Errorf("%s: the agent %d notifications, NET_DM none", reason, n)
		}
	}
	if acl := dl.ACLDropped(t); dmByKind["acl"][netlab.ACLDropReason(t)] != int(acl) {
		t.Errorf("NET_DM's ACL drops %v, the nft counter %d", dmByKind["acl"], acl)
	}
}
