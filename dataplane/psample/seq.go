package psample

import "math/bits"

// Seq follows one psample group's PSAMPLE_ATTR_GROUP_SEQ on one socket.
// The kernel numbers every sample message it sends to the group (group->
// seq++ in psample_sample_packet, before the message is multicast), so a
// number never seen is a sample sent and not received: dropped at the
// socket's full buffer (the reader then sees ENOBUFS), or never
// delivered. A sample the kernel could not allocate a message for is not
// numbered and cannot be seen here.
//
// The increment takes no lock and the message is multicast from whichever
// CPU sampled, so numbers arrive slightly out of order (5, 7, 6, 8), and
// two CPUs racing on the increment can even send one number twice. A
// number is therefore counted lost only once it has fallen out of a
// window of the Window latest numbers without arriving; a number that
// arrives late within the window fills its place (no loss, no restart),
// and one seen twice is taken once.
//
// The number is a u32 that wraps. A group that is freed (the last rule
// using it removed) and made again restarts at 0: a number behind the
// window (further back than Window, less than 2^31) is taken for such a
// restart, not for a loss; the numbers still missing from the window are
// then counted lost. A restart that lands ahead of the old numbers (a
// group re-created after 2^31 or more samples) cannot be told from a gap
// by the numbers alone: the group's PSAMPLE_CMD_NEW_GROUP and DEL_GROUP
// announcements tell it (Reset).
type Seq struct {
	next    uint32 // the number after the latest seen
	seen    uint64 // bit i: number next-1-i arrived (or came before the start)
	started bool
	// Lost counts the samples the gaps stood for; Restarts the
	// restarts seen.
	Lost     uint64
	Restarts uint64
}

// Window is how many of a group's latest numbers a Seq waits for before
// it counts a missing one lost.
const Window = 64

// Observe takes the next sequence number seen and returns the samples
// now known lost: numbers that fell out of the window without arriving.
func (q *Seq) Observe(seq uint32) uint32 {
	if !q.started {
		q.start(seq)
		return 0
	}
	if ahead := seq - q.next; ahead < 1<<31 {
		// A newer number: the window moves by ahead+1; the numbers
		// between arrive later or not at all.
		k := uint64(ahead) + 1
		var lost uint64
		if k >= Window {
			lost = uint64(Window-bits.OnesCount64(q.seen)) + (k - Window) // the old window, and what never entered
			q.seen = 0
		} else {
			lost = uint64(bits.OnesCount64(^q.seen >> (Window - k))) // the k oldest leave
			q.seen <<= k
		}
		q.seen |= 1
		q.next = seq + 1
		q.Lost += lost
		return uint32(min(lost, 1<<32-1))
	}
	age := q.next - 1 - seq // behind
	if age < Window {
		q.seen |= 1 << age // late, or twice: no loss
		return 0
	}
	// Behind the window: the group was made anew. What the window
	// still missed is lost.
	lost := uint64(Window - bits.OnesCount64(q.seen))
	q.Restarts++
	q.Lost += lost
	q.start(seq)
	return uint32(lost)
}

// StartAt begins the sequence before any number is seen, at first: for a
// group known to be new (its rule just installed, nothing else using its
// number), whose first sample is numbered first; a later first number
// means the samples before it were lost (counted once out of the window).
func (q *Seq) StartAt(first uint32) {
	q.start(first - 1)
}

// start begins the sequence at seq: the numbers before it are not
// waited for.
func (q *Seq) start(seq uint32) {
	q.started, q.next, q.seen = true, seq+1, ^uint64(0)
}

// Next is the number after the latest seen: after a fresh group's sample
// n, the samples the kernel numbered (0..n).
func (q *Seq) Next() uint32 { return q.next }

// Settle counts the numbers the window still misses as lost and returns
// how many: for a socket that has gone quiet (a read that waited and got
// nothing), where no message reordered across CPUs can still be on its
// way, so that losses at the end of a burst are counted without waiting
// for Window more samples. A missing number that arrives after all is
// then taken as seen (no loss taken back: drops fields never decrease).
func (q *Seq) Settle() uint32 {
	if !q.started {
		return 0
	}
	lost := uint32(q.Missing())
	q.seen = ^uint64(0)
	q.Lost += uint64(lost)
	return lost
}

// Missing is how many numbers of the window have not arrived (yet).
func (q *Seq) Missing() int { return Window - bits.OnesCount64(q.seen) }

// Reset forgets the sequence (the next number seen starts it again); the
// numbers the window still missed are counted lost and returned.
func (q *Seq) Reset() uint32 {
	lost := uint64(0)
	if q.started {
		lost = uint64(q.Missing())
	}
	*q = Seq{Lost: q.Lost + lost, Restarts: q.Restarts}
	return uint32(lost)
}
