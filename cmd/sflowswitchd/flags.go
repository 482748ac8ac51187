package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// flagValues are the command-line flags; only flags given explicitly
// override the file.
type flagValues struct {
	fs             *flag.FlagSet
	configFile     string
	collectors     stringList
	s              config.Settings
	ports          string
	monitor        string
	cleanup, check bool // one-shot modes: -cleanup, -upgrade-check
	checkConfig    bool // -check-config
	version        bool // -version
	// sources are where each setting of the last load came from.
	sources config.Sources
	// portDirection is -port-direction as given (parsePortDirection).
	portDirection string
	// portHook is -port-hook as given (parsePortDirection's syntax).
	portHook string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlags() *flagValues {
	f := &flagValues{fs: flag.NewFlagSet("sflowswitchd", flag.ContinueOnError)}
	fs := f.fs
	fs.StringVar(&f.configFile, "config", "", "config `file` (TOML; see sflowswitchd.conf.example); SIGHUP reloads it")
	fs.Var(&f.collectors, "collector", "collector `host:port` (repeatable; default "+config.DefaultCollector+"; \"none\": no static receiver, SNMP only)")
	rateFlag(fs, "sampling", "sample 1 in `N` packets on every port (default: link speed in Mb/s, at least 100; 0 refused: leave a port out of -ports not to sample it)", func(n uint32) { f.s.Sampling = n })
	rateFlag(fs, "sampling-unknown-speed", "sample 1 in `N` packets on ports whose link speed is unknown (default 1000)", func(n uint32) { f.s.SamplingUnknownSpeed = n })
	secondsFlag(fs, "polling", "counter polling interval: `seconds` or a duration such as 30s (default 20; 0 = off)", func(n config.Seconds) { f.s.Polling = n })
	fs.IntVar(&f.s.HeaderBytes, "header-bytes", 0, "`bytes` of each sampled frame to export, 20..256 (default 128)")
	fs.StringVar(&f.ports, "ports", "", "comma-separated port `names or globs` to sample (default: every up non-loopback port)")
	fs.StringVar(&f.monitor, "monitor-ports", "", "comma-separated `ports` carrying mirrored traffic, sampled through AF_XDP")
	fs.StringVar(&f.s.AgentAddress, "agent-address", "", "agent `IP` address put in every datagram (default: see README)")
	fs.StringVar(&f.s.AgentInterface, "agent-interface", "", "take the agent address from this `interface`")
	fs.IntVar(&f.s.Workers, "workers", 0, "`N` sub-agents (default: one per CPU; read at start)")
	fs.StringVar(&f.s.Metrics, "metrics", "", "serve Prometheus metrics on `addr` (e.g. 127.0.0.1:9116; loopback only unless -metrics-allow-remote)")
	fs.BoolVar(&f.s.MetricsAllowRemote, "metrics-allow-remote", false, "let -metrics listen on a non-loopback address (no authentication: warned at start)")
	fs.BoolVar(&f.s.AppAPIAllowRemote, "app-api-allow-remote", false, "let -app-api listen on a non-loopback address (no authentication: warned at start)")
	fs.StringVar(&f.s.LogLevel, "log-level", "", "log `level`: debug, info, warn or error (default info)")
	fs.StringVar(&f.s.AppAPI, "app-api", "", "serve the local application JSON API on UDP `addr` (e.g. 127.0.0.1:36343; loopback only unless -app-api-allow-remote)")
	secondsFlag(fs, "apm-interval", "APM report interval: `seconds` or a duration such as 1m (default 60)", func(n config.Seconds) { f.s.APMInterval = n })
	fs.IntVar(&f.s.APMReports, "apm-reports", 0, "`N` APM reports kept per report control (default 60)")
	fs.StringVar(&f.s.AgentX, "agentx", "", "AgentX master socket `ADDR` for the SFLOW-MIB: unix:PATH, tcp:HOST:PORT or off (default "+config.DefaultAgentX+")")
	fs.IntVar(&f.s.SNMPReceivers, "snmp-receivers", 0, "`N` rows of sFlowRcvrTable (default 10)")
	fs.IntVar(&f.s.SNMPInstances, "snmp-instances", 0, "`N` sampler and poller instances per data source in the SFLOW-MIB (default 3)")
	fs.StringVar(&f.s.StateDir, "state-dir", "", "`directory` for state kept across restarts (default "+config.DefaultStateDir+")")
	fs.StringVar(&f.s.HsflowdConf, "hsflowd-conf", "", "read a host agent (hsflowd) config `file` too (e.g. /etc/hsflowd.conf); this daemon's config file and flags override it")
	fs.IntVar(&f.s.MaxPorts, "max-ports", 0, fmt.Sprintf("`N` ports sampled at most at the same time (default %d; up to %d)", config.DefaultMaxPorts, dataplane.MaxPortsLimit))
	fs.IntVar(&f.s.RingBytes, "ring-bytes", 0, fmt.Sprintf("ring buffer `bytes` per worker for sampled headers, a power of two (default %d; kernel memory per worker)", dataplane.DefaultRingBytes))
	fs.BoolVar(&f.s.Transit, "transit", false, "follow sampled frames of TC-sampled ports to where they leave: transit delay, egress queue and queue depth records (Linux 6.2)")
	fs.StringVar(&f.s.Direction, "direction", "", "which way every port is sampled: `ingress|egress|both` (egress: at TC egress; default ingress; over the config file's port_direction)")
	fs.StringVar(&f.portDirection, "port-direction", "", "per-port sampling direction: `name=dir,...` (name or glob; dir ingress, egress or both)")
	fs.StringVar(&f.portHook, "port-hook", "", "per-port hook: `name=hook,...` (name or glob; hook auto, xdp, tc or psample; over the config file's port_hook)")
	fs.StringVar(&f.s.Hook, "hook", "", "where ports are sampled: `auto|xdp|tc|psample` (auto: TC ingress on veth, XDP elsewhere; psample: tc sample rules, switch ASICs; default auto)")
	fs.StringVar(&f.s.PsampleIntake, "psample-intake", "", "how the psample path receives its samples: `auto|netlink|tap` (auto: the tap, a BPF program on psample_sample_packet read in place, where it attaches, else netlink; netlink leaves the psample module free to unload; default auto)")
	fs.Func("psample-group", "listen-only psample mode: read psample `group` G, whose rules another component installs (default 0: off)", func(v string) error {
		g, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("want a group number 0..4294967295")
		}
		f.s.PsampleGroup = uint32(g)
		return nil
	})
	fs.BoolVar(&f.s.Sonic, "sonic", false, "SONiC mode: configuration, ports and ASIC counters from SONiC's Redis, samples from psample groups 1 and 2 (as hsflowd's sonic { } module)")
	fs.StringVar(&f.s.SonicDBConfig, "sonic-db-config", "", "SONiC's Redis database `file` (default "+config.DefaultSonicDBConfig+")")
	groupFlag := func(name, usage string, set func(uint32)) {
		fs.Func(name, usage, func(v string) error {
			g, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return fmt.Errorf("want a group number 0..4294967295")
			}
			set(uint32(g))
			return nil
		})
	}
	groupFlag("psample-ingress-group", "listen-only psample by group (hsflowd's psample { group=G }): group `G`'s samples are the ports' ingress samples (default 0: off)",
		func(g uint32) { f.s.PsampleIngressGroup = g })
	groupFlag("psample-egress-group", "listen-only psample by group: group `G`'s samples are the ports' egress samples (hsflowd: G+1 of psample { group=G egress=on }; default 0: off)",
		func(g uint32) { f.s.PsampleEgressGroup = g })
	fs.BoolVar(&f.s.Dent, "dent", false, "hsflowd's dent { }: the agent puts its own tc matchall + sample rule, to the psample groups, on every switch port (-dent-switchport), skip_sw unless -dent-sw")
	fs.StringVar(&f.s.DentSwitchPort, "dent-switchport", "", "the switch ports' `regexp` for -dent (default "+config.DefaultDentSwitchPort+")")
	fs.BoolVar(&f.s.DentSW, "dent-sw", false, "-dent's rules run in software too (no skip_sw; hsflowd's dent { sw=on })")
	fs.Func("drops", "dropped-packet notifications: `on|off` (default on)", func(v string) error {
		if v != "on" && v != "off" {
			return fmt.Errorf("want on or off")
		}
		f.s.Drops = v
		return nil
	})
	fs.IntVar(&f.s.DropsLimit, "drops-limit", 0, "at most `N` drop notifications per second, the rest counted (default 100; 0 = count only)")
	fs.IntVar(&f.s.DropsHeaderBytes, "drops-header-bytes", 0, "`bytes` of each dropped packet to export, 0..256 (default 128)")
	fs.StringVar(&f.s.PinDir, "pin-dir", "", "`directory` on a BPF file system where the samplers are pinned, so that an upgrade (SIGUSR2) or a restart after a crash takes them over without a gap; off: none (default "+config.DefaultPinDir+")")
	fs.IntVar(&f.s.MaxSamplesPerSecond, "max-samples-per-second", 0, "backoff: the agent's quota of `samples` per second; above it the rates in force step up, and back down when the load falls (default 0: none)")
	fs.IntVar(&f.s.MaxPortSamplesPerSecond, "max-port-samples-per-second", 0, "backoff: each port's quota of `samples` per second (default 0: none)")
	fs.BoolVar(&f.s.DNSSD, "dns-sd", false, "configuration by DNS-SD: the SRV records of _sflow._udp<domain> name the collectors, its TXT records set sampling, polling, ... (see docs/guides/fleet.md)")
	fs.StringVar(&f.s.DNSSDDomain, "dns-sd-domain", "", "DNS-SD `domain`, hsflowd's way: .example.net (default: the resolver's search list)")
	fs.StringVar(&f.s.DNSSDResolvConf, "dns-sd-resolv-conf", "", "resolver configuration `file` whose nameservers DNS-SD asks (default "+config.DefaultDNSSDResolvConf+")")
	secondsFlag(fs, "dns-sd-start-delay", fmt.Sprintf("the first DNS-SD query is at a random time within `seconds` (or a duration such as 30s) of the start; 0: at once (default %d)", config.DefaultDNSSDStartDelay),
		func(n config.Seconds) { f.s.DNSSDStartDelay = n })
	fs.BoolVar(&f.cleanup, "cleanup", false, "detach and unpin what a daemon that is gone left in -pin-dir, then exit")
	fs.BoolVar(&f.checkConfig, "check-config", false, "validate the config file, hsflowd.conf and the flags as a start or a reload would, print every error; then, with the privileges, load the BPF objects they need through the kernel's verifier without attaching them (skipped, and said so, without); exit 0: valid, 1: refused")
	fs.BoolVar(&f.version, "version", false, "print the version, commit and Go version, then exit")
	fs.BoolVar(&f.check, daemon.UpgradeCheckFlag[1:], false, "check that this binary can take over the running daemon's samplers, then exit (run by SIGUSR2's upgrade in place)")
	return f
}

