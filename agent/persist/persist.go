// Package persist is the agent's state that outlives its process: the
// sequence numbers of every sampler, poller and datagram stream, the
// agent's start (sFlow uptime) and the pools of ports detached earlier
// (pool bases). It lives in a memory region the daemon maps from a BPF
// map pinned with the sampler's (dataplane.Pinned.StateMemory): an
// upgrade in place (exec) and a restart after a crash find it as the last
// process left it, and continue the numbers where they stopped.
//
// Each value is written where it changes (a sample's sequence number as
// the sample is encoded, a datagram's once it is sent): a plain store into
// shared memory, no system call. So a crash loses nothing of the state
// itself; it loses what was in flight, and the numbers show it as sFlow
// intends (a gap in a data source's sample sequence numbers: samples
// lost), never a number used twice for different samples.
//
// Layout (64-bit little-endian words): a header of headerWords words
// (magic, the agent's start as CLOCK_MONOTONIC nanoseconds, the slot
// count, the layout version), then slots of one 64-byte cache line each (a key, a value), so
// that two workers writing their own slots never share a line. A key
// names what the value counts (Key); key 0 is a free slot. Slots are
// claimed and freed by their owner through a Store's lock (configuration
// changes, never per sample); values are written by their owner alone.
package persist

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// magic identifies the region ("sflwagst") and version its layout: a
// region of another layout is reset, never read.
const (
	magic   = 0x7473_6761_776c_6673
	version = 1
)

const (
	headerWords = 8
	slotWords   = 8 // one 64-byte cache line
)

// Key names a persistent value: its kind in the top 4 bits and what it
// belongs to below.
type Key uint64

// Kinds of keys.
const (
	kindSampler  = 1
	kindPoller   = 2
	kindStream   = 3
	kindPoolBase = 4
	kindDrops    = 5
	kindPoolCPU  = 6
	kindPsample  = 7
	kindPoolSum  = 8
)

// SamplerKey is the key of a flow sampler's sample sequence number
// (data source ifIndex.ifindex, instance).
func SamplerKey(ifindex uint32, instance int) Key {
	return Key(kindSampler)<<60 | Key(uint32(instance)&0xfffffff)<<32 | Key(ifindex)
}

// PollerKey is the key of a counter poller's sequence number (data source
// type and index, instance).
func PollerKey(dsType, dsIndex uint32, instance int) Key {
	return Key(kindPoller)<<60 | Key(dsType&0xf)<<56 | Key(uint32(instance)&0xffffff)<<32 | Key(dsIndex)
}

// StreamKey is the key of a datagram stream's sequence number: the last
// datagram sent by sub-agent subAgent to receiver.
func StreamKey(subAgent uint32, receiver int) Key {
	return Key(kindStream)<<60 | Key(uint32(receiver)&0xffffff)<<32 | Key(subAgent)
}

// PoolBaseKey is the key of a port's pool base: the pool counted by its
// earlier attachments.
func PoolBaseKey(ifindex uint32) Key {
	return Key(kindPoolBase)<<60 | Key(ifindex)
}

// PoolCPUKey is the key of line group of a port's per-CPU pools as its
// samples told them (agent's portPool): LineWords-1 CPUs per line, after
// the port's pool base that identifies the attachment they belong to.
func PoolCPUKey(ifindex, group uint32) Key {
	return Key(kindPoolCPU)<<60 | Key(group&0xfffffff)<<32 | Key(ifindex)
}

// PoolSumKey is the key of a port's pools as its samples told them
// beyond the per-CPU counts (agent's portPool): a line of the port's pool
// base (the attachment they belong to), the latest every-CPU sums of
// ingress and egress, and the pool of the latest sample.
func PoolSumKey(ifindex uint32) Key {
	return Key(kindPoolSum)<<60 | Key(ifindex)
}

// PsampleKey is the key of a psample port's pool and drops (a line: the
// pool, then the drops), as its reader last counted them.
func PsampleKey(ifindex uint32) Key {
	return Key(kindPsample)<<60 | Key(ifindex)
}

// DropsKey is the key of the discarded_packet sequence number of data
// source 0:0 (the drop reporter), a line: the sequence number, then the
// drops field as last reported.
func DropsKey() Key { return Key(kindDrops) << 60 }

// Store is the state region. Claim and Free are safe for concurrent use;
// a claimed value belongs to its claimer alone.
type Store struct {
	words   []uint64
	slots   int
	adopted bool
	start   time.Time

	mu sync.Mutex
	// index finds a key's slot; free are the free slots (a stack).
	index map[Key]int
	free  []int
	// claimed are the slots this process claimed (inherited ones not yet
	// claimed are freed by Sweep).
	claimed map[int]bool
}

