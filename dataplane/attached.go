package dataplane

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
)

// haveTCX is features.ProbeTCX's answer, asked once.
var haveTCX = sync.OnceValue(func() bool { return features.ProbeTCX() == nil })

// KernelAttachment reports how a sampler of sflowswitchd is attached to
// ifindex as the kernel shows it in the calling thread's network
// namespace, whichever process attached it: AttachNative or AttachGeneric
// (an XDP program of ours, xdp_sampler or xdp_pass), AttachTCX (tc_sampler
// at TCX ingress; asked only where the kernel has TCX), AttachClsact (our
// cls_bpf filter, see package clsact), or "" when none is. For tests and tools
// that check a running daemon from outside; a device that is gone has
// none.
func KernelAttachment(ifindex int) (string, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if clsact.LinkGone(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("link %d: %w", ifindex, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.ProgId != 0 {
		name, err := bpf.ProgramName(x.ProgId)
		if err != nil {
			return "", gone(err)
		}
		if ourPrograms[name] {
			if x.AttachMode == nl.XDP_ATTACHED_SKB {
				return AttachGeneric, nil
			}
			return AttachNative, nil
		}
	}
	if haveTCX() {
		r, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if clsact.LinkGone(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("querying TCX ingress of ifindex %d: %w", ifindex, err)
		}
		for _, p := range r.Programs {
			name, err := bpf.ProgramName(uint32(p.ID))
			if err != nil {
				return "", gone(err)
			}
			if name == bpf.TcSamplerProgTcSampler {
				return AttachTCX, nil
			}
		}
	}
	return clsactAttachment(clsact.Ingress, ifindex)
}

// KernelAttachmentEgress reports how an egress sampler of sflowswitchd
// is attached to ifindex as the kernel shows it in the calling thread's
// network namespace: AttachTCX (tc_out_sampler at TCX egress),
// AttachClsact (our cls_bpf filter on the clsact qdisc's egress side), or
// "" when none is.
func KernelAttachmentEgress(ifindex int) (string, error) {
	if haveTCX() {
		r, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXEgress})
		if clsact.LinkGone(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("querying TCX egress of ifindex %d: %w", ifindex, err)
		}
		for _, p := range r.Programs {
			name, err := bpf.ProgramName(uint32(p.ID))
			if err != nil {
				return "", gone(err)
			}
			if name == bpf.TcEgressProgTcOutSampler {
				return AttachTCX, nil
			}
		}
	}
	return clsactAttachment(clsact.Egress, ifindex)
}

// gone is err, or nil when it says a program went away meanwhile (a
// detach racing the query: then nothing is attached).
func gone(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// clsactAttachment is AttachClsact when our filter with our program is on
// side of ifindex's clsact (or ingress) qdisc.
func clsactAttachment(side clsact.Side, ifindex int) (string, error) {
	if ok, err := clsact.Attached(side, ifindex); !ok || err != nil {
		return "", err
	}
	return AttachClsact, nil
}
