// Package config is the daemon's configuration: the Settings, their
// defaults, the layers they are read from (built-in defaults, a host
// agent's hsflowd.conf, the TOML file, the command line), their
// validation as a whole and the per-port sampling-rate rules. It imports
// nothing of the project: the components take config structs of their
// own, which the composition (daemon/settings.go) fills from the
// Settings, and checks what only the components know (Layers.Check).
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// Settings is the daemon's configuration: built-in defaults, overridden by
// the config file (-config), overridden by command-line flags. SIGHUP
// re-reads the file and applies the same precedence again.
type Settings struct {
	// Collectors each become one receiver (sFlowRcvrTable row 1, 2, ...).
	Collectors []Collector `toml:"collector"`
	// Sampling is the rate for every port, 1 in N; absent, it is derived
	// from the link speed (one sample per Mb/s of speed, at least
	// MinSampling). 0 is refused in the file, hsflowd.conf and the flags
	// (RateZero): only over SNMP, as the SFLOW-MIB defines, does
	// sFlowFsPacketSamplingRate 0 turn a sampler off.
	Sampling uint32 `toml:"sampling"`
	// SamplingUnknownSpeed is the rate of ports whose speed is unknown.
	SamplingUnknownSpeed uint32 `toml:"sampling_unknown_speed"`
	// Polling is the counter polling interval in seconds (0 = off); the
	// file also takes a duration ("20s").
	Polling Seconds `toml:"polling"`
	// HeaderBytes is sFlowFsMaximumHeaderSize for every sampler, 20..256
	// (hsflowd.conf's headerBytes below 20 is raised to 20, and said).
	HeaderBytes int `toml:"header_bytes"`
	// Ports selects the sampled ports by name or glob; empty = every up
	// port that is not loopback (nor a bridge device), but the management
	// interface: the one with the agent address, and the default route's
	// (logged).
	Ports []string `toml:"ports"`
	// MonitorPorts are ports carrying mirrored traffic (SPAN/TAP), sampled
	// through AF_XDP; unsampled frames there are dropped.
	MonitorPorts []string `toml:"monitor_ports"`
	// AgentAddress is sFlowAgentAddress; empty = chosen (daemon/internal/agentaddr).
	AgentAddress string `toml:"agent_address"`
	// AgentInterface names the interface whose address is the agent
	// address when AgentAddress is empty.
	AgentInterface string `toml:"agent_interface"`
	// Workers is the number of sub-agents; 0 = one per CPU.
	Workers int `toml:"workers"`
	// Metrics is the listen address of the Prometheus endpoint; empty =
	// off; loopback only unless MetricsAllowRemote (listenAddress).
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
	// APMInterval is the APM report interval in seconds (0 = 60); the
	// file also takes a duration ("1m").
	APMInterval Seconds `toml:"apm_interval"`
	// APMReports is the number of APM reports kept per report control
	// (0 = 60).
	APMReports int `toml:"apm_reports"`
	// StateDir keeps what must survive a restart: the data source indexes
	// assigned to applications without a service port (apps.json). The
	// systemd unit's StateDirectory.
	StateDir string `toml:"state_dir"`
	// HsflowdConf is a host agent (hsflowd) configuration file whose
	// settings apply under this file's and the flags (hsflowd.go).
	HsflowdConf string `toml:"hsflowd_conf"`
	// Rates and agent address preferences also read from hsflowd.conf
	// (hsflowd.go): per link speed ("10G" = 10000), the bit/s per
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
	// RingBytes is the size of each worker's ring buffer, through which
	// the kernel hands sampled headers to the worker: a power of two
	// from the page size to 1 GiB (dataplane.CheckRingBytes, checked by
	// the daemon's Validate). It absorbs a burst
	// of samples while the worker is behind or off its CPU; what does
	// not fit is counted (drops). Kernel memory: RingBytes per worker.
	RingBytes int `toml:"ring_bytes"`
	// Direction is which way every port's frames are sampled: "ingress"
	// (the default: the frames a port receives), "egress" (the frames it
	// sends, at TC egress) or "both". Monitor ports are sampled at
	// ingress only.
	Direction string `toml:"direction"`
	// PortDirection overrides Direction per port: port name or glob
	// pattern (as in ports) -> "ingress", "egress" or "both". A port
	// several patterns match takes its exact name's entry, else the
	// first pattern in sorted order.
	PortDirection map[string]string `toml:"port_direction"`
	// Transit follows each sampled frame of a port sampled at TC to where
	// it leaves the switch, so that its flow sample says how long it took
	// to leave (extended_transit), through which transmit queue
	// (extended_egress_queue) and how many bytes were queued ahead of it
	// (extended_queue): the record waits in the kernel until the frame
	// left (dataplane/bpf/transit.h). Needs Linux 6.2; read at start.
	Transit bool `toml:"transit"`
	// Hook is where ports are sampled: "auto" (TC ingress on veth ports,
	// XDP elsewhere), "xdp", "tc" or "psample" (a tc matchall + sample
	// rule per port, samples read from the kernel's PSAMPLE channel: switch
	// ASICs; dataplane.Hook). Monitor ports are always sampled with XDP.
	Hook string `toml:"hook"`
	// PortHook overrides Hook per port: port name or glob -> "auto",
	// "xdp", "tc" or "psample" (a port's own entry first, then the first
	// matching pattern in sorted order). A port's hook is taken when the
	// port is first sampled; a port already sampled keeps its own until it
	// is sampled anew (removed and added again, or a restart). Not with
	// psample_group (listen-only: every port is the group's).
	PortHook map[string]string `toml:"port_hook"`
	// PsampleGroup, when not 0, is listen-only psample mode: the agent
	// installs no rule and reads the samples of this psample group, which
	// another component's rules send (SONiC's sflowmgrd, DENT's tc
	// configuration), each at the rate it carries.
	PsampleGroup uint32 `toml:"psample_group"`
	// PsampleIngressGroup and PsampleEgressGroup, when not 0, are
	// listen-only psample by group, as hsflowd's psample { group=G
	// ingress egress } (G and G+1): the samples of the first are the
	// ports' ingress samples, of the second their egress samples; the
	// direction comes from the group (platform.go).
	PsampleIngressGroup uint32 `toml:"psample_ingress_group"`
	PsampleEgressGroup  uint32 `toml:"psample_egress_group"`
	// PsampleIntake is how the psample path receives its samples: "auto"
	// (default: the tap, an fentry program on psample_sample_packet whose
	// ring is read in place, where the kernel lets it attach; netlink
	// otherwise), "netlink" (the PSAMPLE socket: a message per sample, and
	// the psample module stays free to unload, which the tap's attachment
	// prevents), or "tap" (the tap or an error at start).
	PsampleIntake string `toml:"psample_intake"`
	// Dent is hsflowd's dent { }: the agent owns a tc matchall + sample
	// rule on each switch port (a name matching DentSwitchPort), at the
	// port's rate, sending to the psample groups above, truncated to
	// header_bytes, in hardware only (skip_sw) unless DentSW; the ports
	// are read as listen-only psample (platform.go).
	Dent           bool   `toml:"dent"`
	DentSwitchPort string `toml:"dent_switchport"`
	DentSW         bool   `toml:"dent_sw"`
	// Drops turns dropped-packet notifications on or off ("on", "off").
	Drops string `toml:"drops"`
	// DropsLimit is the drop notifications per second (0: count drops,
	// notify none).
	DropsLimit int `toml:"drops_limit"`
	// DropsHeaderBytes is sFlowEsMaximumHeaderSize: bytes of each dropped
	// packet exported, 0..256.
	DropsHeaderBytes int `toml:"drops_header_bytes"`
	// PinDir is the daemon's own directory on a BPF file system, where
	// the samplers, their counters and rings and the agent's sequence
	// numbers are pinned so that they outlive the process: an upgrade in
	// place (SIGUSR2) and a restart after a crash take them over without
	// a gap (dataplane.Config.PinDir). "off" pins nothing. One directory
	// per daemon.
	PinDir string `toml:"pin_dir"`
	// MaxSamplesPerSecond and MaxPortSamplesPerSecond are the backoff's
	// quotas (agent.Backoff): when the samples offered by the agent, or by
	// a port, exceed them, the rate in force steps up until they fit and
	// back down when the load falls. 0: no quota (the default). Read at
	// start.
	MaxSamplesPerSecond     int `toml:"max_samples_per_second"`
	MaxPortSamplesPerSecond int `toml:"max_port_samples_per_second"`
	// SONiC mode (sonic.go): the configuration, ports and counters come
	// from SONiC's Redis, as with hsflowd's sonic { } module.
	Sonic bool `toml:"sonic"`
	// SonicDBConfig is SONiC's database_config.json.
	SonicDBConfig string `toml:"sonic_db_config"`
	// SonicWaitReady is how long, in seconds, the agent waits for
	// SYSTEM_READY before reporting the ports anyway (hsflowd's
	// waitReady).
	SonicWaitReady int `toml:"sonic_wait_ready"`
	// SonicTCP connects to Redis over TCP rather than its unix socket
	// (hsflowd's sonic { unixsock = off }).
	SonicTCP bool `toml:"sonic_tcp"`
	// SonicAutoFile is where the running configuration is written as
	// hsflowd writes /etc/hsflowd.auto ("" = not written).
	SonicAutoFile string `toml:"sonic_auto_file"`
	// DNSSD is configuration by DNS-SD (hsflowd.conf's DNS-SD { }): the
	// SRV records of _sflow._udp<DNSSDDomain> name the collectors, its
	// TXT records carry settings that override the files' and the flags'
	// (config/dnssd; docs/guides/fleet.md). The collectors of the files
	// and flags are not used.
	DNSSD bool `toml:"dns_sd"`
	// DNSSDDomain is the domain appended to _sflow._udp, hsflowd's way
	// (".example.net"); "" = each domain of the resolver's search list.
	DNSSDDomain string `toml:"dns_sd_domain"`
	// DNSSDResolvConf is the resolver configuration whose nameservers
	// are asked and whose search list applies (read at every query).
	DNSSDResolvConf string `toml:"dns_sd_resolv_conf"`
	// DNSSDStartDelay bounds the random delay, in seconds, of the first
	// query after start (so that a fleet restarted at once does not ask
	// at once); 0 asks at once.
	DNSSDStartDelay Seconds `toml:"dns_sd_start_delay"`
}

