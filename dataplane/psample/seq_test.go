package psample

import "testing"

// TestSeq: gaps, wraps and restarts as the kernel makes them.
func TestSeq(t *testing.T) {
	var q Seq
	steps := []struct {
		seq  uint32
		lost uint32
	}{
		{10, 0}, // first: starts the sequence
		{11, 0}, // next
		{15, 0}, // 12, 13, 14 missing, within the window: not yet lost
		{79, 3}, // 12, 13, 14 fall out of the window (15 + 64 = 79); 16..78 missing
		{80, 1}, // 16 falls out
	}
	for i, s := range steps {
		if got := q.Observe(s.seq); got != s.lost {
			t.Errorf("step %d (seq %d): lost %d, want %d", i, s.seq, got, s.lost)
		}
	}
	// The window then missed 17..78 (62 numbers); 300 pushes them and
	// 81..236 out (62 + 156 lost), 237..299 stay missing.
	if got := q.Observe(300); got != 62+156 {
		t.Errorf("seq 300: lost %d, want %d", got, 62+156)
	}
	if q.Missing() != 63 {
		t.Errorf("missing %d, want 63", q.Missing())
	}
	// A step back beyond the window: the group was made anew; what the
	// window missed is lost.
	if got := q.Observe(0); got != 63 || q.Restarts != 1 {
		t.Errorf("restart: lost %d, restarts %d; want 63, 1", got, q.Restarts)
	}
	if q.Lost != 3+1+218+63 {
		t.Errorf("Lost %d, want %d", q.Lost, 3+1+218+63)
	}
}

// TestSeqReordered: numbers a little out of order, and one the kernel sent
// twice (two CPUs racing on the group's unlocked increment), are no loss
// and no restart; the sequence wraps at 2^32.
func TestSeqReordered(t *testing.T) {
	var q Seq
	for _, s := range []uint32{5, 7, 6, 8, 9, 9, 12, 10, 11, 13} {
		if got := q.Observe(s); got != 0 {
			t.Errorf("seq %d: lost %d", s, got)
		}
	}
	for s := uint32(14); s < 14+2*Window; s++ {
		q.Observe(s)
	}
	if q.Lost != 0 || q.Restarts != 0 || q.Missing() != 0 {
		t.Errorf("reordered: Lost %d Restarts %d Missing %d, want none", q.Lost, q.Restarts, q.Missing())
	}
	var w Seq
	for _, s := range []uint32{0xfffffffe, 0, 0xffffffff, 1} {
		w.Observe(s)
	}
	if w.Missing() != 0 || w.Restarts != 0 {
		t.Errorf("across the wrap: Missing %d Restarts %d", w.Missing(), w.Restarts)
	}
}

// TestSeqStartAt: a group known to be new starts at 0, so samples lost
// before the first one read count too; Reset counts what the window
// missed.
func TestSeqStartAt(t *testing.T) {
	var q Seq
	q.StartAt(0)
	if got := q.Observe(3); got != 0 || q.Missing() != 3 {
		t.Fatalf("first seq 3: lost %d missing %d; want 0 (not yet), 3", got, q.Missing())
	}
	if got := q.Reset(); got != 3 || q.Lost != 3 {
		t.Errorf("Reset: %d lost (Lost %d), want 3", got, q.Lost)
	}
	if q.Observe(100) != 0 || q.Missing() != 0 {
		t.Errorf("after Reset the next number starts afresh: missing %d", q.Missing())
	}
}

// TestSeqSettle: once the socket is quiet, the numbers the window misses
// are lost at once, and counted once.
func TestSeqSettle(t *testing.T) {
	var q Seq
	for _, s := range []uint32{0, 1, 5, 9} {
		q.Observe(s)
	}
	if got := q.Settle(); got != 6 || q.Lost != 6 {
		t.Errorf("Settle: %d lost (Lost %d), want 6 (2, 3, 4, 6, 7, 8)", got, q.Lost)
	}
	if got := q.Settle(); got != 0 {
		t.Errorf("second Settle: %d, want 0", got)
	}
	if got := q.Observe(3); got != 0 || q.Restarts != 0 {
		t.Errorf("a number settled as lost arriving late: lost %d restarts %d, want none", got, q.Restarts)
	}
	// 10..73 never arrive: the step to 74 pushes 10 out (lost), the rest
	// wait in the window.
	if got := q.Observe(10 + Window); got != 1 || q.Lost != 7 {
		t.Errorf("then seq %d: lost %d (Lost %d), want 1 (7)", 10+Window, got, q.Lost)
	}
}
