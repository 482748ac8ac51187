package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// Attach modes reported by AttachMode.
const (
	AttachNative  = "native"
	AttachGeneric = "generic"
)

// ourPrograms are the kernel names (<= 15 bytes) of the programs in the
// sampler object; a legacy attachment of one of these is ours.
var ourPrograms = map[string]bool{
	bpf.SamplerProgXdpSampler: true,
	bpf.SamplerProgXdpPass:    true,
}

// attachXDP attaches prog to ifindex with a BPF link, native mode first,
// generic mode if the driver refuses. It must run in the port's netns.
func attachXDP(prog *ebpf.Program, ifindex int) (link.Link, string, error) {
	l, nerr := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	if nerr == nil {
		return l, AttachNative, nil
	}
	l, gerr := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
	if gerr == nil {
		return l, AttachGeneric, nil
	}
	return nil, "", fmt.Errorf("attaching XDP: native: %w; generic: %w", nerr, gerr)
}

// inNetns runs fn in the Dataplane's network namespace (netnsutil.Do).
// When that is the namespace the caller runs in, as in the daemon, fn runs
// directly: no setns(2), so no CAP_SYS_ADMIN.
func (d *Dataplane) inNetns(fn func() error) error {
	return netnsutil.Do(d.ns, fn)
}

// removeStaleLegacy removes XDP programs named like ours that are attached
// in legacy (netlink, non-link) mode in the current netns: a crashed run
// that attached that way leaves them behind, while link attachments die
// with their process. The kernel refuses a netlink detach of a program
// owned by a BPF link (EBUSY), so live links of other processes are left
// alone.
func (d *Dataplane) removeStaleLegacy() error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	found, removed := 0, 0
	for _, l := range links {
		attrs := l.Attrs()
		x := attrs.Xdp
		if x == nil || !x.Attached || x.ProgId == 0 {
			continue
		}
		name, err := bpf.ProgramName(x.ProgId)
		if err != nil {
			d.log.Warn("cannot inspect attached XDP program", "link", attrs.Name, "prog_id", x.ProgId, "err", err)
			continue
		}
		if !ourPrograms[name] {
			continue
		}
		found++
		var flags int
		switch x.AttachMode {
		case nl.XDP_ATTACHED_DRV:
			flags = nl.XDP_FLAGS_DRV_MODE
		case nl.XDP_ATTACHED_SKB:
			flags = nl.XDP_FLAGS_SKB_MODE
		default:
			d.log.Warn("stale XDP program in unsupported attach mode left alone", "link", attrs.Name, "prog", name, "prog_id", x.ProgId, "attach_mode", x.AttachMode)
			continue
		}
		err = netlink.LinkSetXdpFdWithFlags(l, -1, flags)
		switch {
		case errors.Is(err, unix.EBUSY):
			d.log.Info("XDP program owned by a live BPF link left alone", "link", attrs.Name, "prog", name, "prog_id", x.ProgId)
		case err != nil:
			return fmt.Errorf("detaching %s (prog id %d) from %s: %w", name, x.ProgId, attrs.Name, err)
		default:
			removed++
			d.log.Info("removed stale legacy XDP program", "link", attrs.Name, "ifindex", attrs.Index, "prog", name, "prog_id", x.ProgId)
		}
	}
	d.log.Info("startup XDP cleanup", "links", len(links), "ours_found", found, "stale_removed", removed)
	return nil
}