// Collector is one sFlow collector.
type Collector struct {
	// Address is host:port (ParseCollector); NoCollector alone
	// means none.
	Address string `toml:"address"`
	// MaxDatagramSize is sFlowRcvrMaximumDatagramSize; 0 = the default.
	MaxDatagramSize int `toml:"max_datagram_size"`
	// Device, when set, is the network device (or VRF device) the
	// collector's datagrams leave through (SO_BINDTODEVICE): SONiC's
	// collector_vrf mgmt, hsflowd's collector { dev }.
	Device string `toml:"device"`
}

// Defaults of a daemon started with no configuration at all. Where a
// component has a default of its own (mib.DefaultReceivers,
// drops.DefaultLimit, ...) the two agree: the daemon's tests
// check it, since this package imports no other of the project.
const (
	DefaultCollector            = "127.0.0.1:6343"
	DefaultSamplingUnknownSpeed = 1000
	DefaultPolling              = 20
	DefaultHeaderBytes          = 128
	// MinHeaderBytes is the least header_bytes: an Ethernet and an IPv4
	// header (14 + 20 bytes would be more; 20 is what the sampler and
	// the SFLOW-MIB's adjustment take).
	MinHeaderBytes       = 20
	MinSampling          = 100
	DefaultAgentX        = "unix:/var/agentx/master"
	DefaultSNMPReceivers = 10
	DefaultSNMPInstances = 3
	DefaultStateDir      = "/var/lib/sflowswitchd"
	// DefaultPinDir pins nothing: a daemon started by hand or by a test
	// leaves nothing in the machine's BPF file system. The packaged
	// configuration sets PackagedPinDir (packaging/sflowswitchd.conf.example).
	DefaultPinDir = PinOff
	// PackagedPinDir is the pin directory of the packaged daemon.
	PackagedPinDir = "/sys/fs/bpf/sflowswitchd"
	// PinOff as pin_dir pins nothing.
	PinOff = "off"
	// DefaultMaxPorts is the default number of port slots: about 64 bytes
	// per possible CPU plus 0.5 KiB of locked kernel memory each
	// (dataplane.Config.MaxPorts).
	DefaultMaxPorts = 4096
	// DefaultRingBytes is each worker's ring buffer, 4 MiB of kernel
	// memory (dataplane.DefaultRingBytes, chosen from a measurement).
	DefaultRingBytes        = 4 << 20
	DefaultDNSSDResolvConf  = "/etc/resolv.conf"
	DefaultDNSSDStartDelay  = 30
	DefaultDropsLimit       = 100
	DefaultDropsHeaderBytes = 128
	// NoCollector as the only collector address means no static receiver:
	// every receiver is configured over SNMP.
	NoCollector = "none"
)