// rateFlag is a sampling rate flag: 1 in N, N at least 1 (0 refused as
// everywhere a rate is configured: config.RateZero).
func rateFlag(fs *flag.FlagSet, name, usage string, set func(uint32)) {
	fs.Func(name, usage, func(v string) error {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return fmt.Errorf("want a whole number N (sample 1 in N packets)")
		}
		if n == 0 {
			return errors.New(config.RateZero)
		}
		set(uint32(n))
		return nil
	})
}

// secondsFlag is a flag in seconds that also takes a Go duration.
func secondsFlag(fs *flag.FlagSet, name, usage string, set func(config.Seconds)) {
	fs.Func(name, usage, func(v string) error {
		n, err := config.ParseSeconds(v)
		if err != nil {
			return err
		}
		set(n)
		return nil
	})
}

// load builds the effective settings: defaults, then the config file, then
// the flags given on the command line (config.Load).
func (f *flagValues) load() (config.Settings, error) {
	hsflowd := ""
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "hsflowd-conf" {
			hsflowd = f.s.HsflowdConf
		}
	})
	var given []string
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k] = true
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if k := strings.ReplaceAll(fl.Name, "-", "_"); keys[k] {
			given = append(given, k)
		}
	})
	var src config.Sources
	s, err := config.Load(config.Layers{File: f.configFile, HsflowdConf: hsflowd, Override: f.override, Notes: f.fs.Output(),
		Check: daemon.Validate, Sources: &src, Flags: given})
	f.sources = src
	return s, err
}

