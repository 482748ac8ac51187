package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/sdnotify"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/source"
)

// run serves until ctx ends, then detaches everything. Everything started
// here stops with ctx, which run cancels on its way out, whatever the
// reason; the goroutines that read the dataplane's memory (workers) and
// the sockets are waited for before the dataplane is closed and unmapped.
func (d *Daemon) run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	d.mu.Lock()
	d.stopRun = cancel
	d.mu.Unlock()
	var running sync.WaitGroup
	defer func() {
		cancel()
		d.mu.Lock()
		upgrading := d.upgrade != nil
		d.mu.Unlock()
		if upgrading {
			// The program stays, counting, for the next program.
			if err := d.drops.Release(); err != nil {
				d.log.Error("releasing drop notifications", "err", err)
			}
		} else if err := d.drops.Stop(); err != nil {
			d.log.Error("stopping drop notifications", "err", err)
		}
		running.Wait()
		if err := d.counters.Close(); err != nil {
			d.log.Error("closing counter readers", "err", err)
		}
		if d.psample != nil {
			// Every rule of ours goes, whatever the reason to stop
			// (an upgrade's next program installs them anew).
			if err := d.psample.Close(); err != nil {
				d.log.Error("removing the psample rules", "err", err)
			}
		}
		d.mu.Lock()
		up := d.upgrade
		d.mu.Unlock()
		if up != nil {
			// An upgrade in place: the samplers stay, for the next program.
			if rerr := d.release(); rerr != nil {
				d.log.Error("releasing the samplers for the upgrade", "err", rerr)
			}
			err = ErrUpgrade
			return
		}
		if err := d.dp.Close(); err != nil {
			d.log.Error("detaching", "err", err)
		}
		if d.snmp != nil {
			if err := d.snmp.Remove(); err != nil {
				d.log.Warn("removing the SNMP snapshot", "err", err)
			}
		}
	}()
	// The settings read here take effect at restart only (reload keeps
	// them); a copy taken under the lock does not race with a SIGHUP.
	d.mu.Lock()
	s := d.settings
	d.mu.Unlock()
	readers, err := source.BPFReaders(d.dp, d.agent.Workers())
	if err != nil {
		return fmt.Errorf("sample readers: %w", err)
	}
	switch {
	case d.mixed != nil:
		readers = source.MixedReaders(readers, d.psample)
		defer func() { // the watchers end within a second, together
			var wg sync.WaitGroup
			for _, r := range readers {
				if mr, ok := r.(*source.MixedReader); ok {
					wg.Go(mr.Close)
				}
			}
			wg.Wait()
		}()
	case d.psample != nil:
		readers = d.psample.Readers()
	}
	events := make(chan ports.Event, 256)
	watchErr := make(chan error, 1)
	go func() { watchErr <- ports.Watch(ctx, netns.None(), events) }()
	go func() {
		if err := d.output.Run(ctx); err != nil {
			d.log.Error("forwarding table: output ports will be reported unknown", "err", err)
		}
	}()
	if err := d.startApps(ctx, s, &running); err != nil {
		return err
	}
	if addr := s.Metrics; addr != "" {
		if err := d.serveMetrics(ctx, addr, &running); err != nil {
			return err
		}
	}
	if err := d.drops.Start(ctx, dropsConfig(s)); err != nil {
		d.dropsOff(err)
	}
	if d.sonic != nil {
		d.sonic.start(ctx, &running)
	}
	if d.psample != nil {
		// The family made anew (module reload, warm reboot): re-join.
		running.Go(func() { d.psample.WatchFamily(ctx, psampleFamilyCheck) })
	}
	d.startAgent(ctx, readers, &running)
	d.startResolver(ctx, s)
	running.Go(func() { d.sweepState(ctx) })
	d.startAgentX(ctx, s.AgentX, &running)
	d.log.Info("sflowswitchd running", "workers", d.agent.Workers(), "ring_bytes", s.RingBytes, "collectors", len(s.StaticCollectors()), "agentx", s.AgentX)
	close(d.ready)
	if d.dnssd != nil {
		running.Go(func() { d.runDNSSD(ctx) })
	}
	if err := sdnotify.Notify("READY=1"); err != nil {
		d.log.Warn("telling systemd the daemon is ready", "err", err)
	}
	defer func() { _ = sdnotify.Notify("STOPPING=1") }()
	return d.watch(ctx, events, watchErr)
}