// Defaults returns the settings of a daemon started with no
// configuration at all.
func Defaults() Settings {
	return Settings{
		SamplingUnknownSpeed: DefaultSamplingUnknownSpeed,
		Polling:              DefaultPolling,
		HeaderBytes:          DefaultHeaderBytes,
		LogLevel:             "info",
		AgentX:               DefaultAgentX,
		SNMPReceivers:        DefaultSNMPReceivers,
		SNMPInstances:        DefaultSNMPInstances,
		StateDir:             DefaultStateDir,
		PinDir:               DefaultPinDir,
		MaxPorts:             DefaultMaxPorts,
		RingBytes:            DefaultRingBytes,
		Hook:                 "auto",
		Direction:            "ingress",
		Drops:                "on",
		DropsLimit:           DefaultDropsLimit,
		DropsHeaderBytes:     DefaultDropsHeaderBytes,
		SonicDBConfig:        DefaultSonicDBConfig,
		SonicWaitReady:       DefaultSonicWaitReady,
		SonicAutoFile:        DefaultSonicAutoFile,
		DNSSDResolvConf:      DefaultDNSSDResolvConf,
		DNSSDStartDelay:      DefaultDNSSDStartDelay,
		DentSwitchPort:       DefaultDentSwitchPort,
	}
}

