package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// dropSource adapts dataplane.Drops to agent.DropSource.
type dropSource struct {
	d  *dataplane.Drops
	ev dataplane.DropEvent
	n  agent.DropNotification
	fn func(*agent.DropNotification)
	cb func(*dataplane.DropEvent)
}

func newDropSource(d *dataplane.Drops) *dropSource {
	s := &dropSource{d: d}
	s.cb = s.convert
	return s
}

func (s *dropSource) convert(e *dataplane.DropEvent) {
	s.n = agent.DropNotification{
		ReasonName: e.ReasonName, Symbol: e.Symbol, In: e.InIfIndex, Out: e.OutIfIndex,
		Queue: e.Queue, QueueKnown: agent.EgressQueueKnown(e.ReasonName, e.OutIfIndex),
		FrameLen: e.FrameLen, HeaderProto: sflow.HeaderProtocol(e.HeaderProto), Header: e.Header,
	}
	s.fn(&s.n)
}

func (s *dropSource) ReadDrops(fn func(*agent.DropNotification)) (int, error) {
	s.fn = fn
	return s.d.Read(&s.ev, s.cb)
}

func (s *dropSource) Wake() error { return s.d.Wake() }

func (s *dropSource) Lost() (uint64, error) {
	st, err := s.d.Stats()
	return st.Suppressed + st.RingFull, err
}

// drops runs dropped-packet notifications (issue 12): the kernel program
// while enabled, and the reporter that turns its notifications into
// discarded_packet samples. Settings drops, drops_limit and
// drops_header_bytes apply at start and on SIGHUP.
type drops struct {
	log      *slog.Logger
	reporter *agent.DropReporter

	mu     sync.Mutex
	ctx    context.Context // the daemon's run context, set by start
	dp     *dataplane.Drops
	cancel context.CancelFunc
	done   chan struct{}
}

func newDrops(subAgent uint32, log *slog.Logger) *drops {
	return &drops{log: log, reporter: agent.NewDropReporter(subAgent, log)}
}

// start applies the settings for the first time; notifications stop at
// the latest when ctx ends.
func (d *drops) start(ctx context.Context, s Settings) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	return d.apply(s)
}

// apply turns notifications on or off and sets the limit and header size
// (SIGHUP). A failure leaves notifications off and is reported; nothing
// else of the daemon depends on it. Before start and after the daemon's
// context ended it does nothing.
func (d *drops) apply(s Settings) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.ctx.Err() != nil {
		return nil
	}
	ctx := d.ctx
	if s.Drops == "off" {
		return d.stopLocked()
	}
	cfg := dataplane.DropsConfig{Limit: uint32(s.DropsLimit), HeaderBytes: s.DropsHeaderBytes}
	if d.dp != nil {
		if err := d.dp.Configure(cfg); err != nil {
			return fmt.Errorf("drop notifications: %w", err)
		}
		return nil
	}
	dp, err := dataplane.OpenDrops(cfg)
	if err != nil {
		return fmt.Errorf("drop notifications unavailable: %w", err)
	}
	d.dp = dp
	rctx, cancel := context.WithCancel(ctx)
	d.cancel, d.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		d.reporter.Run(rctx, newDropSource(dp))
	}(d.done)
	d.log.Info("drop notifications on", "limit", s.DropsLimit, "header_bytes", s.DropsHeaderBytes)
	return nil
}

// stop turns notifications off and unloads the program.
func (d *drops) stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopLocked()
}

func (d *drops) stopLocked() error {
	if d.dp == nil {
		return nil
	}
	d.cancel()
	<-d.done
	err := d.dp.Close()
	d.dp = nil
	if err != nil {
		return fmt.Errorf("drop notifications: %w", err)
	}
	d.log.Info("drop notifications off")
	return nil
}

// writeMetrics writes the drop metrics: exact drops per kernel reason and
// per port, and what became of the notifications.
func (d *drops) writeMetrics(bw *bufio.Writer, portName func(uint32) string) {
	if d == nil {
		return
	}
	st := d.reporter.Stats()
	counter := func(name, help string) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
	}
	counter("sflowswitchd_drop_notifications_sent_total", "discarded_packet samples encoded (one per notification).")
	fmt.Fprintf(bw, "sflowswitchd_drop_notifications_sent_total %d\n", st.Notifications.Load())
	counter("sflowswitchd_drop_notifications_unsent_total", "Notifications that arrived while no receiver was configured (counted in the drops field).")
	fmt.Fprintf(bw, "sflowswitchd_drop_notifications_unsent_total %d\n", st.Unsent.Load())
	counter("sflowswitchd_drop_datagrams_sent_total", "Datagrams of the drop sub-agent sent to collectors.")
	fmt.Fprintf(bw, "sflowswitchd_drop_datagrams_sent_total %d\n", st.Sender.Datagrams.Load())
	counter("sflowswitchd_drop_send_errors_total", "Datagrams of the drop sub-agent the socket refused.")
	fmt.Fprintf(bw, "sflowswitchd_drop_send_errors_total %d\n", st.Sender.SendErrors.Load())

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dp == nil {
		return
	}
	ks, err := d.dp.Stats()
	if err != nil {
		d.log.Warn("reading drop counters", "err", err)
		return
	}
	counter("sflowswitchd_drops_counted_total", "Packets dropped in the switch's namespace (all reasons, all ports), exact.")
	fmt.Fprintf(bw, "sflowswitchd_drops_counted_total %d\n", ks.Drops)
	counter("sflowswitchd_drop_notifications_total", "What became of each drop's notification in the kernel, by outcome.")
	for _, o := range []struct {
		name string
		v    uint64
	}{{"notified", ks.Notified}, {"suppressed", ks.Suppressed}, {"ring_full", ks.RingFull}} {
		fmt.Fprintf(bw, "sflowswitchd_drop_notifications_total{outcome=%q} %d\n", o.name, o.v)
	}
	counter("sflowswitchd_drops_uncounted_total", "Drops missing from the per-reason or per-port counts (their maps were full).")
	fmt.Fprintf(bw, "sflowswitchd_drops_uncounted_total %d\n", ks.Uncounted)

	reasons, err1 := d.dp.ReasonCounts()
	ports, err2 := d.dp.PortCounts()
	if err := errors.Join(err1, err2); err != nil {
		d.log.Warn("reading drop counters", "err", err)
		return
	}
	counter("sflowswitchd_drops_total", "Packets dropped in the switch's namespace, by kernel reason, exact.")
	codes := make([]uint32, 0, len(reasons))
	for c := range reasons {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	for _, c := range codes {
		name := d.dp.ReasonName(c)
		fmt.Fprintf(bw, "sflowswitchd_drops_total{reason=%q,sflow_reason=%q} %d\n", name, agent.DropReasonCode(name).String(), reasons[c])
	}
	counter("sflowswitchd_port_drops_total", "Packets dropped, by port (the egress port of an egress drop, else the ingress port; ifindex 0: made locally), exact.")
	idx := make([]uint32, 0, len(ports))
	for i := range ports {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, i := range idx {
		fmt.Fprintf(bw, "sflowswitchd_port_drops_total{port=%q,ifindex=\"%d\"} %d\n", portName(i), i, ports[i])
	}
}
