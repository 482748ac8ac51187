package source

// Hook auto with psample: each port is sampled by the BPF samplers (XDP
// or TC) or through psample, the latter on ports that offload tc (switchdev
// ASIC ports: hw-tc-offload on), whose forwarded traffic never reaches the
// kernel's XDP or TC hooks. Mixed routes each port to its path; a worker
// reads both (MixedReader).

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// Mixed is an agent.SampleSource sampling each port with BPF or psample.
type Mixed struct {
	BPF BPF
	PS  *Psample
	// Offloads tells whether a port offloads tc (psample there); asked
	// once per port, when it is first configured.
	Offloads func(ifindex uint32) bool

	mu   sync.Mutex
	onPS map[uint32]bool
}

// NewMixed returns a Mixed of bpf and ps.
func NewMixed(bpf BPF, ps *Psample, offloads func(ifindex uint32) bool) *Mixed {
	return &Mixed{BPF: bpf, PS: ps, Offloads: offloads, onPS: map[uint32]bool{}}
}

// UsesPsample tells whether port ifindex is sampled through psample.
func (m *Mixed) UsesPsample(ifindex uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.onPS[ifindex]
}

// SetPort implements agent.SampleSource. A monitor port stays on XDP.
func (m *Mixed) SetPort(ifindex uint32, p agent.PortSampling) error {
	m.mu.Lock()
	use, ok := m.onPS[ifindex]
	if !ok {
		// The port's own hook (port_hook) first; under auto, psample
		// where the port offloads tc.
		switch {
		case p.Monitor || p.Hook == "xdp" || p.Hook == "tc":
		case p.Hook == "psample":
			use = true
		default:
			use = m.Offloads != nil && m.Offloads(ifindex)
		}
		m.onPS[ifindex] = use
	}
	m.mu.Unlock()
	if use {
		return m.PS.SetPort(ifindex, p)
	}
	return m.BPF.SetPort(ifindex, p)
}

// RemovePort implements agent.SampleSource.
func (m *Mixed) RemovePort(ifindex uint32) error {
	m.mu.Lock()
	use := m.onPS[ifindex]
	delete(m.onPS, ifindex)
	m.mu.Unlock()
	if use {
		return m.PS.RemovePort(ifindex)
	}
	return m.BPF.RemovePort(ifindex)
}

// PortPool implements agent.PoolReader without a lock: the psample
// table first, then the BPF counters.
func (m *Mixed) PortPool(ifindex uint32) (uint64, uint64) {
	if m.PS.has(ifindex) {
		return m.PS.PortPool(ifindex)
	}
	return m.BPF.PortPool(ifindex)
}

// PortSamples implements agent.SampleCounter (the backoff) for either
// kind of port.
func (m *Mixed) PortSamples(ifindex uint32) (uint64, bool) {
	if m.PS.has(ifindex) {
		return m.PS.PortSamples(ifindex)
	}
	return m.BPF.PortSamples(ifindex)
}

// ExactRate implements agent.ExactRater: the psample ports are sampled
// at their exact rate, the BPF ports at the kernel's power of two.
func (m *Mixed) ExactRate(ifindex uint32) bool { return m.PS.ExactRate(ifindex) }

// has tells whether port ifindex is in p's table (no lock).
func (p *Psample) has(ifindex uint32) bool {
	_, ok := p.table.Load().ports[ifindex]
	return ok
}

// MixedReader is one worker's two sources: its BPF ring (and AF_XDP
// sockets) and its psample socket. The worker waits on the BPF source
// only; a watcher goroutine waits for the psample socket to become
// readable and wakes that wait, once per batch (it waits for the worker
// to have read before it watches again).
type MixedReader struct {
	bpf   *BPFReader
	ps    *PsampleReader
	armed chan struct{}
	stop  atomic.Bool
	done  chan struct{}
}

// NewMixedReader reads bpf and ps; Close stops its watcher.
func NewMixedReader(bpf *BPFReader, ps *PsampleReader) *MixedReader {
	r := &MixedReader{bpf: bpf, ps: ps, armed: make(chan struct{}, 1), done: make(chan struct{})}
	go r.watch()
	return r
}

// watchPoll bounds one wait of the watcher, so that Close is seen.
const watchPoll = time.Second

func (r *MixedReader) watch() {
	defer close(r.done)
	for !r.stop.Load() {
		select {
		case <-r.armed:
		case <-time.After(watchPoll):
			continue
		}
		for !r.stop.Load() {
			ok, err := r.ps.waitReadable(watchPoll)
			if err != nil {
				return
			}
			if ok {
				_ = r.bpf.Wake() // the worker's Read returns; it reads psample next
				break
			}
		}
	}
}

// ReadSamples implements agent.SampleReader: the psample samples queued,
// else a wait on the BPF source (cut short by psample samples), then both.
func (r *MixedReader) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	n, err := r.ps.tryRead(fn)
	if err != nil || n > 0 {
		return n, err
	}
	select {
	case r.armed <- struct{}{}:
	default:
	}
	m, err := r.bpf.ReadSamples(deadline, fn)
	k, perr := r.ps.tryRead(fn)
	if k > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	return m + k, errors.Join(err, perr)
}

// Wake implements agent.Waker.
func (r *MixedReader) Wake() error { return r.bpf.Wake() }

// ReadAtStop implements agent.StopReader: the psample socket's queue (the
// BPF ring's samples wait for the next program, or go with the ring).
func (r *MixedReader) ReadAtStop(fn func(*agent.PacketSample)) (int, error) {
	return r.ps.ReadAtStop(fn)
}

// Close stops the watcher.
func (r *MixedReader) Close() {
	r.stop.Store(true)
	<-r.done
}

// tryRead is ReadSamples without a wait: a follower's queue, or the
// socket (the followers woken for what it handed them).
func (r *PsampleReader) tryRead(fn func(*agent.PacketSample)) (int, error) {
	if r.queue != nil {
		return r.queue.tryRead(fn), nil
	}
	r.fn = fn
	before := r.conn.Load().Overruns.Load()
	n, err := r.conn.Load().TryRead(r.conv)
	if d := r.conn.Load().Overruns.Load() - before; d > 0 {
		r.Stats.Overruns.Add(d)
	}
	for _, q := range r.followers {
		if q != nil {
			err = errors.Join(err, q.kick())
		}
	}
	return n, err
}

// waitReadable waits up to timeout until the reader has samples: its
// socket's, or a follower's queue.
func (r *PsampleReader) waitReadable(timeout time.Duration) (bool, error) {
	if r.queue != nil {
		return r.queue.waitReadable(timeout)
	}
	return r.conn.Load().WaitReadable(timeout)
}

// MixedReaders pairs the BPF readers of dp's sources with ps's readers,
// one per worker.
func MixedReaders(bpf []agent.SampleReader, ps *Psample) []agent.SampleReader {
	out := make([]agent.SampleReader, len(bpf))
	for i, b := range bpf {
		br, ok := b.(*BPFReader)
		if !ok || i >= len(ps.readers) {
			out[i] = b
			continue
		}
		out[i] = NewMixedReader(br, ps.readers[i])
	}
	return out
}
