// Package dropnotify runs dropped-packet notifications: the
// kernel program (drops.Drops) while enabled, read through
// source.DropSource by the reporter (agent.DropReporter) that
// turns its notifications into discarded_packet samples, and their
// Prometheus metrics.
package dropnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
	"github.com/sflowswitchd/sflowswitchd/source"
)

// ErrKernelFeature marks an Apply error caused by a kernel feature the
// probe reports missing (tp_btf_kfree_skb): the start already logged that
// feature as unavailable, with its reason, and the daemon reports the
// notifications off as a warning, not as an error of its own.
var ErrKernelFeature = errors.New("kernel feature")

// Runner runs dropped-packet notifications: the kernel program while
// enabled, and the reporter that turns its notifications into
// discarded_packet samples. Its Config applies at start and on SIGHUP.
type Runner struct {
	log      *slog.Logger
	reporter *agent.DropReporter
	features *features.Features
	// pinDir is where the program is pinned to outlive the process
	// (drops.Config.PinDir; "" not pinned).
	pinDir string

	mu     sync.Mutex
	ctx    context.Context // the daemon's run context, set by start
	dp     *drops.Drops
	cancel context.CancelFunc
	done   chan struct{}
	// want is the configuration asked for last; retry the pending
	// attempt to turn notifications on after a transient failure, wait
	// its backoff.
	want  Config
	retry *time.Timer
	wait  time.Duration
	// failures counts attempts to turn notifications on that failed for
	// a transient reason (retried); failing is set while the last did.
	failures atomic.Uint64
	failing  atomic.Bool
	// portMap renumbers the notifications' ports (SetPortMap; nil:
	// none); otherPorts counts those not sent for it.
	portMap    PortMap
	otherPorts atomic.Uint64
}

// Backoff of the attempts to turn notifications on after a transient
// failure (no descriptor or memory left, the kernel busy): from retryMin,
// doubling to retryMax, until one succeeds or notifications are turned
// off. A missing kernel feature or privilege is not retried.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// ErrRetrying marks an Apply error after which notifications are tried
// again with backoff (a transient failure).
var ErrRetrying = errors.New("retrying with backoff")

// transient reports whether err is worth retrying: no descriptor
// (EMFILE, ENFILE) or memory (ENOMEM) left, or the kernel busy (EBUSY).
// cilium/ebpf's errors carry the errno in their text only at times.
func transient(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EBUSY} {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

// New returns a runner, off until Start, whose reporter is sub-agent
// subAgent. features is what the kernel probe found (nil: not probed):
// without tp_btf_kfree_skb notifications stay off and Start and Apply
// say so, naming the feature, without trying to load the program.
func New(subAgent uint32, features *features.Features, log *slog.Logger) *Runner {
	return &Runner{log: log, reporter: agent.NewDropReporter(subAgent, log), features: features}
}

// SetPinDir pins the program in dir (drops.Config.PinDir), so that it
// counts every drop through an upgrade's exec or a crash and restart, and
// the next process adopts it. Call it before Start.
func (d *Runner) SetPinDir(dir string) {
	d.mu.Lock()
	d.pinDir = dir
	d.mu.Unlock()
}

// Reporter is the reporter of the notifications (receivers, statistics).
func (d *Runner) Reporter() *agent.DropReporter { return d.reporter }

// Config is what drop notifications are set to (settings drops,
// drops_limit and drops_header_bytes).
type Config struct {
	// On turns notifications on.
	On bool
	// Limit is the notifications per second (0: count drops, notify
	// none); HeaderBytes the bytes of each dropped packet exported
	// (drops.Config).
	Limit       int
	HeaderBytes int
}

// Start applies c for the first time; notifications stop at the latest
// when ctx ends.
func (d *Runner) Start(ctx context.Context, c Config) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	return d.Apply(c)
}

