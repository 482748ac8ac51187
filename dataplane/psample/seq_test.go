package psample

import "testing"

func TestSeq(t *testing.T) {
	var q Seq
	steps := []struct {
		seq  uint32
		lost uint32
	}{
		{10, 0},         // first: starts the sequence
		{11, 0},         // next
		{15, 3},         // 12, 13, 14 lost
		{0xffffffff, 0}, // a step of 2^32-16: the group was made anew
		{0, 0},          // wraps
		{2, 1},          // 1 lost across the wrap
		{0, 0},          // back: made anew again
	}
	for i, s := range steps {
		if got := q.Observe(s.seq); got != s.lost {
			t.Errorf("step %d (seq %d): lost %d, want %d", i, s.seq, got, s.lost)
		}
	}
	if q.Lost != 4 || q.Restarts != 2 {
		t.Errorf("Lost %d Restarts %d, want 4 and 2", q.Lost, q.Restarts)
	}
	q.Reset()
	if q.Observe(100) != 0 || q.Lost != 4 {
		t.Errorf("after Reset: %+v", q)
	}
}
