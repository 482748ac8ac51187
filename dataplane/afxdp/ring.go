package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory ordering of the shared rings.
//
// Each ring is a single-producer/single-consumer queue in memory shared
// with the kernel. The protocol is the one of the kernel's
// net/xdp/xsk_queue.h and libxdp's xsk.h:
//
//   - The producer writes descriptors, then publishes them with a
//     store-release of the producer index. The consumer reads the producer
//     index with a load-acquire, so every descriptor written before the
//     index update is visible once it sees the new index.
//   - The consumer reads descriptors, then frees their slots with a
//     store-release of the consumer index; the producer reads the consumer
//     index with a load-acquire before it overwrites those slots, so our
//     reads of a slot complete before the kernel may reuse it.
//
// Go's sync/atomic loads and stores are sequentially consistent, which is
// at least as strong as the acquire/release pairs the kernel uses
// (smp_load_acquire / smp_store_release), and they keep the compiler from
// caching or reordering the index accesses. Only the index that the other
// side writes is read atomically every time; each side keeps a cached copy
// of its own index, which only it ever writes.

// ring is the common part of the four AF_XDP rings: the mmap'ed region
// and pointers to the shared producer and consumer indexes and flags.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
	size     uint32
}

// mapRing maps one ring of a socket and resolves its fields from the
// offsets the kernel reported for it (XDP_MMAP_OFFSETS).
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, descSize uintptr) (ring, error) {
	length := int(off.Desc) + int(size)*int(descSize)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, err
	}
	return ring{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:     size - 1,
		size:     size,
	}, nil
}

// unmap releases the ring's mapping; it is a no-op on an unmapped ring.
func (r *ring) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	*r = ring{}
	return err
}

// rxRing is the RX ring: the kernel produces xdp_desc entries, we consume.
type rxRing struct {
	ring
	descs []unix.XDPDesc
	// cons is our copy of the consumer index (only we write it).
	cons uint32
}

func newRxRing(r ring, off unix.XDPRingOffset) *rxRing {
	descs := unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&r.mem[off.Desc])), r.size)
	return &rxRing{ring: r, descs: descs, cons: atomic.LoadUint32(r.consumer)}
}

// available returns how many descriptors the kernel has published and we
// have not yet consumed (load-acquire of the kernel's producer index).
func (r *rxRing) available() uint32 {
	return atomic.LoadUint32(r.producer) - r.cons
}

// release hands n consumed slots back to the kernel (store-release of the
// consumer index, after all reads of those descriptors and frames).
func (r *rxRing) release(n uint32) {
	r.cons += n
	atomic.StoreUint32(r.consumer, r.cons)
}

// fillRing is the UMEM fill ring: we produce frame addresses (u64) for the
// kernel to receive into.
type fillRing struct {
	ring
	addrs []uint64
	// prod is our copy of the producer index (only we write it).
	prod uint32
}

func newFillRing(r ring, off unix.XDPRingOffset) *fillRing {
	addrs := unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[off.Desc])), r.size)
	return &fillRing{ring: r, addrs: addrs, prod: atomic.LoadUint32(r.producer)}
}

// free returns how many slots we may write (load-acquire of the kernel's
// consumer index: the kernel has finished reading those slots).
func (r *fillRing) free() uint32 {
	return r.size - (r.prod - atomic.LoadUint32(r.consumer))
}

// submit publishes the addresses written since the last submit
// (store-release of the producer index, after the address writes).
func (r *fillRing) submit(prod uint32) {
	r.prod = prod
	atomic.StoreUint32(r.producer, prod)
}

// needWakeup reports whether the kernel asked to be woken up to process
// the fill ring (XDP_RING_NEED_WAKEUP, only set when the socket was bound
// with XDP_USE_NEED_WAKEUP).
func (r *fillRing) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}
