package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/agent/sender"
	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/apps/appsubagent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/config/dnssd"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
)

// Validate checks the settings against the components they configure,
// which package config does not know (it imports none of them): the
// collectors' literal addresses (agent.CheckCollectorAddress: unicast,
// not this host's SNMP ports), max_ports (dataplane.MaxPortsLimit),
// ring_bytes (dataplane.CheckRingBytes), hook (dataplane.ParseHook) and
// drops_header_bytes (drops.MaxHeaderBytes), and the products of
// settings that size its memory (checkBudget). The command gives it to config.Load
// (Layers.Check), so a file is refused whole, with every error at once.
func Validate(s config.Settings) error {
	var errs []error
	for i, c := range s.StaticCollectors() {
		if _, err := config.ParseCollector(c.Address); err != nil {
			continue // config.Validate reports the syntax
		}
		if _, err := collectoraddr.Parse(c.Address); err != nil {
			errs = append(errs, fmt.Errorf("collector %d: %w", i+1, err))
		}
	}
	if s.MaxPorts < 1 || s.MaxPorts > dataplane.MaxPortsLimit {
		errs = append(errs, fmt.Errorf("max_ports %d outside 1..%d", s.MaxPorts, dataplane.MaxPortsLimit))
	}
	if err := dataplane.CheckRingBytes(s.RingBytes); err != nil {
		errs = append(errs, fmt.Errorf("ring_bytes: %w", err))
	}
	if h, err := dataplane.ParseHook(s.Hook); err != nil {
		errs = append(errs, err)
	} else if s.PsampleGroup != 0 && h != dataplane.HookAuto && h != dataplane.HookPsample {
		errs = append(errs, fmt.Errorf("psample_group %d (listen-only psample sampling) with hook %s: the hook must be auto or psample", s.PsampleGroup, s.Hook))
	} else if (s.PsampleIngressGroup != 0 || s.PsampleEgressGroup != 0) && h != dataplane.HookAuto && h != dataplane.HookPsample {
		errs = append(errs, fmt.Errorf("psample_ingress_group/psample_egress_group (hsflowd.conf psample { }) with hook %s: the hook must be auto or psample", s.Hook))
	}
	if s.DNSSD && s.DNSSDDomain != "" {
		if _, err := dnssd.Names(s.DNSSDDomain, nil); err != nil {
			errs = append(errs, fmt.Errorf("dns_sd_domain: %w", err))
		}
	}
	if s.DropsHeaderBytes < 0 || s.DropsHeaderBytes > drops.MaxHeaderBytes {
		errs = append(errs, fmt.Errorf("drops_header_bytes %d outside 0..%d", s.DropsHeaderBytes, drops.MaxHeaderBytes))
	}
	return errors.Join(append(errs, checkBudget(s)...)...)
}

// The memory budget (docs/reference/bounds.md): the products of
// settings that size the daemon's memory. Each factor is bounded on its
// own (config's limits); their products here.
const (
	// maxMIBRows bounds max_ports × the SFLOW-MIB's instances per data
	// source (max(snmp_instances, collectors)): a port's instance costs
	// about 1.2 KB (mib's TestMemoryPerRow), so at most about 80 MB.
	maxMIBRows = 1 << 16
	// maxStreams bounds the datagram streams the receivers can need: one
	// per receiver (max(snmp_receivers, collectors)) and sub-agent (the
	// workers, drop notifications, and with app_api up to
	// app.DefaultMaxSources application data sources), each at most
	// sender.MaxBatchBytes of buffers: at most 512 MiB, about 2 MiB per
	// worker and receiver.
	maxStreams = 8192
)

