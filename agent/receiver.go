package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// receiverOut is one worker's stream of datagrams to one receiver: its own
// datagram buffer, datagram sequence number and UDP socket, so workers
// never share a lock or a buffer when sending.
type receiverOut struct {
	cfg    ReceiverConfig
	w      *sflow.DatagramWriter
	seq    uint32 // sequence number of the datagram being built
	conn   *net.UDPConn
	raw    syscall.RawConn
	stats  *WorkerStats
	coll   *CollectorStats // this worker's counters of the collector
	uptime func() uint32

	// pending and sendErr carry the datagram through sendFn, which is built
	// once so that sending does not allocate a closure per datagram.
	pending []byte
	sendN   int
	sendErr error
	sendFn  func(fd uintptr) bool

	// While conn is nil (connecting failed with dialErr), connect tries
	// again at nextDial, waiting dialWait longer each time.
	dialErr  error
	dialWait time.Duration
	nextDial time.Time
}

// newReceiverOut opens a worker's socket to receiver cfg, continuing the
// datagram sequence at seq.
func newReceiverOut(cfg ReceiverConfig, agent netip.Addr, subAgent uint32, seq uint32, stats *WorkerStats, uptime func() uint32) (*receiverOut, error) {
	size := cfg.MaxDatagramSize
	if size == 0 {
		size = sflow.DefaultMaxDatagramSize
	}
	w, err := sflow.NewDatagramWriter(agent, subAgent, size)
	if err != nil {
		return nil, fmt.Errorf("receiver %d: %w", cfg.Index, err)
	}
	r := &receiverOut{cfg: cfg, w: w, seq: seq, stats: stats, coll: &CollectorStats{}, uptime: uptime}
	// A collector that cannot be reached now (no route yet, host name not
	// resolved) keeps its stream: its datagrams are counted as send errors
	// and the socket is retried with backoff (connect).
	r.connect()
	// One non-blocking send attempt: a collector that cannot keep up, or a
	// full socket buffer, costs a counted send error, never a stalled
	// worker (an unreachable collector must not block the others).
	r.sendFn = func(fd uintptr) bool {
		r.sendN, r.sendErr = syscall.Write(int(fd), r.pending)
		return true
	}
	r.begin()
	return r, nil
}

func (r *receiverOut) begin() {
	r.seq++
	r.w.Begin(r.seq, r.uptime())
}

// add encodes sample s into the current datagram, sending the datagram
// first when s does not fit. It reports false when s cannot be sent at all
// (larger than the receiver's maximum datagram size).
func (r *receiverOut) add(s sflow.Sample) bool {
	err := r.w.Add(s)
	if errors.Is(err, sflow.ErrDatagramFull) {
		r.flush()
		err = r.w.Add(s)
	}
	if err != nil {
		r.coll.TooLarge.Add(1)
	}
	return err == nil
}

// flush sends the current datagram if it holds any sample and starts the
// next one.
func (r *receiverOut) flush() {
	if r.w.Len() == 0 {
		return
	}
	r.w.SetUptime(r.uptime())
	r.pending = r.w.Bytes()
	if !r.connect() {
		r.sendErr = r.dialErr
	} else if err := r.raw.Write(r.sendFn); err != nil {
		r.sendErr = err
	}
	if r.sendErr != nil || r.sendN != len(r.pending) {
		r.stats.SendErrors.Add(1)
		r.stats.SamplesUnsent.Add(uint64(r.w.Len()))
		r.coll.SendErrors.Add(1)
		r.coll.SamplesUnsent.Add(uint64(r.w.Len()))
	} else {
		r.stats.Datagrams.Add(1)
		r.stats.Bytes.Add(uint64(len(r.pending)))
		r.coll.Datagrams.Add(1)
		r.coll.Bytes.Add(uint64(len(r.pending)))
	}
	r.pending = nil
	r.begin()
}

// close sends what is buffered and closes the socket.
func (r *receiverOut) close() error {
	r.flush()
	if r.conn == nil {
		return nil
	}
	return r.conn.Close()
}