// Apply turns notifications on or off and sets the limit and header size
// (SIGHUP). A failure leaves notifications off and is reported; nothing
// else of the daemon depends on it. Before start and after the daemon's
// context ended it does nothing.
//
// A transient failure (no descriptor left: EMFILE at a start under a
// tight RLIMIT_NOFILE) is counted and retried with backoff until
// notifications are on, and the error wraps ErrRetrying.
func (d *Runner) Apply(c Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.ctx.Err() != nil {
		return nil
	}
	d.want = c
	if d.retry != nil {
		d.retry.Stop()
		d.retry = nil
	}
	err := d.applyLocked(c)
	if err == nil || !c.On || d.dp != nil || !transient(err) {
		d.wait = 0
		d.failing.Store(false)
		return err
	}
	d.failed()
	return fmt.Errorf("%w (%w, next in %v)", err, ErrRetrying, d.wait)
}

// failed counts a transient failure and schedules the next attempt.
// Called with mu held.
func (d *Runner) failed() {
	d.failures.Add(1)
	d.failing.Store(true)
	d.wait = min(max(2*d.wait, retryMin), retryMax)
	d.retry = time.AfterFunc(d.wait, d.retryOn)
}

// retryOn is the retry timer's: it tries again to turn notifications on,
// as asked last.
func (d *Runner) retryOn() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retry = nil
	if d.ctx == nil || d.ctx.Err() != nil || !d.want.On || d.dp != nil {
		return
	}
	err := d.applyLocked(d.want)
	switch {
	case err == nil:
		d.log.Info("drop notifications on after failing", "failed_attempts", d.failures.Load())
		d.wait = 0
		d.failing.Store(false)
	case transient(err):
		d.failed()
		d.log.Debug("drop notifications still off: retrying with backoff", "err", err, "retry_in", d.wait)
	default:
		d.failing.Store(false)
		d.log.Error("drop notifications off", "err", err)
	}
}

// applyLocked is Apply of c. Called with mu held.
func (d *Runner) applyLocked(c Config) error {
	ctx := d.ctx
	if !c.On {
		return d.stopLocked()
	}
	cfg := drops.Config{Limit: uint32(c.Limit), HeaderBytes: c.HeaderBytes}
	if d.dp != nil {
		if err := d.dp.Configure(cfg); err != nil {
			return fmt.Errorf("drop notifications: %w", err)
		}
		return nil
	}
	if d.features != nil {
		if err := d.features.Unavailable(features.FeatureBTFTracepoint); err != nil {
			return fmt.Errorf("drop notifications unavailable: %w %s: %w", ErrKernelFeature, features.FeatureBTFTracepoint, err)
		}
	}
	cfg.PinDir = d.pinDir
	dp, err := drops.Open(cfg)
	if err != nil {
		return fmt.Errorf("drop notifications unavailable: %w", err)
	}
	d.dp = dp
	for _, r := range dp.Replaced() {
		if r.Err != nil {
			d.log.Warn("drop notifications: a pinned program replaced; the kernel's drop counts start anew", "build", r.Name, "program", r.ID, "err", r.Err)
			continue
		}
		d.log.Info("drop notifications: the pinned program of another build replaced; the kernel's drop counts start anew, its losses carried into the drops field",
			"build", r.Name, "program", r.ID, "drops", r.Stats.Drops, "lost", r.Stats.Lost())
	}
	if notified, ok := dp.Adopted(); ok {
		d.log.Info("drop notifications: the pinned program taken over, its counts going on", "program", dp.ProgramID(), "notified_before", notified)
	}
	if !dp.FunctionNames() {
		d.log.Warn("drop notifications carry no extended_function: the kernel hides its symbol addresses from this process " +
			"(/proc/kallsyms needs CAP_SYSLOG, or kernel.kptr_restrict=0 with kernel.perf_event_paranoid<=1); reasons, ports and headers are sent")
	}
	var src agent.DropSource = source.NewDropSource(dp)
	if d.portMap != nil {
		src = newMappedSource(src, d.portMap, &d.otherPorts)
	}
	rctx, cancel := context.WithCancel(ctx)
	d.cancel, d.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		d.reporter.Run(rctx, src)
	}(d.done)
	d.log.Info("drop notifications on", "limit", c.Limit, "header_bytes", c.HeaderBytes)
	return nil
}

