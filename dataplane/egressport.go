package dataplane

import (
	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"
)

// A port's egress sampler (package egress) as the loader keeps it: the
// port's egress attachment, counters and directions.

// ownsQdisc reports whether p's ingress attachment is our clsact filter on
// a qdisc this Dataplane created.
func (p *port) ownsQdisc() bool {
	if f, ok := p.link.(*clsact.Filter); ok && f != nil {
		return f.OwnQdisc()
	}
	return p.out != nil && p.out.OwnQdisc()
}

// egressAttachMode reports how the egress sampler is attached to ifindex:
// AttachTCX, AttachClsact, or "" when the port is not sampled at egress.
func (d *Dataplane) egressAttachMode(ifindex int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.ports[ifindex]; ok {
		return p.egressMode()
	}
	return ""
}

// PortKind tells the sampled path what it may read about a port's frames
// beyond their bytes (dataplane/bpf/sampler.h PORT_KIND_*): a tunnel device's outer
// header.
type PortKind uint32

const (
	// PortPlain is any port that is not a tunnel device.
	PortPlain PortKind = 0
	// PortVXLAN is a VXLAN device.
	PortVXLAN PortKind = 1
	// PortGRE is an Ethernet-over-GRE device (gretap, ip6gretap).
	PortGRE PortKind = 2
)

// KindOf returns the PortKind of a link of netlink kind k (ports.Info.Kind).
func KindOf(k string) PortKind {
	switch k {
	case "vxlan":
		return PortVXLAN
	case "gretap", "ip6gretap":
		return PortGRE
	}
	return PortPlain
}
