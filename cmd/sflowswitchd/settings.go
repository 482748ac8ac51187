package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/mib"
)

// Settings is the daemon's configuration: built-in defaults, overridden by
// the config file (-config), overridden by command-line flags. SIGHUP
// re-reads the file and applies the same precedence again.
type Settings struct {
	// Collectors each become one receiver (sFlowRcvrTable row 1, 2, ...).
	Collectors []Collector `toml:"collector"`
	// Sampling is the rate for every port; 0 derives it from the link
	// speed (one sample per Mb/s of speed, at least MinSampling).
	Sampling uint32 `toml:"sampling"`
	// SamplingUnknownSpeed is the rate of ports whose speed is unknown.
	SamplingUnknownSpeed uint32 `toml:"sampling_unknown_speed"`
	// Polling is the counter polling interval in seconds (0 = off).
	Polling int `toml:"polling"`
	// HeaderBytes is sFlowFsMaximumHeaderSize for every sampler.
	HeaderBytes int `toml:"header_bytes"`
	// Ports selects the sampled ports by name or glob; empty = every up
	// port that is not loopback (nor a bridge device).
	Ports []string `toml:"ports"`
	// MonitorPorts are ports carrying mirrored traffic (SPAN/TAP), sampled
	// through AF_XDP; unsampled frames there are dropped.
	MonitorPorts []string `toml:"monitor_ports"`
	// AgentAddress is sFlowAgentAddress; empty = chosen (see agentaddr.go).
	AgentAddress string `toml:"agent_address"`
	// AgentInterface names the interface whose address is the agent
	// address when AgentAddress is empty.
	AgentInterface string `toml:"agent_interface"`
	// Workers is the number of sub-agents; 0 = one per CPU.
	Workers int `toml:"workers"`
	// Metrics is the listen address of the Prometheus endpoint; empty =
	// off; loopback only unless MetricsAllowRemote (listen.go).
	Metrics string `toml:"metrics"`
	// MetricsAllowRemote lets Metrics be a non-loopback address.
	MetricsAllowRemote bool `toml:"metrics_allow_remote"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// AgentX is the AgentX master's socket, "unix:PATH" or
	// "tcp:HOST:PORT", or "off" (no SNMP). The daemon runs normally while
	// the master is absent and attaches when it appears.
	AgentX string `toml:"agentx"`
	// AppAPI is the UDP address of the local application JSON API
	// (loopback only, conventionally 127.0.0.1:36343); empty = off.
	AppAPI string `toml:"app_api"`
	// AppAPIAllowRemote lets AppAPI be a non-loopback address.
	AppAPIAllowRemote bool `toml:"app_api_allow_remote"`
	// APMInterval is the APM report interval in seconds (0 = 60).
	APMInterval int `toml:"apm_interval"`
	// APMReports is the number of APM reports kept per report control
	// (0 = 60).
	APMReports int `toml:"apm_reports"`
	// StateDir keeps what must survive a restart: the data source indexes
	// assigned to applications without a service port (apps.json). The
	// systemd unit's StateDirectory.
	StateDir string `toml:"state_dir"`
	// HsflowdConf is a host agent (hsflowd) configuration file whose
	// settings apply under this file's and the flags (hsflowdconf.go).
	HsflowdConf string `toml:"hsflowd_conf"`
	// Rates and agent address preferences also read from hsflowd.conf
	// (hsflowdconf.go): per link speed ("10G" = 10000), the bit/s per
	// sample rule's ratio (0 = 1000000, at least MinSampling), per port,
	// and agent address prefixes ("!prefix" excludes).
	SamplingSpeed    map[string]uint32 `toml:"sampling_speed"`
	SamplingBpsRatio uint64            `toml:"sampling_bps_ratio"`
	PortSampling     map[string]uint32 `toml:"port_sampling"`
	AgentCIDR        []string          `toml:"agent_cidr"`
	// SNMPReceivers is the number of sFlowRcvrTable rows (static
	// receivers included).
	SNMPReceivers int `toml:"snmp_receivers"`
	// SNMPInstances is the number of sampler and poller instances per
	// data source (sFlowFsInstance, sFlowCpInstance).
	SNMPInstances int `toml:"snmp_instances"`
	// MaxPorts is how many ports can be sampled at the same time (the
	// dataplane's port slots, reserved at start-up). Ports beyond it are
	// reported (log, metric, rate 0 in the MIB) and not sampled.
	MaxPorts int `toml:"max_ports"`
	// Drops turns dropped-packet notifications on or off ("on", "off").
	Drops string `toml:"drops"`
	// DropsLimit is the drop notifications per second (0: count drops,
	// notify none).
	DropsLimit int `toml:"drops_limit"`
	// DropsHeaderBytes is sFlowEsMaximumHeaderSize: bytes of each dropped
	// packet exported, 0..256.
	DropsHeaderBytes int `toml:"drops_header_bytes"`
}

// Collector is one sFlow collector.
type Collector struct {
	Address         string `toml:"address"`
	MaxDatagramSize int    `toml:"max_datagram_size"`
}

// Defaults of a daemon started with no configuration at all.
const (
	DefaultCollector            = "127.0.0.1:6343"
	DefaultSamplingUnknownSpeed = 1000
	DefaultPolling              = 20
	DefaultHeaderBytes          = 128
	MinSampling                 = 100
	DefaultAgentX               = "unix:/var/agentx/master"
	DefaultSNMPReceivers        = mib.DefaultReceivers
	DefaultSNMPInstances        = mib.DefaultInstances
	DefaultStateDir             = "/var/lib/sflowswitchd"
	// DefaultMaxPorts is the default number of port slots: about 64 bytes
	// per possible CPU plus 0.5 KiB of locked kernel memory each
	// (dataplane.Config.MaxPorts).
	DefaultMaxPorts = 4096
	// NoCollector as the only collector address means no static receiver:
	// every receiver is configured over SNMP.
	NoCollector = "none"
)

func defaultSettings() Settings {
	return Settings{
		SamplingUnknownSpeed: DefaultSamplingUnknownSpeed,
		Polling:              DefaultPolling,
		HeaderBytes:          DefaultHeaderBytes,
		LogLevel:             "info",
		AgentX:               DefaultAgentX,
		SNMPReceivers:        DefaultSNMPReceivers,
		SNMPInstances:        DefaultSNMPInstances,
		StateDir:             DefaultStateDir,
		MaxPorts:             DefaultMaxPorts,
		Drops:                "on",
		DropsLimit:           dataplane.DefaultDropLimit,
		DropsHeaderBytes:     dataplane.DefaultDropHeaderBytes,
	}
}

// flagValues are the command-line flags; only flags given explicitly
// override the file.
type flagValues struct {
	fs         *flag.FlagSet
	configFile string
	collectors stringList
	s          Settings
	ports      string
	monitor    string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlags() *flagValues {
	f := &flagValues{fs: flag.NewFlagSet("sflowswitchd", flag.ContinueOnError)}
	fs := f.fs
	fs.StringVar(&f.configFile, "config", "", "config `file` (TOML; see sflowswitchd.conf.example); SIGHUP reloads it")
	fs.Var(&f.collectors, "collector", "collector `host:port` (repeatable; default "+DefaultCollector+"; \"none\": no static receiver, SNMP only)")
	fs.Func("sampling", "sampling rate `N` for every port (default: link speed in Mb/s, at least 100)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("sampling rate must be a positive integer")
		}
		f.s.Sampling = uint32(n)
		return nil
	})
	fs.Func("sampling-unknown-speed", "sampling rate `N` of ports whose link speed is unknown (default 1000)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("must be a positive integer")
		}
		f.s.SamplingUnknownSpeed = uint32(n)
		return nil
	})
	fs.Func("polling", "counter polling interval in `seconds` (default 20, 0 = off)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("polling interval must be a non-negative integer")
		}
		f.s.Polling = n
		return nil
	})
	fs.Func("header-bytes", "bytes of each sampled frame to export, 20..256 (default 128)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("must be an integer")
		}
		f.s.HeaderBytes = n
		return nil
	})
	fs.StringVar(&f.ports, "ports", "", "comma-separated port `names or globs` to sample (default: every up non-loopback port)")
	fs.StringVar(&f.monitor, "monitor-ports", "", "comma-separated `ports` carrying mirrored traffic, sampled through AF_XDP")
	fs.StringVar(&f.s.AgentAddress, "agent-address", "", "agent `IP` address put in every datagram (default: see README)")
	fs.StringVar(&f.s.AgentInterface, "agent-interface", "", "take the agent address from this `interface`")
	fs.IntVar(&f.s.Workers, "workers", 0, "number of sub-agents (default: one per CPU)")
	fs.StringVar(&f.s.Metrics, "metrics", "", "serve Prometheus metrics on `addr` (e.g. 127.0.0.1:9116; loopback only unless -metrics-allow-remote)")
	fs.BoolVar(&f.s.MetricsAllowRemote, "metrics-allow-remote", false, "let -metrics listen on a non-loopback address (no authentication: warned at start)")
	fs.BoolVar(&f.s.AppAPIAllowRemote, "app-api-allow-remote", false, "let -app-api listen on a non-loopback address (no authentication: warned at start)")
	fs.StringVar(&f.s.LogLevel, "log-level", "", "log level: debug, info, warn, error")
	fs.StringVar(&f.s.AppAPI, "app-api", "", "serve the local application JSON API on UDP `addr` (e.g. 127.0.0.1:36343; loopback only unless -app-api-allow-remote)")
	fs.IntVar(&f.s.APMInterval, "apm-interval", 0, "APM report interval in `seconds` (default 60)")
	fs.IntVar(&f.s.APMReports, "apm-reports", 0, "APM reports kept per report control (default 60)")
	fs.StringVar(&f.s.AgentX, "agentx", "", "AgentX master socket for the SFLOW-MIB: unix:`PATH`, tcp:HOST:PORT or off (default "+DefaultAgentX+")")
	fs.IntVar(&f.s.SNMPReceivers, "snmp-receivers", 0, "`N` rows of sFlowRcvrTable (default 10)")
	fs.IntVar(&f.s.SNMPInstances, "snmp-instances", 0, "`N` sampler and poller instances per data source in the SFLOW-MIB (default 3)")
	fs.StringVar(&f.s.StateDir, "state-dir", "", "`directory` for state kept across restarts (default "+DefaultStateDir+")")
	fs.StringVar(&f.s.HsflowdConf, "hsflowd-conf", "", "read a host agent (hsflowd) config `file` too (e.g. /etc/hsflowd.conf); this daemon's config file and flags override it")
	fs.IntVar(&f.s.MaxPorts, "max-ports", 0, fmt.Sprintf("`N` ports sampled at most at the same time (default %d; up to %d)", DefaultMaxPorts, dataplane.MaxPortsLimit))
	fs.Func("drops", "dropped-packet notifications: on or off (default on)", func(v string) error {
		if v != "on" && v != "off" {
			return fmt.Errorf("want on or off")
		}
		f.s.Drops = v
		return nil
	})
	fs.IntVar(&f.s.DropsLimit, "drops-limit", 0, "drop notifications per `second`, the rest counted in drops (default 100; 0 = count only)")
	fs.IntVar(&f.s.DropsHeaderBytes, "drops-header-bytes", 0, "bytes of each dropped packet to export, 0..256 (default 128)")
	return f
}

// load builds the effective settings: defaults, then the config file, then
// the flags given on the command line.
func (f *flagValues) load() (Settings, error) {
	s := defaultSettings()
	hsflowd := ""
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "hsflowd-conf" {
			hsflowd = f.s.HsflowdConf
		}
	})
	if hsflowd == "" && f.configFile != "" {
		var err error
		if hsflowd, err = tomlHsflowdConf(f.configFile); err != nil {
			return Settings{}, err
		}
	}
	if hsflowd != "" {
		if err := applyHsflowdConf(hsflowd, &s, f.fs.Output()); err != nil {
			return Settings{}, err
		}
	}
	if f.configFile != "" {
		if err := readConfigFile(f.configFile, &s); err != nil {
			return Settings{}, err
		}
	}
	f.override(&s)
	s.HsflowdConf = hsflowd
	if len(s.Collectors) == 0 {
		s.Collectors = []Collector{{Address: DefaultCollector}}
	}
	if s.Workers == 0 {
		s.Workers = runtime.NumCPU()
	}
	return s, s.validate()
}

// override copies into s the settings given on the command line, which
// take precedence over the file.
func (f *flagValues) override(s *Settings) {
	given := map[string]func(){
		"collector": func() {
			s.Collectors = nil
			for _, c := range f.collectors {
				s.Collectors = append(s.Collectors, Collector{Address: c})
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
		"drops":                  func() { s.Drops = f.s.Drops },
		"drops-limit":            func() { s.DropsLimit = f.s.DropsLimit },
		"drops-header-bytes":     func() { s.DropsHeaderBytes = f.s.DropsHeaderBytes },
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

// readConfigFile parses a TOML config file into s, refusing unknown keys
// so that a typo is an error rather than a silently ignored setting.
func readConfigFile(name string, s *Settings) error {
	data, err := readLimited(name, MaxConfigBytes)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	md, err := toml.Decode(string(data), s)
	if err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown setting(s) %s", name, strings.Join(keys, ", "))
	}
	return nil
}

// MaxConfigBytes bounds the config file: a real one is a few KiB.
const MaxConfigBytes = 1 << 20

// readLimited reads a regular file of at most limit bytes. It never blocks
// on a FIFO (opened non-blocking, refused as not a regular file) and never
// reads an endless file (/dev/zero) to exhaustion.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", name, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// validate checks every value, so that an invalid file is refused whole
// before anything changes.
func (s *Settings) validate() error {
	var errs []error
	for i, c := range s.Collectors {
		if c.Address == NoCollector {
			if len(s.Collectors) > 1 {
				errs = append(errs, fmt.Errorf("collector %q must be the only collector", NoCollector))
			}
			continue
		}
		if _, err := parseCollector(c.Address); err != nil {
			errs = append(errs, fmt.Errorf("collector %d: %w", i+1, err))
		}
		if c.MaxDatagramSize != 0 && (c.MaxDatagramSize < 200 || c.MaxDatagramSize > 65507) {
			errs = append(errs, fmt.Errorf("collector %d: max_datagram_size %d outside 200..65507", i+1, c.MaxDatagramSize))
		}
	}
	errs = append(errs, s.validateHsflowdSettings()...)
	if s.SamplingUnknownSpeed == 0 {
		errs = append(errs, errors.New("sampling_unknown_speed must be positive"))
	}
	if s.Polling < 0 {
		errs = append(errs, errors.New("polling must not be negative"))
	}
	if s.HeaderBytes < 20 || s.HeaderBytes > 256 {
		errs = append(errs, fmt.Errorf("header_bytes %d outside 20..256", s.HeaderBytes))
	}
	for _, p := range append(append([]string(nil), s.Ports...), s.MonitorPorts...) {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("port pattern %q: %w", p, err))
		}
	}
	if s.AgentAddress != "" {
		if _, err := netip.ParseAddr(s.AgentAddress); err != nil {
			errs = append(errs, fmt.Errorf("agent_address: %w", err))
		}
	}
	if s.Workers < 1 || s.Workers > 256 {
		errs = append(errs, fmt.Errorf("workers %d outside 1..256", s.Workers))
	}
	switch s.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", s.LogLevel))
	}
	// Listeners: loopback unless allowed (listen.go); normalized here
	// (":9116" listens on 127.0.0.1:9116).
	if a, err := listenAddress("metrics", s.Metrics, s.MetricsAllowRemote); err != nil {
		errs = append(errs, err)
	} else {
		s.Metrics = a
	}
	if a, err := listenAddress("app_api", s.AppAPI, s.AppAPIAllowRemote); err != nil {
		errs = append(errs, err)
	} else if _, perr := netip.ParseAddrPort(a); a != "" && perr != nil {
		errs = append(errs, fmt.Errorf("app_api %q: want IP:PORT (a UDP socket), e.g. 127.0.0.1:36343", s.AppAPI))
	} else {
		s.AppAPI = a
	}
	if s.APMInterval < 0 {
		errs = append(errs, fmt.Errorf("apm_interval %d must not be negative", s.APMInterval))
	}
	if s.APMReports < 0 || s.APMReports > 65535 {
		errs = append(errs, fmt.Errorf("apm_reports %d outside 0..65535", s.APMReports))
	}
	if _, _, err := parseAgentX(s.AgentX); err != nil {
		errs = append(errs, err)
	}
	if s.SNMPReceivers < 1 || s.SNMPReceivers > 65535 {
		errs = append(errs, fmt.Errorf("snmp_receivers %d outside 1..65535", s.SNMPReceivers))
	}
	if s.SNMPInstances < 1 || s.SNMPInstances > 65535 {
		errs = append(errs, fmt.Errorf("snmp_instances %d outside 1..65535", s.SNMPInstances))
	}
	if s.MaxPorts < 1 || s.MaxPorts > dataplane.MaxPortsLimit {
		errs = append(errs, fmt.Errorf("max_ports %d outside 1..%d", s.MaxPorts, dataplane.MaxPortsLimit))
	}
	if s.Drops != "on" && s.Drops != "off" {
		errs = append(errs, fmt.Errorf("drops %q: want on or off", s.Drops))
	}
	if s.DropsLimit < 0 || s.DropsLimit > 1_000_000 {
		errs = append(errs, fmt.Errorf("drops_limit %d outside 0..1000000", s.DropsLimit))
	}
	if s.DropsHeaderBytes < 0 || s.DropsHeaderBytes > dataplane.MaxDropHeaderBytes {
		errs = append(errs, fmt.Errorf("drops_header_bytes %d outside 0..%d", s.DropsHeaderBytes, dataplane.MaxDropHeaderBytes))
	}
	return errors.Join(errs...)
}

// staticCollectors returns the collectors that become static receivers
// (none for "-collector none").
func (s *Settings) staticCollectors() []Collector {
	if len(s.Collectors) == 1 && s.Collectors[0].Address == NoCollector {
		return nil
	}
	return s.Collectors
}

// parseAgentX splits the agentx setting into a network and an address for
// snmpd.Config; network "" means off.
func parseAgentX(v string) (network, addr string, err error) {
	switch {
	case v == "off":
		return "", "", nil
	case strings.HasPrefix(v, "unix:") && len(v) > len("unix:"):
		return "unix", strings.TrimPrefix(v, "unix:"), nil
	case strings.HasPrefix(v, "tcp:"):
		a := strings.TrimPrefix(v, "tcp:")
		if _, port, err := net.SplitHostPort(a); err == nil && port != "" {
			return "tcp", a, nil
		}
	}
	return "", "", fmt.Errorf("agentx %q: want unix:PATH, tcp:HOST:PORT or off", v)
}

// samplingRate is the default rate of a port: one sample per Mb/s of link
// speed (1 in 1000 at 1G, 1 in 10000 at 10G), at least MinSampling; the
// configured rate wins when set.
func (s *Settings) samplingRate(speedMbps uint64) uint32 {
	if s.Sampling != 0 {
		return s.Sampling
	}
	if speedMbps == 0 {
		return s.SamplingUnknownSpeed
	}
	if s.SamplingBpsRatio != 0 {
		// hsflowd's sampling.bps_ratio: speed / ratio, at least 1.
		return uint32(max(min(speedMbps*1_000_000/s.SamplingBpsRatio, 1<<31), 1))
	}
	if speedMbps > 1<<31 {
		speedMbps = 1 << 31
	}
	return max(uint32(speedMbps), MinSampling)
}

// pollInterval returns the polling interval as a duration.
func (s *Settings) pollInterval() time.Duration { return time.Duration(s.Polling) * time.Second }