// Layers are where Load reads the settings from, above the defaults.
type Layers struct {
	// File is the TOML config file; "" = none.
	File string
	// HsflowdConf is the hsflowd.conf given on the command line; "" =
	// the one File names (hsflowd_conf), if any.
	HsflowdConf string
	// Override applies the settings given on the command line, which
	// take precedence over the files; nil = none.
	Override func(*Settings)
	// Notes receives the hsflowd settings ignored, once per process.
	Notes io.Writer
	// Check validates what only the components that take the settings
	// know (the composition's daemon.Validate: addresses the agent
	// refuses, the dataplane's limits); its errors join Validate's, so
	// that every problem is reported at once. nil = none.
	Check func(Settings) error
	// Sources, when not nil, receives where each setting in force came
	// from (the default, hsflowd.conf, the file, a flag).
	Sources *Sources
	// Flags are the settings the command line gave, by config-file key:
	// they are from SourceFlag even where the value equals the one below.
	Flags []string
}

// Load builds the effective settings: defaults, then the hsflowd.conf,
// then the config file, then the command line; then the defaults that
// depend on the rest (one collector, one worker per CPU); then Validate
// and Check. A refusal's text is bounded (boundedError): at most
// MaxErrorLines problems of at most MaxErrorBytes each, whatever the file
// holds.
func Load(l Layers) (Settings, error) {
	s := Defaults()
	src := Sources{}
	var fileData []byte
	hsflowd := l.HsflowdConf
	if hsflowd == "" && l.File != "" {
		var err error
		if hsflowd, err = tomlHsflowdConf(l.File); err != nil {
			return Settings{}, bound(err)
		}
	}
	if hsflowd != "" {
		before := clone(s)
		if err := applyHsflowdConf(hsflowd, &s, l.Notes); err != nil {
			return Settings{}, bound(err)
		}
		src.note(&before, &s, SourceHsflowd)
	}
	if l.File != "" {
		before := clone(s)
		var keys []string
		var err error
		keys, fileData, err = readFile(l.File, &s)
		if err != nil {
			return Settings{}, bound(err)
		}
		src.note(&before, &s, SourceFile)
		for _, k := range keys {
			src[k] = SourceFile
		}
	}
	if l.Override != nil {
		before := clone(s)
		l.Override(&s)
		src.note(&before, &s, SourceFlag)
		for _, k := range l.Flags {
			src[k] = SourceFlag
		}
	}
	s.HsflowdConf = hsflowd
	if s.DNSSD {
		dnssdCollectors(&s, l.Notes)
	}
	dentGroups(&s)
	if len(s.Collectors) == 0 {
		s.Collectors = []Collector{{Address: DefaultCollector}}
	}
	if s.Workers == 0 {
		s.Workers = runtime.NumCPU()
	}
	err := s.Validate()
	if l.Check != nil {
		err = errors.Join(err, l.Check(s))
	}
	err = locate(err, l.File, fileData, src, hsflowd)
	if l.Sources != nil {
		*l.Sources = src
	}
	return s, bound(err)
}

