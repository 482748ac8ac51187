package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// dataplaneAdapter drives the XDP dataplane for the agent.
type dataplaneAdapter struct {
	dp *dataplane.Dataplane
}

func portConfig(p agent.PortSampling) dataplane.PortConfig {
	mode := dataplane.ModeInline
	if p.Monitor {
		mode = dataplane.ModeMonitor
	}
	return dataplane.PortConfig{Rate: p.KernelRate, Mode: mode, HeaderBytes: p.HeaderBytes, Worker: p.Worker}
}

// SetPort attaches the sampler to a new port or updates an attached one
// through the config map (no re-attach).
func (a *dataplaneAdapter) SetPort(ifindex uint32, p agent.PortSampling) error {
	pc := portConfig(p)
	err := a.dp.UpdatePort(int(ifindex), pc)
	if errors.Is(err, dataplane.ErrNotAttached) {
		err = a.dp.AttachPort(int(ifindex), pc)
	}
	return err
}

// RemovePort detaches the sampler from a port. A port that has vanished
// took its attachment with it; that is not an error.
func (a *dataplaneAdapter) RemovePort(ifindex uint32) error {
	err := a.dp.DetachPort(int(ifindex))
	if errors.Is(err, dataplane.ErrNotAttached) {
		return nil
	}
	return err
}

// PortPool reads the port's pool and drops from the mmap-ed counters.
func (a *dataplaneAdapter) PortPool(ifindex uint32) (uint64, uint64) {
	c, err := a.dp.PortCounters(int(ifindex))
	if err != nil {
		return 0, 0
	}
	return c.Pool, c.Drops
}

// ringSource feeds a worker from its BPF ring buffer.
type ringSource struct {
	r  *dataplane.RingReader
	fn func(*agent.PacketSample)
	ps agent.PacketSample
	// conv is made once: a closure per read would allocate.
	conv func(*dataplane.RawSample)
}

func newRingSource(r *dataplane.RingReader) *ringSource {
	s := &ringSource{r: r}
	s.conv = func(rs *dataplane.RawSample) {
		s.ps = agent.PacketSample{IfIndex: rs.IfIndex, FrameLen: rs.FrameLen, KernelRate: rs.Rate, Header: rs.Header}
		s.fn(&s.ps)
	}
	return s
}

// Wake implements agent.Waker: a configuration change reaches the worker
// without waiting for samples or the next tick.
func (s *ringSource) Wake() error { return s.r.Wake() }

// ReadSamples implements agent.SampleReader.
func (s *ringSource) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	s.fn = fn
	s.r.SetDeadline(deadline)
	n, err := s.r.Read(s.conv)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, os.ErrDeadlineExceeded
	}
	if err != nil {
		return n, fmt.Errorf("ring: %w", err)
	}
	return n, nil
}