// Words returns the size in words of a region holding slots slots.
func Words(slots int) int { return headerWords + slots*slotWords }

// Open makes a Store of mem (8-byte aligned, a multiple of 8 bytes long;
// from dataplane.Pinned.StateMemory or a plain slice). A region this package
// wrote before, with the same slot count, is adopted (Adopted) with its
// values and the agent's start; anything else is reset.
func Open(mem []byte) (*Store, error) {
	if len(mem) < Words(1)*8 || len(mem)%8 != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return nil, fmt.Errorf("persist: a region of %d bytes (want a multiple of 8, at least %d)", len(mem), Words(1)*8)
	}
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/8)
	s := &Store{words: w, slots: (len(w) - headerWords) / slotWords, claimed: map[int]bool{}, index: map[Key]int{}}
	now := monotonic()
	if atomic.LoadUint64(&w[0]) == magic && atomic.LoadUint64(&w[3]) == version && atomic.LoadUint64(&w[2]) == uint64(s.slots) {
		if start := atomic.LoadUint64(&w[1]); start <= now {
			s.adopted = true
			s.start = time.Now().Add(-time.Duration(now - start))
		}
	}
	if !s.adopted {
		clear(w)
		atomic.StoreUint64(&w[1], now)
		atomic.StoreUint64(&w[2], uint64(s.slots))
		atomic.StoreUint64(&w[3], version)
		atomic.StoreUint64(&w[0], magic) // last: a half-written header is reset
		s.start = time.Now()
	}
	for i := s.slots - 1; i >= 0; i-- {
		k := Key(atomic.LoadUint64(s.key(i)))
		if _, dup := s.index[k]; k == 0 || dup {
			atomic.StoreUint64(s.key(i), 0)
			s.free = append(s.free, i)
			continue
		}
		s.index[k] = i
	}
	return s, nil
}

// New is Open on memory of its own, for an agent without pinned state.
func New(slots int) *Store {
	s, err := Open(make([]byte, Words(slots)*8))
	if err != nil {
		panic(err) // slots < 1 only
	}
	return s
}

// monotonic is CLOCK_MONOTONIC in nanoseconds: the clock of the stored
// start, the same for every process of this boot (Go's monotonic readings
// are not comparable across processes).
func monotonic() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Adopted reports whether Open found the state of an earlier process.
func (s *Store) Adopted() bool { return s.adopted }

// Start is the agent's start: this process's own start time, or the
// first process's when the region was adopted (sFlow uptime continues).
func (s *Store) Start() time.Time { return s.start }

// ErrFull is Claim's error when every slot is taken.
var ErrFull = errors.New("persist: no free slot")

// Claim returns the value of key k, claiming a free slot for it (value 0)
// when no slot holds it. The value is the caller's until Free; it is read
// and written in place (atomic loads and stores; the owner is the only
// writer).
func (s *Store) Claim(k Key) (*uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[k]; ok {
		s.claimed[i] = true
		return s.value(i), nil
	}
	if len(s.free) == 0 {
		return nil, ErrFull
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	for j := 1; j < slotWords; j++ { // the value and the rest of its line (ClaimLine)
		atomic.StoreUint64(&s.words[headerWords+i*slotWords+j], 0)
	}
	atomic.StoreUint64(s.key(i), uint64(k)) // after the value: never a stale value under k
	s.index[k] = i
	s.claimed[i] = true
	return s.value(i), nil
}

// LineWords is the number of words ClaimLine returns.
const LineWords = slotWords - 1

// ClaimLine is Claim for a line of LineWords words (the slot's value and
// the rest of its cache line): all zero when newly claimed.
func (s *Store) ClaimLine(k Key) ([]uint64, error) {
	v, err := s.Claim(k)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice(v, LineWords), nil
}

// Free releases key k's slot (its value is forgotten).
func (s *Store) Free(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[k]; ok {
		s.release(k, i)
	}
}

// release frees slot i of key k. Called with mu held.
func (s *Store) release(k Key, i int) {
	atomic.StoreUint64(s.key(i), 0)
	delete(s.index, k)
	delete(s.claimed, i)
	s.free = append(s.free, i)
}

// Sweep frees the slots inherited from an earlier process that this one
// has not claimed (what it no longer configures), and returns how many.
// The daemon calls it once its configuration has settled.
func (s *Store) Sweep() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, i := range s.index {
		if !s.claimed[i] {
			s.release(k, i)
			n++
		}
	}
	return n
}

// Used returns how many slots hold a key.
func (s *Store) Used() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}

// Slots returns the region's slot count.
func (s *Store) Slots() int { return s.slots }

func (s *Store) key(i int) *uint64   { return &s.words[headerWords+i*slotWords] }
func (s *Store) value(i int) *uint64 { return &s.words[headerWords+i*slotWords+1] }