// readFile reads a TOML config file (readLimited) and parses it into s
// (parse), refusing unknown keys so that a typo is an error rather than a
// silently ignored setting.
func readFile(name string, s *Settings) ([]string, []byte, error) {
	data, err := readLimited(name, MaxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	md, err := parse(name, data, s)
	if err != nil {
		return nil, nil, err
	}
	var keys []string
	for _, k := range md.Keys() {
		if len(k) == 1 {
			keys = append(keys, k[0])
		}
	}
	return keys, data, nil
}

// parse decodes the TOML text data of the config file name into s,
// refusing unknown keys (decodeTOML: the nesting is bounded first, and
// every refusal is one short line).
func parse(name string, data []byte, s *Settings) (toml.MetaData, error) {
	md, err := decodeTOML(name, data, s)
	if err != nil {
		return md, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return md, unknownSettings(name, data, und)
	}
	if md.IsDefined("sampling") && s.Sampling == 0 {
		return md, fmt.Errorf("config %s:%d: sampling = 0: %s", name, keyLine(data, toml.Key{"sampling"}), RateZero)
	}
	return md, nil
}

// RateZero is what every place that takes a sampling rate says of 0: the
// config file, hsflowd.conf and the flags refuse it; only the SFLOW-MIB
// (sFlowFsPacketSamplingRate, RFC 3176 / sFlow v5 MIB: "0 disables
// sampling") turns a sampler off with it.
const RateZero = "0 is not a rate (sample 1 in N, N >= 1): for the rate from link speed leave the setting out; not to sample a port leave it out of ports"

// MaxConfigBytes bounds the config file (and hsflowd.conf): a real one
// is a few KiB. With the nesting bounded (checkTOMLShape) the decoder
// allocates some 100 bytes per byte of the worst flat file (a key per
// line), so the bound keeps a hostile file's cost to about 30 MB
// (docs/reference/bounds.md).
const MaxConfigBytes = 256 << 10

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

// Validate checks every value, so that an invalid file is refused whole
// before anything changes. It normalizes the listen addresses
// (listenAddress).
func (s *Settings) Validate() error {
	errs := s.validateLimits()
	collectors := s.Collectors
	if len(collectors) > MaxCollectors {
		collectors = nil // refused above, whatever each one is
	}
	for i, c := range collectors {
		if c.Address == NoCollector {
			if len(s.Collectors) > 1 {
				errs = append(errs, fmt.Errorf("collector %q must be the only collector", NoCollector))
			}
			continue
		}
		if _, err := ParseCollector(c.Address); err != nil {
			errs = append(errs, fmt.Errorf("collector %d: %w", i+1, err))
		}
		if c.Device != "" && !validDevice(c.Device) {
			errs = append(errs, fmt.Errorf("collector %d: device %q is not an interface name", i+1, c.Device))
		}
		if c.MaxDatagramSize != 0 && (c.MaxDatagramSize < 200 || c.MaxDatagramSize > 65507) {
			errs = append(errs, fmt.Errorf("collector %d: max_datagram_size %d outside 200..65507", i+1, c.MaxDatagramSize))
		}
	}
	errs = append(errs, s.validateHsflowdSettings()...)
	errs = append(errs, s.validateSonic()...)
	if s.SamplingUnknownSpeed == 0 {
		errs = append(errs, errors.New("sampling_unknown_speed = 0: "+RateZero))
	}
	if s.Polling < 0 {
		errs = append(errs, errors.New("polling must not be negative"))
	}
	if s.HeaderBytes < 20 || s.HeaderBytes > 256 {
		errs = append(errs, fmt.Errorf("header_bytes %d: want %d..256 (bytes of each sampled frame)", s.HeaderBytes, MinHeaderBytes))
	}
	if !validDirection(s.Direction) {
		errs = append(errs, fmt.Errorf("direction %q: want ingress, egress or both", s.Direction))
	}
	for p, d := range s.PortDirection {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("port_direction pattern %q: %w", p, err))
		}
		if !validDirection(d) {
			errs = append(errs, fmt.Errorf("port_direction %q = %q: want ingress, egress or both", p, d))
		}
	}
	for p, h := range s.PortHook {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("port_hook pattern %q: %w", p, err))
		}
		if !validHook(h) {
			errs = append(errs, fmt.Errorf("port_hook %q = %q: want auto, xdp, tc or psample", p, h))
		}
	}
	switch s.PsampleIntake {
	case "", "auto", "netlink", "tap":
	default:
		errs = append(errs, fmt.Errorf("psample_intake %q: want auto, netlink or tap", s.PsampleIntake))
	}
	if len(s.PortHook) > 0 && s.PsampleGroup != 0 {
		errs = append(errs, fmt.Errorf("port_hook with psample_group %d: in listen-only mode every port is the group's", s.PsampleGroup))
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
	if s.PinDir != PinOff && !path.IsAbs(s.PinDir) {
		errs = append(errs, fmt.Errorf("pin_dir %q: want an absolute path or %q", s.PinDir, PinOff))
	}
	if s.Workers < 1 || s.Workers > 256 {
		errs = append(errs, fmt.Errorf("workers %d outside 1..256", s.Workers))
	}
	switch s.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", s.LogLevel))
	}
	// Listeners: loopback unless allowed (listenAddress); normalized here
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
	if _, _, err := ParseAgentX(s.AgentX); err != nil {
		errs = append(errs, err)
	}
	if s.SNMPReceivers < 1 || s.SNMPReceivers > MaxSNMPReceivers {
		errs = append(errs, fmt.Errorf("snmp_receivers %d outside 1..%d", s.SNMPReceivers, MaxSNMPReceivers))
	}
	if s.SNMPInstances < 1 || s.SNMPInstances > MaxSNMPInstances {
		errs = append(errs, fmt.Errorf("snmp_instances %d outside 1..%d", s.SNMPInstances, MaxSNMPInstances))
	}
	if s.Drops != "on" && s.Drops != "off" {
		errs = append(errs, fmt.Errorf("drops %q: want on or off", s.Drops))
	}
	if s.MaxSamplesPerSecond < 0 || s.MaxSamplesPerSecond > 100_000_000 {
		errs = append(errs, fmt.Errorf("max_samples_per_second %d outside 0..100000000", s.MaxSamplesPerSecond))
	}
	if s.MaxPortSamplesPerSecond < 0 || s.MaxPortSamplesPerSecond > 100_000_000 {
		errs = append(errs, fmt.Errorf("max_port_samples_per_second %d outside 0..100000000", s.MaxPortSamplesPerSecond))
	}
	errs = append(errs, s.validateDNSSD()...)
	errs = append(errs, s.validatePlatform()...)
	if s.DropsLimit < 0 || s.DropsLimit > 1_000_000 {
		errs = append(errs, fmt.Errorf("drops_limit %d outside 0..1000000", s.DropsLimit))
	}
	return errors.Join(errs...)
}

