package config

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/config/hsflowdconf"
)

// The host agent's configuration (-hsflowd-conf / hsflowd_conf) is the
// lowest layer of the settings: built-in defaults, then hsflowd.conf,
// then this daemon's config file, then the flags. hsflowd.conf settings
// map onto these Settings fields (docs/guides/dent-cumulus.md):
//
//	collector { ip udpport }   Collectors (ip:udpport)
//	datagramBytes              every collector's MaxDatagramSize
//	sampling                   SamplingUnknownSpeed (hsflowd uses it for
//	                           ports of unknown speed), and Sampling too
//	                           when sampling.bps_ratio = 0
//	sampling.<speed>           SamplingSpeed["<speed>"]
//	sampling.bps_ratio         SamplingBpsRatio
//	polling                    Polling
//	headerBytes                HeaderBytes
//	agent / agentIP            AgentInterface / AgentAddress
//	agent.cidr                 AgentCIDR (in file order)
//	pcap { dev sampling }      Ports, PortSampling[dev]
//	json { udpport }           AppAPI 127.0.0.1:udpport (0 = off)
//	dropmon { limit }          Drops on, DropsLimit
//	sonic { waitReady unixsock }  Sonic on, SonicWaitReady, SonicTCP
//	DNS-SD { domain }          DNSSD on, DNSSDDomain (also DNSSD = on,
//	                           DNSSD_domain)
//	psample { group ingress    PsampleIngressGroup = group, and
//	          egress }         PsampleEgressGroup = group+1, Direction
//	dent { sw switchport }     Dent on, DentSW, DentSwitchPort
//
// Everything else hsflowd knows is reported once as ignored, with why.

// More settings taken from hsflowd.conf, also valid in the TOML file,
// are fields of Settings (settings.go): SamplingSpeed, SamplingBpsRatio,
// PortSampling and AgentCIDR.

// reportedIgnored remembers the ignored settings already printed, so a
// reload does not print them again.
var reportedIgnored sync.Map

// ForgetReportedIgnored makes applyHsflowdConf print every ignored
// setting again, as in a new process (tests).
func ForgetReportedIgnored() { reportedIgnored.Clear() }

