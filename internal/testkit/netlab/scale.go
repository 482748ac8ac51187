package netlab

import (
	"fmt"
	"strconv"
	"testing"
)

// NewScale builds a scale lab (lab.sh scale): the switch and collector
// namespaces of New, without hosts, plus n veth pairs "sI" (switch side,
// up, not bridged) <-> "qI" (in namespace Peer, up). With firstIfIndex > 0
// port sI has ifindex firstIfIndex+I-1. Ports lists "s1".."sN"; Hosts and
// the host slices stay empty. Removed in t.Cleanup.
func NewScale(t testing.TB, n, firstIfIndex int) *Lab {
	t.Helper()
	l := newLabOwned(t)
	args := []string{"scale", l.Prefix, strconv.Itoa(n)}
	if firstIfIndex > 0 {
		args = append(args, strconv.Itoa(firstIfIndex))
	}
	if out, err := l.script1(args...); err != nil {
		t.Fatalf("netlab: lab.sh %v: %v\n%s", args, err, out)
	}
	for i := 1; i <= n; i++ {
		l.Ports = append(l.Ports, fmt.Sprintf("s%d", i))
	}
	return l
}

// Peer returns the namespace holding the far ends (qI) of a scale lab's
// ports.
func (l *Lab) Peer() string { return l.Prefix + "-peer" }

// SendOnPeer writes frames out of qI in the peer namespace of a scale lab:
// they arrive on switch port sI.
func (l *Lab) SendOnPeer(t testing.TB, i int, frames [][]byte) {
	t.Helper()
	name := fmt.Sprintf("q%d", i)
	idx := l.LinkIndex(l.Peer(), name)
	if idx == 0 {
		t.Fatalf("netlab: no %s in %s", name, l.Peer())
	}
	if err := l.Do(l.Peer(), func() error { return sendRaw(idx, frames) }); err != nil {
		t.Fatalf("netlab: sending on %s: %v", name, err)
	}
}

// SendOn writes frames out of device dev in namespace ns with a raw packet
// socket: they arrive on dev's veth peer.
func (l *Lab) SendOn(t testing.TB, ns, dev string, frames [][]byte) {
	t.Helper()
	idx := l.LinkIndex(ns, dev)
	if idx == 0 {
		t.Fatalf("netlab: no %s in %s", dev, ns)
	}
	if err := l.Do(ns, func() error { return sendRaw(idx, frames) }); err != nil {
		t.Fatalf("netlab: sending on %s: %v", dev, err)
	}
}
