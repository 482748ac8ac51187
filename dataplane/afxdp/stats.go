package afxdp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stats are the kernel's per-socket counters (getsockopt XDP_STATISTICS,
// struct xdp_statistics). They count since the socket was bound.
//
// What counts what on the receive path in copy mode (net/xdp/xsk.c,
// xsk_rcv_check and __xsk_rcv; net/xdp/xsk_buff_pool.c, xp_alloc):
//
//   - RxDropped: frames redirected to the socket but dropped because they
//     exceed the frame size (FrameSize-256), or because no UMEM frame
//     could be taken from the fill ring (fill ring empty). A fill-ring-
//     empty drop increments both RxDropped and RxFillRingEmptyDescs.
//   - RxRingFull: frames copied into a UMEM frame but dropped because the
//     RX ring had no free slot (the frame goes back to the kernel's
//     internal free list, not to the fill ring).
//   - RxFillRingEmptyDescs: attempts to take a frame from an empty fill
//     ring. In copy mode each is also an RxDropped; it is not a separate
//     drop count and must not be added to RxDropped.
//
// So in copy mode, frames redirected to the socket = frames received +
// RxDropped + RxRingFull. Frames redirected to a socket bound to another
// device or queue are dropped by XDP_REDIRECT and counted by neither.
type Stats struct {
	RxDropped            uint64
	RxInvalidDescs       uint64
	TxInvalidDescs       uint64
	RxRingFull           uint64
	RxFillRingEmptyDescs uint64
	TxRingEmptyDescs     uint64
	// Extended is false when the kernel only knows the original
	// three-counter struct (before Linux 5.9). RxDropped then includes
	// RX-ring-full drops, and the last three counters are zero.
	Extended bool
}

// sizeofStatsV1 is the original struct xdp_statistics (rx_dropped,
// rx_invalid_descs, tx_invalid_descs).
const sizeofStatsV1 = 3 * 8

// Stats reads the socket's counters.
func (s *Socket) Stats() (Stats, error) {
	if s.closed {
		return Stats{}, errors.New("afxdp: stats on closed socket")
	}
	var ks unix.XDPStatistics
	n := uint32(unsafe.Sizeof(ks))
	if err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&ks), &n); err != nil {
		return Stats{}, fmt.Errorf("afxdp: XDP_STATISTICS: %w", err)
	}
	st := Stats{
		RxDropped:      ks.Rx_dropped,
		RxInvalidDescs: ks.Rx_invalid_descs,
		TxInvalidDescs: ks.Tx_invalid_descs,
	}
	switch {
	case n >= uint32(unsafe.Sizeof(ks)):
		st.RxRingFull = ks.Rx_ring_full
		st.RxFillRingEmptyDescs = ks.Rx_fill_ring_empty_descs
		st.TxRingEmptyDescs = ks.Tx_ring_empty_descs
		st.Extended = true
	case n >= sizeofStatsV1:
		// Old kernel: the short struct, nothing more was written.
	default:
		return Stats{}, fmt.Errorf("afxdp: XDP_STATISTICS returned %d bytes, want at least %d", n, sizeofStatsV1)
	}
	return st, nil
}