// Pause makes the program stop writing notifications to this process's
// buffers (each one from here is counted lost), before an upgrade stops
// the reporter: what it reads as it stops is then every notification
// written, none left in the buffers to be lost unread.
func (d *Runner) Pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dp == nil {
		return
	}
	if err := d.dp.Pause(); err != nil {
		d.log.Warn("pausing drop notifications for the upgrade", "err", err)
	}
}

// Release stops the reporter and leaves the program attached and pinned,
// counting drops, for the next program (an upgrade in place). Without a
// pin directory it is Stop.
func (d *Runner) Release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.offLocked()
	return d.endLocked(true)
}

// Stop turns notifications off and unloads the program.
func (d *Runner) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.offLocked()
	return d.stopLocked()
}

// offLocked turns notifications off for good and cancels a pending retry.
func (d *Runner) offLocked() {
	d.want.On = false
	if d.retry != nil {
		d.retry.Stop()
		d.retry = nil
	}
}

func (d *Runner) stopLocked() error { return d.endLocked(false) }

// endLocked stops the reader and ends the program: released, counting on
// for the next program, or closed.
func (d *Runner) endLocked(release bool) error {
	if d.dp == nil {
		return nil
	}
	d.cancel()
	<-d.done
	end, msg := d.dp.Close, "drop notifications off"
	if release {
		end, msg = d.dp.Release, "drop notifications released: the program counts on for the next program"
	}
	err := end()
	d.dp = nil
	if err != nil {
		return fmt.Errorf("drop notifications: %w", err)
	}
	d.log.Info(msg)
	return nil
}

// Drop metrics: exact drops per kernel reason and per port,
// and what became of the notifications.
var (
	dropNotifSent   = prometheus.NewDesc("sflowswitchd_drop_notifications_sent_total", "discarded_packet samples encoded (one per notification).", nil, nil)
	dropNotifUnsent = prometheus.NewDesc("sflowswitchd_drop_notifications_unsent_total", "Notifications that arrived while no receiver was configured (counted in the drops field).", nil, nil)
	dropsCounted    = prometheus.NewDesc("sflowswitchd_switch_dropped_packets_counted_total", "Packets dropped in the switch's namespace (all reasons, all ports), exact.", nil, nil)
	dropNotif       = prometheus.NewDesc("sflowswitchd_drop_notifications_total", "What became of each drop's notification in the kernel: notified, suppressed (over drops_limit) or ring_full (the CPU's perf buffer was full).", []string{"outcome"}, nil)
	dropBufLost     = prometheus.NewDesc("sflowswitchd_drop_notifications_buffer_lost_total", "Lost records the perf buffers reported to the reader (each one is also counted in outcome ring_full, which may be ahead: the kernel reports a loss when the buffer next takes a record).", nil, nil)
	dropsUncounted  = prometheus.NewDesc("sflowswitchd_switch_dropped_packets_uncounted_total", "Drops missing from the per-reason or per-port counts (their maps were full).", nil, nil)
	dropsByReason   = prometheus.NewDesc("sflowswitchd_switch_dropped_packets_total", "Packets the switch dropped (in its namespace), by kernel reason (and its sFlow drop_reason), exact; not samples the agent lost (sflowswitchd_samples_dropped_total, sflowswitchd_port_kernel_drops_total).", []string{"reason", "sflow_reason"}, nil)
	dropFuncNames   = prometheus.NewDesc("sflowswitchd_drop_function_names", "1 if drop notifications can name the kernel function of the drop (extended_function): /proc/kallsyms shows addresses to the daemon; 0 if not (no CAP_SYSLOG), or if notifications are off.", nil, nil)
	dropsByPort     = prometheus.NewDesc("sflowswitchd_port_switch_dropped_packets_total", "Packets dropped, by port (the egress port of an egress drop, else the ingress port; ifindex 0: made locally), exact.", []string{"port", "ifindex"}, nil)
	dropStartFails  = prometheus.NewDesc("sflowswitchd_drop_notifications_start_failures_total", "Attempts to turn drop notifications on that failed for a transient reason (no descriptor or memory left, the kernel busy), each retried with backoff.", nil, nil)
	dropOnGauge     = prometheus.NewDesc("sflowswitchd_drop_notifications_on", "1 while drop notifications run; 0 while off (by configuration, a missing kernel feature, or a failure being retried: drop_notifications_retrying).", nil, nil)
	dropOtherPorts  = prometheus.NewDesc("sflowswitchd_drop_notifications_other_ports_total", "Drop notifications not sent because their ports are none the agent reports (SONiC mode: not SONiC ports, such as eth0 or docker0).", nil, nil)
	dropRetrying    = prometheus.NewDesc("sflowswitchd_drop_notifications_retrying", "1 while drop notifications are asked for but their last attempt failed for a transient reason; retried with backoff.", nil, nil)
)

