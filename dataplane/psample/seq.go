package psample

// Seq follows one psample group's PSAMPLE_ATTR_GROUP_SEQ on one socket.
// The kernel numbers every sample message it sends to the group (group->
// seq++ in psample_sample_packet, before the message is multicast), so a
// gap between consecutive numbers a socket reads is exactly the samples
// sent and not received: dropped at the socket's full buffer (the reader
// then sees ENOBUFS), or never delivered. A sample the kernel could not
// allocate a message for is not numbered and cannot be seen here.
//
// A loss is seen when the next sample of the group arrives: samples lost
// after the last one read are counted once the group sends again (the
// socket's ENOBUFS says at once that some were lost, not how many).
//
// The number is a u32 that wraps. A group that is freed (the last rule
// using it removed) and made again restarts at 0: a step back, or forward
// by 2^31 or more, is taken for such a restart, not for a loss.
type Seq struct {
	next    uint32
	started bool
	// Lost counts the samples the gaps stood for; Restarts the
	// restarts seen.
	Lost     uint64
	Restarts uint64
}

// Observe takes the next sequence number seen and returns the samples
// lost just before it.
func (q *Seq) Observe(seq uint32) uint32 {
	if !q.started {
		q.started, q.next = true, seq+1
		return 0
	}
	gap := seq - q.next
	q.next = seq + 1
	if gap >= 1<<31 {
		q.Restarts++
		return 0
	}
	q.Lost += uint64(gap)
	return gap
}

// Next is the number the next sample should carry: after a fresh group's
// sample n, the samples the kernel numbered (0..n).
func (q *Seq) Next() uint32 { return q.next }

// Reset forgets the sequence (the next number seen starts it again).
func (q *Seq) Reset() { *q = Seq{Lost: q.Lost, Restarts: q.Restarts} }