// StaticCollectors returns the collectors that become static receivers
// (none for "-collector none").
func (s *Settings) StaticCollectors() []Collector {
	if len(s.Collectors) == 1 && s.Collectors[0].Address == NoCollector {
		return nil
	}
	return s.Collectors
}

// ParseAgentX splits the agentx setting into a network and an address for
// agentx.Config; network "" means off.
func ParseAgentX(v string) (network, addr string, err error) {
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

// SamplingRate is the default rate of a port: one sample per Mb/s of link
// speed (1 in 1000 at 1G, 1 in 10000 at 10G), at least MinSampling; the
// configured rate wins when set.
func (s *Settings) SamplingRate(speedMbps uint64) uint32 {
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

// PollInterval returns the polling interval as a duration.
func (s *Settings) PollInterval() time.Duration { return s.Polling.Duration() }

// validDirection reports whether d names a sampling direction.
func validDirection(d string) bool {
	return d == "ingress" || d == "egress" || d == "both"
}

// validHook reports whether h names a sampler hook.
func validHook(h string) bool {
	return h == "auto" || h == "xdp" || h == "tc" || h == "psample"
}

// PortHookOf is the hook of port name: its own port_hook entry, else the
// first pattern (in sorted order) of port_hook that matches it, else Hook
// ("auto" when empty).
func (s *Settings) PortHookOf(name string) string {
	if h, ok := s.PortHook[name]; ok {
		return h
	}
	pats := make([]string, 0, len(s.PortHook))
	for p := range s.PortHook {
		pats = append(pats, p)
	}
	sort.Strings(pats)
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return s.PortHook[p]
		}
	}
	if s.Hook == "" {
		return "auto"
	}
	return s.Hook
}

// PortHooks reports whether any port's hook is h (Hook or a port_hook
// entry).
func (s *Settings) PortHooks(h string) bool {
	if s.Hook == h || (s.Hook == "" && h == "auto") {
		return true
	}
	for _, v := range s.PortHook {
		if v == h {
			return true
		}
	}
	return false
}

// PortDirectionOf is the sampling direction of port name: its own
// port_direction entry, else the first pattern (in sorted order) of
// port_direction that matches it, else Direction ("ingress" when empty).
func (s *Settings) PortDirectionOf(name string) string {
	if d, ok := s.PortDirection[name]; ok {
		return d
	}
	pats := make([]string, 0, len(s.PortDirection))
	for p := range s.PortDirection {
		pats = append(pats, p)
	}
	sort.Strings(pats)
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return s.PortDirection[p]
		}
	}
	if s.Direction == "" {
		return "ingress"
	}
	return s.Direction
}