// dropCollector exports the drop metrics. The kernel's counters restart
// from 0 when notifications are turned off and on again (SIGHUP).
type dropCollector struct {
	d        *Runner
	portName func(uint32) string
}

// NewCollector returns the Prometheus collector of r's metrics, naming
// ports with portName.
func NewCollector(r *Runner, portName func(ifindex uint32) string) prometheus.Collector {
	return &dropCollector{d: r, portName: portName}
}

func (c *dropCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dropNotifSent, dropNotifUnsent, dropsCounted, dropNotif, dropBufLost, dropsUncounted, dropsByReason, dropsByPort, dropFuncNames,
		dropStartFails, dropOnGauge, dropRetrying, dropOtherPorts} {
		ch <- d
	}
}

func (c *dropCollector) Collect(ch chan<- prometheus.Metric) {
	cnt := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prom.Counter(d, v, labels...) // port names from the kernel: prom.Label
	}
	st := c.d.reporter.Stats()
	cnt(dropNotifSent, st.Notifications.Load())
	cnt(dropNotifUnsent, st.Unsent.Load())
	cnt(dropStartFails, c.d.failures.Load())
	cnt(dropOtherPorts, c.d.otherPorts.Load())
	retrying := 0.0
	if c.d.failing.Load() {
		retrying = 1
	}
	ch <- prom.Gauge(dropRetrying, retrying)

	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	dp := c.d.dp
	names := 0.0
	if dp != nil && dp.FunctionNames() {
		names = 1
	}
	ch <- prom.Gauge(dropFuncNames, names)
	on := 0.0
	if dp != nil {
		on = 1
	}
	ch <- prom.Gauge(dropOnGauge, on)
	if dp == nil {
		return
	}
	ks, err := dp.Stats()
	reasons, err1 := dp.ReasonCounts()
	ports, err2 := dp.PortCounts()
	if err := errors.Join(err, err1, err2); err != nil {
		c.d.log.Warn("reading drop counters", "err", err)
		return
	}
	cnt(dropsCounted, ks.Drops)
	cnt(dropNotif, ks.Notified, "notified")
	cnt(dropNotif, ks.Suppressed, "suppressed")
	cnt(dropNotif, ks.RingFull, "ring_full")
	cnt(dropBufLost, ks.BufferLost)
	cnt(dropsUncounted, ks.Uncounted)
	for code, v := range reasons {
		name := dp.ReasonName(code)
		cnt(dropsByReason, v, name, agent.DropReasonCode(name).String())
	}
	for idx, v := range ports {
		cnt(dropsByPort, v, c.portName(idx), strconv.FormatUint(uint64(idx), 10))
	}
}