// startAgent starts the workers, the MIB (it applies receiver timeouts)
// and the retries of failed ports (they reapply the configuration): all
// three reach the dataplane, through the agent, so they are waited for
// like the workers.
func (d *Daemon) startAgent(ctx context.Context, readers []agent.SampleReader, running *sync.WaitGroup) {
	running.Go(func() { d.agent.Run(ctx, readers) })
	running.Go(func() { d.mib.Run(ctx) })
	running.Go(func() {
		d.portFail.Retry(ctx, func() error {
			_, err := d.mib.Reapply()
			return err
		})
	})
}

// stateSweepAfter is how long after start the agent state inherited from
// an earlier program and not claimed by this one (sequence numbers of
// samplers it no longer has) is freed: the configuration has settled by
// then (collector names resolved, SNMP managers re-attached).
const stateSweepAfter = time.Minute

// sweepState frees, once, the agent state nobody claimed.
func (d *Daemon) sweepState(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(stateSweepAfter):
		if n := d.agent.State().Sweep(); n > 0 {
			d.log.Info("sequence numbers of data sources no longer configured forgotten", "count", n)
		}
	}
}

// startResolver looks the collector names up once before the first
// configuration, for at most a second, so that a name that resolves at
// once loses no sample; a slow or failing one is retried in the
// background.
func (d *Daemon) startResolver(ctx context.Context, s config.Settings) {
	staticReceivers(s, d.resolver)
	primeCtx, primeCancel := context.WithTimeout(ctx, time.Second)
	d.resolver.ResolveDue(primeCtx)
	primeCancel()
	go d.resolver.Run(ctx)
}

// startAgentX serves the SFLOW-MIB to the AgentX master, when agentx is
// on, and logs the session's state changes.
func (d *Daemon) startAgentX(ctx context.Context, master string, running *sync.WaitGroup) {
	if d.subagent == nil {
		return
	}
	running.Go(func() {
		if err := d.subagent.Run(ctx); err != nil {
			d.log.Error("AgentX subagent stopped", "err", err)
		}
	})
	running.Go(func() { d.watchAgentX(ctx, master) })
}

// watch follows the ports until ctx ends. Port events are coalesced: a
// burst of netlink messages (a port created, renamed, brought up)
// triggers one reconfiguration.
func (d *Daemon) watch(ctx context.Context, events <-chan ports.Event, watchErr <-chan error) error {
	// The first reconfiguration, once the ports present at start are
	// known (their events settled; at the latest after a second), ends
	// the adoption of pinned samplers (agent.Agent.EndAdoption).
	var settle <-chan time.Time
	adopting, first := true, time.After(time.Second)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			if ctx.Err() == nil {
				return fmt.Errorf("port discovery stopped: %w", err)
			}
		case ev := <-events:
			d.mu.Lock()
			if ev.Kind == ports.Removed {
				delete(d.ports, ev.Port.Index)
			} else {
				d.ports[ev.Port.Index] = ev.Port
			}
			d.mu.Unlock()
			if settle == nil {
				settle = time.After(100 * time.Millisecond)
			}
		case <-d.changed:
			if settle == nil {
				settle = time.After(10 * time.Millisecond)
			}
		case <-first:
			if adopting && settle == nil {
				settle = time.After(0)
			}
		case <-settle:
			settle = nil
			d.reconfigure()
			if adopting {
				adopting = false
				if err := d.agent.EndAdoption(); err != nil {
					d.log.Warn("adopted samplers no longer configured", "err", err)
				}
			}
		}
	}
}
