package dropnotify

import (
	"sync/atomic"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// listSource hands its notifications to ReadDrops once.
type listSource struct{ ns []agent.DropNotification }

func (l *listSource) ReadDrops(fn func(*agent.DropNotification)) (int, error) {
	for i := range l.ns {
		fn(&l.ns[i])
	}
	return len(l.ns), nil
}
func (l *listSource) Wake() error           { return nil }
func (l *listSource) Lost() (uint64, error) { return 0, nil }

// TestMappedSource: ports the map knows are renumbered, others become 0
// (unknown), a drop of only unknown ports is counted and not passed on,
// a drop of no port passes as it is.
func TestMappedSource(t *testing.T) {
	m := map[uint32]uint32{7: 1, 9: 5, 11: 1001}
	src := &listSource{ns: []agent.DropNotification{
		{ReasonName: "a", In: 7},           // a SONiC port
		{ReasonName: "b", In: 7, Out: 9},   // both
		{ReasonName: "c", In: 3, Out: 9},   // in not SONiC's
		{ReasonName: "d", In: 3},           // eth0: not sent
		{ReasonName: "e", In: 3, Out: 4},   // neither: not sent
		{ReasonName: "f"},                  // made locally
		{ReasonName: "g", In: 11, Out: 0},  // a LAG's netdev
		{ReasonName: "h", In: 0, Out: 200}, // egress on an unknown port
	}}
	var other atomic.Uint64
	ms := newMappedSource(src, func(k uint32) (uint32, bool) { v, ok := m[k]; return v, ok }, &other)
	var got []agent.DropNotification
	if _, err := ms.ReadDrops(func(n *agent.DropNotification) { got = append(got, *n) }); err != nil {
		t.Fatal(err)
	}
	want := []agent.DropNotification{{ReasonName: "a", In: 1}, {ReasonName: "b", In: 1, Out: 5}, {ReasonName: "c", Out: 5},
		{ReasonName: "f"}, {ReasonName: "g", In: 1001}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ReasonName != want[i].ReasonName || got[i].In != want[i].In || got[i].Out != want[i].Out {
			t.Errorf("notification %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if other.Load() != 3 {
		t.Errorf("other ports %d, want 3", other.Load())
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ms.ReadDrops(func(*agent.DropNotification) {}) }); n > 0 {
		t.Errorf("%v allocations per batch", n)
	}
}