// checkBudget refuses settings whose products exceed the memory budget,
// saying what to lower.
func checkBudget(s config.Settings) []error {
	var errs []error
	n := len(s.StaticCollectors())
	inst := max(s.SNMPInstances, n)
	if s.MaxPorts > 0 && inst > 0 && s.MaxPorts*inst > maxMIBRows {
		errs = append(errs, fmt.Errorf("max_ports %d × %d SFLOW-MIB instances per port (snmp_instances, or the number of collectors when larger) = %d rows, at most %d (about 80 MB): lower max_ports to %d or the instances to %d",
			s.MaxPorts, inst, s.MaxPorts*inst, maxMIBRows, maxMIBRows/inst, max(maxMIBRows/s.MaxPorts, 1)))
	}
	rcv := max(s.SNMPReceivers, n)
	subAgents := s.Workers + 1
	if s.AppAPI != "" {
		subAgents += app.DefaultMaxSources
	}
	if rcv > 0 && rcv*subAgents > maxStreams {
		errs = append(errs, fmt.Errorf("%d receivers (snmp_receivers, or the number of collectors when larger) × %d sub-agents (workers %d, drop notifications, %d application data sources with app_api) = %d datagram streams, at most %d (%d MiB of datagram buffers): lower snmp_receivers or workers",
			rcv, subAgents, s.Workers, subAgents-s.Workers-1, rcv*subAgents, maxStreams, maxStreams*sender.MaxBatchBytes>>20))
	}
	return errs
}

// The settings each component takes, in its own terms: the components
// import nothing of config, and config nothing of them.

// dataplaneConfig is the sampler's part of the settings (start-up only):
// pinned in pin_dir when that is on a BPF file system (otherwise said,
// and nothing is pinned), with h the previous program's handover when
// this one was started by an upgrade in place.
func dataplaneConfig(s config.Settings, log *slog.Logger, h *pin.Handover) (dataplane.Config, error) {
	hook, err := dataplane.ParseHook(s.Hook)
	if err != nil {
		return dataplane.Config{}, err // validated with the settings: not expected
	}
	c := dataplane.Config{Workers: s.Workers, MaxPorts: s.MaxPorts, RingBytes: s.RingBytes, Hook: hook, Logger: log, Handover: h}
	if s.Transit {
		c.TransitEntries = dataplane.DefaultTransitEntries
	}
	if s.PinDir != config.PinOff {
		if err := pin.CheckDir(s.PinDir); err != nil {
			log.Warn("samplers not pinned: an upgrade in place or a restart after a crash leaves a gap in the data", "pin_dir", s.PinDir, "err", err)
		} else {
			c.PinDir = s.PinDir
			c.StateWords = persist.Words(stateSlots(s))
		}
	}
	return c, nil
}

// stateSlots sizes the agent's persistent state (agent/persist): a
// sequence number per sampler and poller of every port slot and
// instance, the host's pollers, a pool base per port slot, a datagram
// stream per sub-agent (workers and the drop reporter) and receiver, the
// drop reporter's own, the per-CPU pools of every port slot, and some room for ports coming and going.
func stateSlots(s config.Settings) int {
	n := len(s.StaticCollectors())
	inst, rcv := max(s.SNMPInstances, n), max(s.SNMPReceivers, n)
	cpuLines := (runtime.NumCPU() + persist.LineWords - 2) / (persist.LineWords - 1) // agent's portPool
	return s.MaxPorts*inst*2 + inst + s.MaxPorts*(1+cpuLines) + (s.Workers+1)*rcv + 1 + 256
}

// dropsConfig is drop notifications' part (at start and on SIGHUP).
func dropsConfig(s config.Settings) dropnotify.Config {
	return dropnotify.Config{On: s.Drops == "on", Limit: s.DropsLimit, HeaderBytes: s.DropsHeaderBytes}
}

// appsConfig is the application sub-agent's part (start-up only).
func appsConfig(s config.Settings) appsubagent.Config {
	return appsubagent.Config{
		API:         s.AppAPI,
		AllowRemote: s.AppAPIAllowRemote,
		APMInterval: s.APMInterval.Duration(),
		APMReports:  s.APMReports,
		StateFile:   appsubagent.StateFile(s.StateDir),
	}
}

// setLevel sets the logger's level l (if any) from the log_level setting
// (validated: debug, info, warn, error or "", which is info).
func setLevel(l *slog.LevelVar, level string) {
	if l == nil {
		return
	}
	var v slog.Level // info unless level names another
	_ = v.UnmarshalText([]byte(level))
	l.Set(v)
}