// applyHsflowdConf reads the hsflowd configuration file path into s and
// prints, once per process, each setting it ignores and why to notes.
func applyHsflowdConf(path string, s *Settings, notes io.Writer) error {
	data, err := readLimited(path, MaxConfigBytes)
	if err != nil {
		return fmt.Errorf("reading hsflowd config: %w", err)
	}
	c, err := hsflowdconf.Parse(path, data)
	if err != nil {
		return fmt.Errorf("hsflowd config: %w", err)
	}
	at := func(p hsflowdconf.Pos, format string, args ...any) error {
		return fmt.Errorf("hsflowd config: %s:%d:%d: %s", path, p.Line, p.Col, fmt.Sprintf(format, args...))
	}
	ignored := c.Ignored
	if len(c.Collectors) > 0 {
		s.Collectors = nil
		for _, col := range c.Collectors {
			s.Collectors = append(s.Collectors, Collector{Address: net.JoinHostPort(col.IP, strconv.Itoa(int(col.UDPPort)))})
		}
	}
	if d := c.DatagramBytes; d != nil {
		if len(s.Collectors) == 0 {
			s.Collectors = []Collector{{Address: DefaultCollector}}
		}
		for i := range s.Collectors {
			s.Collectors[i].MaxDatagramSize = int(d.V)
		}
	}
	if v := c.Sampling; v != nil {
		if v.V == 0 {
			return at(v.Pos, "sampling = 0 (ports of unknown speed not sampled) is not supported; select ports with pcap { dev }")
		}
		s.SamplingUnknownSpeed = uint32(v.V)
	}
	if len(c.SamplingSpeed) > 0 {
		s.SamplingSpeed = map[string]uint32{}
		for bps, v := range c.SamplingSpeed {
			if v.V == 0 {
				return at(v.Pos, "a sampling rate of 0 (port not sampled) is not supported; select ports with pcap { dev }")
			}
			s.SamplingSpeed[formatSpeed(bps)] = uint32(v.V)
		}
	}
	if r := c.SamplingBpsRatio; r != nil {
		switch {
		case r.V != 0:
			s.SamplingBpsRatio = r.V
		case c.Sampling != nil:
			// hsflowd: ratio 0 turns the speed rule off; "sampling"
			// then applies to every port.
			s.Sampling = uint32(c.Sampling.V)
		default:
			ignored = append(ignored, hsflowdconf.Ignored{Setting: "sampling.bps_ratio", Pos: r.Pos,
				Reason: "0 without sampling = N: sflowswitchd's speed rule stays (1 in speed/1 Mb/s, at least 100)"})
		}
	}
	if v := c.Polling; v != nil {
		s.Polling = Seconds(v.V)
	}
	if v := c.HeaderBytes; v != nil {
		// hsflowd takes 0..256 (hsflowconfig.c: expectInteger32(...,
		// 0, HSP_MAX_HEADER_BYTES)); sflowswitchd exports 20..256, as
		// the SFLOW-MIB's sFlowFsMaximumHeaderSize is adjusted here: a
		// sampled_header shorter than an Ethernet and an IPv4 header
		// tells a collector nothing (hsflowd's 0 sends an empty
		// header). Every file hsflowd reads is read: below 20 is raised
		// to 20, and said.
		s.HeaderBytes = int(v.V)
		if v.V < MinHeaderBytes {
			s.HeaderBytes = MinHeaderBytes
			ignored = append(ignored, hsflowdconf.Ignored{Setting: "headerBytes", Pos: v.Pos,
				Reason: fmt.Sprintf("%d raised to %d: sflowswitchd exports %d..256 header bytes (a header shorter than Ethernet + IPv4 tells a collector nothing)", v.V, MinHeaderBytes, MinHeaderBytes)})
		}
	}
	if c.AgentDevice != "" {
		s.AgentInterface = c.AgentDevice
	}
	if c.AgentIP != "" {
		s.AgentAddress = c.AgentIP
	}
	if len(c.AgentCIDRs) > 0 {
		s.AgentCIDR = nil
		for _, cidr := range c.AgentCIDRs {
			v := cidr.Prefix.String()
			if cidr.Not {
				v = "!" + v
			}
			s.AgentCIDR = append(s.AgentCIDR, v)
		}
	}
	if len(c.Pcaps) > 0 {
		s.Ports = nil
		for _, p := range c.Pcaps {
			s.Ports = append(s.Ports, p.Dev)
			if p.Sampling != nil {
				if p.Sampling.V == 0 {
					return at(p.Sampling.Pos, "pcap sampling = 0 is not supported; leave the port out")
				}
				if s.PortSampling == nil {
					s.PortSampling = map[string]uint32{}
				}
				s.PortSampling[p.Dev] = uint32(p.Sampling.V)
			}
		}
	}
	if v := c.JSONPort; v != nil {
		s.AppAPI = ""
		if v.V != 0 {
			s.AppAPI = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(v.V)).String()
		}
	}
	if c.Sonic != nil {
		// SONiC's sflow container: configuration from Redis (sonic.go).
		s.Sonic, s.SonicTCP = true, !c.Sonic.UnixSock
		if c.Sonic.WaitReady != nil {
			s.SonicWaitReady = int(c.Sonic.WaitReady.V)
		}
	}
	applyPlatform(c, s)
	if d := c.DNSSD; d != nil {
		s.DNSSD, s.DNSSDDomain = true, d.Domain
	}
	if v := c.DropmonLimit; v != nil {
		// hsflowd's dropmon: notifications on, at most limit a second.
		s.Drops, s.DropsLimit = "on", int(v.V)
	}
	sort.SliceStable(ignored, func(i, j int) bool {
		a, b := ignored[i].Pos, ignored[j].Pos
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	for _, ig := range ignored {
		key := fmt.Sprintf("%s:%d:%d:%s", path, ig.Line, ig.Col, ig.Setting)
		if _, dup := reportedIgnored.LoadOrStore(key, true); dup {
			continue
		}
		// Structured as the daemon's own log (logfmt), whatever prints it.
		slog.New(slog.NewTextHandler(notes, nil)).Warn("hsflowd setting ignored",
			"file", path, "line", ig.Line, "col", ig.Col, "setting", ig.Setting, "reason", ig.Reason)
	}
	return nil
}

// formatSpeed prints bit/s as hsflowd does in sampling.<speed>: the
// largest of T, G, M, K that divides it.
func formatSpeed(bps uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if bps%u.mult == 0 {
			return strconv.FormatUint(bps/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(bps, 10)
}

// tomlHsflowdConf returns the hsflowd_conf key of a TOML config file
// (read on its own, before the layers are applied).
func tomlHsflowdConf(name string) (string, error) {
	var peek struct {
		HsflowdConf string `toml:"hsflowd_conf"`
	}
	data, err := readLimited(name, MaxConfigBytes)
	if err != nil {
		return "", fmt.Errorf("reading config: %w", err)
	}
	if _, err := decodeTOML(name, data, &peek); err != nil {
		return "", err
	}
	if peek.HsflowdConf != "" && !filepath.IsAbs(peek.HsflowdConf) {
		// Relative to the TOML file, as a reader of that file expects.
		peek.HsflowdConf = filepath.Join(filepath.Dir(name), peek.HsflowdConf)
	}
	return peek.HsflowdConf, nil
}

// validateHsflowdSettings checks the settings hsflowd.conf brought (also
// settable in the TOML file).
func (s *Settings) validateHsflowdSettings() []error {
	var errs []error
	for k, v := range s.SamplingSpeed {
		if _, ok := hsflowdconf.ParseSpeed(k); !ok {
			errs = append(errs, fmt.Errorf("sampling_speed %q: want a speed such as 100M, 1G, 10G, 25G", k))
		}
		if v == 0 {
			errs = append(errs, fmt.Errorf("sampling_speed %q = 0: %s", k, RateZero))
		}
	}
	for k, v := range s.PortSampling {
		if v == 0 {
			errs = append(errs, fmt.Errorf("port_sampling %q = 0: %s", k, RateZero))
		}
	}
	if _, err := parseAgentCIDRs(s.AgentCIDR); err != nil {
		errs = append(errs, err)
	}
	if s.StateDir != "" && !filepath.IsAbs(s.StateDir) {
		errs = append(errs, fmt.Errorf("state_dir %q must be an absolute path", s.StateDir))
	}
	return errs
}

// PortSamplingRate is the configured rate of port name at speedMbps:
// the port's own rate (port_sampling, hsflowd pcap { sampling }), else
// its speed's (sampling_speed, hsflowd sampling.<speed>), else
// SamplingRate. A speed entry applies to a port whose speed it equals,
// or that hsflowd prints as it (hsflowdconf.PrintSpeed: "2G" is also
// the entry of a 2.5 Gb/s port, as in hsflowd); an exact entry wins.
func (s *Settings) PortSamplingRate(name string, speedMbps uint64) uint32 {
	if r, ok := s.PortSampling[name]; ok {
		return r
	}
	if speedMbps != 0 && len(s.SamplingSpeed) > 0 {
		bps := speedMbps * 1_000_000
		printed := hsflowdconf.PrintSpeed(bps)
		var byPrint uint32
		for k, r := range s.SamplingSpeed {
			if v, ok := hsflowdconf.ParseSpeed(k); ok && v == bps {
				return r
			}
			if strings.EqualFold(k, printed) {
				byPrint = r
			}
		}
		if byPrint != 0 {
			return byPrint
		}
	}
	return s.SamplingRate(speedMbps)
}

// AgentCIDR is one agent_cidr entry: a prefix whose addresses are
// preferred as the agent address, or excluded ("!prefix").
type AgentCIDR struct {
	Prefix  netip.Prefix
	Exclude bool
}

// AgentCIDRs returns agent_cidr parsed (Validate refused bad entries).
func (s *Settings) AgentCIDRs() []AgentCIDR {
	list, _ := parseAgentCIDRs(s.AgentCIDR)
	return list
}

func parseAgentCIDRs(vs []string) ([]AgentCIDR, error) {
	var out []AgentCIDR
	for _, v := range vs {
		c := AgentCIDR{}
		s := v
		if len(s) > 0 && s[0] == '!' {
			c.Exclude, s = true, s[1:]
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("agent_cidr %q: want a prefix such as 198.18.0.0/15, or !prefix to exclude", v)
		}
		c.Prefix = p.Masked()
		out = append(out, c)
	}
	return out, nil
}

// PortRateKey names the setting that decides port name's rate at
// speedMbps (PortSamplingRate's order), "" when it is the rate from link
// speed (no setting).
func (s *Settings) PortRateKey(name string, speedMbps uint64) string {
	if _, ok := s.PortSampling[name]; ok {
		return "port_sampling"
	}
	if speedMbps != 0 && len(s.SamplingSpeed) > 0 {
		for k := range s.SamplingSpeed {
			if bps, ok := hsflowdconf.ParseSpeed(k); ok && bps == speedMbps*1_000_000 {
				return "sampling_speed"
			}
		}
	}
	switch {
	case s.Sampling != 0:
		return "sampling"
	case speedMbps == 0:
		return "sampling_unknown_speed"
	case s.SamplingBpsRatio != 0:
		return "sampling_bps_ratio"
	}
	return ""
}
