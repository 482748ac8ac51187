package dataplane

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/testkit/netlab"
)

// openDropsFor opens the drop program for the lab's switch namespace.
func openDropsFor(t *testing.T, lab *netlab.Lab, limit uint32) *Drops {
	t.Helper()
	ino, err := NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDrops(DropsConfig{Netns: ino, Limit: limit, HeaderBytes: DefaultDropHeaderBytes})
	if err != nil {
		t.Fatalf("OpenDrops: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// dropTally is what the notifications said, per kernel reason name.
type dropTally struct {
	n      map[string]int
	ports  map[string]map[[2]uint32]int // reason -> (in, out) -> notifications
	header map[string][]byte            // reason -> first header seen
	symbol map[string]string
}

// collectDrops reads notifications until none came for quiet.
func collectDrops(t *testing.T, d *Drops, quiet time.Duration) dropTally {
	t.Helper()
	tl := dropTally{n: map[string]int{}, ports: map[string]map[[2]uint32]int{}, header: map[string][]byte{}, symbol: map[string]string{}}
	var ev DropEvent
	for {
		d.SetDeadline(time.Now().Add(quiet))
		_, err := d.Read(&ev, func(e *DropEvent) {
			tl.n[e.ReasonName]++
			if tl.ports[e.ReasonName] == nil {
				tl.ports[e.ReasonName] = map[[2]uint32]int{}
			}
			tl.ports[e.ReasonName][[2]uint32{e.InIfIndex, e.OutIfIndex}]++
			if _, ok := tl.header[e.ReasonName]; !ok {
				tl.header[e.ReasonName] = bytes.Clone(e.Header)
				tl.symbol[e.ReasonName] = e.Symbol
			}
		})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return tl
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// reasonCode returns the kernel code of a reason name.
func reasonCode(t *testing.T, d *Drops, name string) uint32 {
	t.Helper()
	for c, n := range d.reasons {
		if n == name {
			return c
		}
	}
	t.Fatalf("kernel has no drop reason %s", name)
	return 0
}

// TestDropNotifications: three real drop reasons in the switch namespace,
// under the limit: notifications per reason == the true count (nft rule
// counter, frames sent, qdisc drop counter) == the per-reason counter;
// ingress and egress ports are the right ones; the header is the packet's.
// Meanwhile a second lab (another namespace of ours) drops the same
// traffic, and none of it is notified or counted.
func TestDropNotifications(t *testing.T) {
	lab := netlab.New(t, 3)
	other := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ol := other.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)

	const nACL, nClosed, nBurst = 60, 40, 150
	send := func(l *netlab.Lab, x *netlab.DropLab) {
		l.SendFrames(t, 0, x.ACLFrames(nACL))
		l.SendFrames(t, x.RoutedIdx, x.ClosedPortFrames(nClosed))
		l.SendFrames(t, 0, x.OverflowFrames(nBurst))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); send(other, ol) }()
	send(lab, dl)
	wg.Wait()

	tl := collectDrops(t, d, 500*time.Millisecond)
	acl, qdisc := dl.ACLDropped(t), dl.QdiscDropped(t)
	if acl != nACL || qdisc == 0 || qdisc >= nBurst {
		t.Fatalf("lab truth: nft counter %d (sent %d), qdisc drops %d of %d", acl, nACL, qdisc, nBurst)
	}
	if oa, oq := ol.ACLDropped(t), ol.QdiscDropped(t); oa != nACL || oq == 0 {
		t.Fatalf("the other namespace did not drop: nft %d, qdisc %d", oa, oq)
	}
	counts, err := d.ReasonCounts()
	if err != nil {
		t.Fatal(err)
	}
	p := func(i int) uint32 { return uint32(portIndex(t, lab, i)) }
	aclReason := netlab.ACLDropReason(t)
	for _, c := range []struct {
		reason  string
		truth   uint64
		in, out uint32
	}{
		{aclReason, acl, p(0), 0},
		{"NO_SOCKET", nClosed, p(dl.RoutedIdx), 0},
		{"QDISC_DROP", qdisc, p(0), p(dl.ShapedIdx)},
	} {
		if got := uint64(tl.n[c.reason]); got != c.truth {
			t.Errorf("%s: %d notifications, true count %d (all: %v)", c.reason, got, c.truth, tl.n)
		}
		if got := counts[reasonCode(t, d, c.reason)]; got != c.truth {
			t.Errorf("%s: counter %d, true count %d", c.reason, got, c.truth)
		}
		if got := tl.ports[c.reason][[2]uint32{c.in, c.out}]; uint64(got) != c.truth {
			t.Errorf("%s: %d notifications with in=%d out=%d, want all %d: %v", c.reason, got, c.in, c.out, c.truth, tl.ports[c.reason])
		}
		t.Logf("%s: %d drops, function %q", c.reason, c.truth, tl.symbol[c.reason])
	}
	if h := tl.header[aclReason]; !bytes.Equal(h, dl.ACLFrames(1)[0]) {
		t.Errorf("%s header %x, want the frame sent %x", aclReason, h, dl.ACLFrames(1)[0])
	}
	if h := tl.header["QDISC_DROP"]; len(h) != DefaultDropHeaderBytes || !bytes.Equal(h, dl.OverflowFrames(1)[0][:DefaultDropHeaderBytes]) {
		t.Errorf("QDISC_DROP header %x, want the first 128 bytes of the frame", h)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, v := range counts {
		sum += v
	}
	total := 0
	for _, v := range tl.n {
		total += v
	}
	if st.Drops != sum || st.Notified != uint64(total) || st.Suppressed != 0 || st.RingFull != 0 || st.Uncounted != 0 {
		t.Errorf("stats %+v; per-reason sum %d, notifications read %d", st, sum, total)
	}
	// Only this lab's drops: everything counted is this lab's three kinds
	// (plus nothing else the switch may drop on its own).
	if want := acl + nClosed + qdisc; st.Drops < want || st.Drops > want+5 {
		t.Errorf("counted %d drops, this namespace made %d (other namespace's leaking in?)", st.Drops, want)
	}
	ports, err := d.PortCounts()
	if err != nil {
		t.Fatal(err)
	}
	if ports[p(0)] < acl || ports[p(dl.RoutedIdx)] != nClosed || ports[p(dl.ShapedIdx)] != qdisc {
		t.Errorf("per-port counts %v: want p1>=%d, p2=%d, p3=%d", ports, acl, nClosed, qdisc)
	}
}

// TestDropLimit: above the limit, notifications + suppressed == the true
// count, the per-reason counter is exact, and no more than the limit is
// notified per second.
func TestDropLimit(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, DefaultDropLimit)
	const n = 2000
	start := time.Now()
	lab.SendFrames(t, 0, dl.ACLFrames(n))
	elapsed := time.Since(start)
	tl := collectDrops(t, d, 300*time.Millisecond)
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := d.ReasonCounts()
	if err != nil {
		t.Fatal(err)
	}
	acl := dl.ACLDropped(t)
	if acl != n {
		t.Fatalf("nft counted %d of %d", acl, n)
	}
	aclReason := netlab.ACLDropReason(t)
	got := uint64(tl.n[aclReason])
	if counts[reasonCode(t, d, aclReason)] != acl {
		t.Errorf("per-reason counter %d, true %d", counts[reasonCode(t, d, aclReason)], acl)
	}
	if got+st.Suppressed+st.RingFull != st.Drops || st.Drops < acl {
		t.Errorf("notified %d + suppressed %d + ring full %d != drops %d (true ACL drops %d)", got, st.Suppressed, st.RingFull, st.Drops, acl)
	}
	if max := uint64(DefaultDropLimit) * uint64(elapsed/time.Second+2); got > max || got == 0 {
		t.Errorf("%d notifications in %v with a limit of %d/s", got, elapsed, DefaultDropLimit)
	}
	t.Logf("%d drops in %v: %d notified, %d suppressed", acl, elapsed, got, st.Suppressed)

	// Configure: limit 0 counts without notifying.
	if err := d.Configure(DropsConfig{Limit: 0, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	lab.SendFrames(t, 0, dl.ACLFrames(10))
	if tl := collectDrops(t, d, 200*time.Millisecond); len(tl.n) != 0 {
		t.Errorf("limit 0 notified %v", tl.n)
	}
	st2, _ := d.Stats()
	if st2.Drops-st.Drops < 10 || st2.Suppressed-st.Suppressed != st2.Drops-st.Drops {
		t.Errorf("limit 0: stats %+v after %+v", st2, st)
	}
}