// loadWithSources is load, with where each setting came from (the
// daemon's reload).
func (f *flagValues) loadWithSources() (config.Settings, config.Sources, error) {
	s, err := f.load()
	return s, f.sources, err
}

// override copies into s the settings given on the command line, which
// take precedence over the file.
func (f *flagValues) override(s *config.Settings) {
	given := map[string]func(){
		"collector": func() {
			s.Collectors = nil
			for _, c := range f.collectors {
				s.Collectors = append(s.Collectors, config.Collector{Address: c})
			}
		},
		"sampling": func() {
			// Every port: also over per-speed and per-port rates.
			s.Sampling, s.SamplingSpeed, s.PortSampling = f.s.Sampling, nil, nil
		},
		"sampling-unknown-speed": func() { s.SamplingUnknownSpeed = f.s.SamplingUnknownSpeed },
		"polling":                func() { s.Polling = f.s.Polling },
		"header-bytes":           func() { s.HeaderBytes = f.s.HeaderBytes },
		"ports":                  func() { s.Ports = splitList(f.ports) },
		"monitor-ports":          func() { s.MonitorPorts = splitList(f.monitor) },
		"agent-address":          func() { s.AgentAddress = f.s.AgentAddress },
		"agent-interface":        func() { s.AgentInterface = f.s.AgentInterface },
		"workers":                func() { s.Workers = f.s.Workers },
		"metrics":                func() { s.Metrics = f.s.Metrics },
		"metrics-allow-remote":   func() { s.MetricsAllowRemote = f.s.MetricsAllowRemote },
		"app-api-allow-remote":   func() { s.AppAPIAllowRemote = f.s.AppAPIAllowRemote },
		"log-level":              func() { s.LogLevel = f.s.LogLevel },
		"agentx":                 func() { s.AgentX = f.s.AgentX },
		"app-api":                func() { s.AppAPI = f.s.AppAPI },
		"apm-interval":           func() { s.APMInterval = f.s.APMInterval },
		"apm-reports":            func() { s.APMReports = f.s.APMReports },
		"snmp-receivers":         func() { s.SNMPReceivers = f.s.SNMPReceivers },
		"snmp-instances":         func() { s.SNMPInstances = f.s.SNMPInstances },
		"state-dir":              func() { s.StateDir = f.s.StateDir },
		"max-ports":              func() { s.MaxPorts = f.s.MaxPorts },
		"ring-bytes":             func() { s.RingBytes = f.s.RingBytes },
		"hook":                   func() { s.Hook = f.s.Hook },
		"port-hook":              func() { s.PortHook = parsePortDirection(f.portHook) },
		"psample-group":          func() { s.PsampleGroup = f.s.PsampleGroup },
		"psample-intake":         func() { s.PsampleIntake = f.s.PsampleIntake },
		"sonic":                  func() { s.Sonic = f.s.Sonic },
		"sonic-db-config":        func() { s.SonicDBConfig = f.s.SonicDBConfig },
		"psample-ingress-group":  func() { s.PsampleIngressGroup = f.s.PsampleIngressGroup },
		"psample-egress-group":   func() { s.PsampleEgressGroup = f.s.PsampleEgressGroup },
		"dent":                   func() { s.Dent = f.s.Dent },
		"dent-switchport":        func() { s.DentSwitchPort = f.s.DentSwitchPort },
		"dent-sw":                func() { s.DentSW = f.s.DentSW },
		"transit":                func() { s.Transit = f.s.Transit },
		"direction": func() {
			// Every port: also over per-port directions of the file.
			s.Direction, s.PortDirection = f.s.Direction, nil
		},
		"port-direction":              func() { s.PortDirection = parsePortDirection(f.portDirection) },
		"drops":                       func() { s.Drops = f.s.Drops },
		"drops-limit":                 func() { s.DropsLimit = f.s.DropsLimit },
		"drops-header-bytes":          func() { s.DropsHeaderBytes = f.s.DropsHeaderBytes },
		"pin-dir":                     func() { s.PinDir = f.s.PinDir },
		"max-samples-per-second":      func() { s.MaxSamplesPerSecond = f.s.MaxSamplesPerSecond },
		"max-port-samples-per-second": func() { s.MaxPortSamplesPerSecond = f.s.MaxPortSamplesPerSecond },
		"dns-sd":                      func() { s.DNSSD = f.s.DNSSD },
		"dns-sd-domain":               func() { s.DNSSDDomain = f.s.DNSSDDomain },
		"dns-sd-resolv-conf":          func() { s.DNSSDResolvConf = f.s.DNSSDResolvConf },
		"dns-sd-start-delay":          func() { s.DNSSDStartDelay = f.s.DNSSDStartDelay },
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if apply := given[fl.Name]; apply != nil { // -config has none
			apply()
		}
	})
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parsePortDirection turns -port-direction's "name=dir,..." into the
// port_direction map; an entry without "=" keeps an empty direction, which
// the settings' validation refuses with the entry named.
func parsePortDirection(v string) map[string]string {
	m := map[string]string{}
	for _, e := range splitList(v) {
		name, dir, _ := strings.Cut(e, "=")
		m[strings.TrimSpace(name)] = strings.TrimSpace(dir)
	}
	return m
}
