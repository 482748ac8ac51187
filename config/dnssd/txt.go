package dnssd

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/config/hsflowdconf"
)

// Settings are the settings a DNS-SD answer carries, each already
// checked: the collectors of its SRV records and the keys of its TXT
// records that were valid (or, for a key whose new value was not, the
// value it had before). Absent keys are not in Values.
type Settings struct {
	// Collectors are the SRV targets resolved, as IP:port, in the
	// order of the answer (priority and weight are not used: every
	// collector receives every datagram, as in hsflowd).
	Collectors []string
	// Values are the TXT settings by canonical key (lower case; a
	// speed as hsflowdconf.PrintSpeed prints it, "sampling.10G"), as
	// written in the record.
	Values map[string]string
	// CIDRs are the agent.cidr values in record order (nil: none).
	CIDRs []string
}

// Problem is a part of an answer that was not taken, and why: a bad
// value, an unknown key, a target that did not resolve.
type Problem struct {
	// Kind is "bad_value", "unknown_key" or "unresolved_target" (the
	// metric's label).
	Kind string
	// Item is the TXT string or SRV target concerned.
	Item string
	// Why says what was wrong and what the agent does instead.
	Why string
}

func (p Problem) String() string { return fmt.Sprintf("%s %q: %s", p.Kind, p.Item, p.Why) }

// Problem kinds.
const (
	BadValue         = "bad_value"
	UnknownKey       = "unknown_key"
	UnresolvedTarget = "unresolved_target"
)

// The TXT keys (hsflowd's dynamic_config_line, hsflowconfig.c), lower
// case. sampling.<speed> is keySamplingDot + a speed.
const (
	keySampling    = "sampling"
	keySamplingDot = "sampling."
	keyBpsRatio    = "sampling.bps_ratio"
	keyPolling     = "polling"
	keyHeaderBytes = "headerbytes"
	keyDropLimit   = "droplimit"
	keyAgentIP     = "agentip"
	keyAgent       = "agent"
	keyAgentCIDR   = "agent.cidr"
	keyTxtVers     = "txtvers"
)

// ParseTXT reads the TXT strings of an answer (each "key=value"; keys
// compared without regard to case, the last of a repeated key wins, as
// hsflowd applies them in order). A value that is not valid is a
// Problem, and the key keeps its value in prev (the settings in force);
// a key that is not one hsflowd's DNS-SD takes is a Problem and is not
// used; txtvers is ignored.
func ParseTXT(txt []string, prev Settings) (Settings, []Problem) {
	out := Settings{Values: map[string]string{}}
	var probs []Problem
	bad := func(item, why string) { probs = append(probs, Problem{Kind: BadValue, Item: item, Why: why}) }
	var cidrs []string
	cidrBad := false
	for _, s := range txt {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			probs = append(probs, Problem{Kind: UnknownKey, Item: s, Why: "not key=value; ignored"})
			continue
		}
		key := strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		switch {
		case key == keyTxtVers:
		case key == keySampling, key == keyBpsRatio:
			if _, err := parseUint(v, 1, maxRate); err != nil {
				bad(s, err.Error()+"; the rate in force stays")
				continue
			}
			out.Values[key] = v
		case strings.HasPrefix(key, keySamplingDot):
			bps, ok := hsflowdconf.ParseSpeed(key[len(keySamplingDot):])
			if !ok {
				probs = append(probs, Problem{Kind: UnknownKey, Item: s,
					Why: "not a link speed such as 100M, 1G, 10G, 25G, 40G, 100G, 400G, 800G, 1T (application sampling is the application's own sampling_rate); ignored"})
				continue
			}
			ck := keySamplingDot + hsflowdconf.PrintSpeed(bps)
			if _, err := parseUint(v, 1, maxRate); err != nil {
				bad(s, err.Error()+"; the rate in force stays")
				continue
			}
			out.Values[ck] = v
		case key == keyPolling:
			if _, err := parseUint(v, 0, maxPolling); err != nil {
				bad(s, err.Error()+"; the polling interval in force stays")
				continue
			}
			out.Values[key] = v
		case key == keyHeaderBytes:
			if _, err := parseUint(v, minHeader, maxHeader); err != nil {
				bad(s, err.Error()+"; the header size in force stays")
				continue
			}
			out.Values[key] = v
		case key == keyDropLimit:
			if _, err := parseUint(v, 0, maxDropLimit); err != nil {
				bad(s, err.Error()+"; the drop notification limit in force stays")
				continue
			}
			out.Values[key] = v
		case key == keyAgentIP:
			if _, err := netip.ParseAddr(v); err != nil {
				bad(s, "not an IP address; the agent address in force stays")
				continue
			}
			out.Values[key] = v
		case key == keyAgent:
			if v == "" || len(v) > 15 || strings.ContainsAny(v, "/ \t") {
				bad(s, "not an interface name; the agent interface in force stays")
				continue
			}
			out.Values[key] = v
		case key == keyAgentCIDR:
			p, err := netip.ParsePrefix(strings.TrimPrefix(v, "!"))
			if err != nil {
				bad(s, "not a prefix such as 198.18.0.0/15 or !10.0.0.0/8; the agent.cidr list in force stays")
				cidrBad = true
				continue
			}
			if strings.HasPrefix(v, "!") {
				cidrs = append(cidrs, "!"+p.Masked().String())
			} else {
				cidrs = append(cidrs, p.Masked().String())
			}
		default:
			probs = append(probs, Problem{Kind: UnknownKey, Item: s, Why: "not a DNS-SD setting; ignored"})
		}
	}
	switch {
	case cidrBad:
		// The list is one setting: a bad entry keeps the list in force.
		out.CIDRs = slices.Clone(prev.CIDRs)
	case len(cidrs) > config.MaxAgentCIDRs:
		bad(keyAgentCIDR, fmt.Sprintf("%d entries, at most %d; the agent.cidr list in force stays", len(cidrs), config.MaxAgentCIDRs))
		out.CIDRs = slices.Clone(prev.CIDRs)
	default:
		out.CIDRs = cidrs
	}
	// A bad value keeps the value in force: the previous answer's.
	for _, p := range probs {
		if p.Kind != BadValue {
			continue
		}
		k, _, _ := strings.Cut(p.Item, "=")
		k = canonicalKey(k)
		if _, now := out.Values[k]; now {
			continue // a later string of the same key was good
		}
		if old, had := prev.Values[k]; had {
			out.Values[k] = old
		}
	}
	if n := speedKeys(out.Values); n > config.MaxSamplingSpeeds {
		bad("sampling.<speed>", fmt.Sprintf("%d speeds, at most %d; the rates in force stay", n, config.MaxSamplingSpeeds))
		for k := range out.Values {
			if isSpeedKey(k) {
				delete(out.Values, k)
			}
		}
		for k, v := range prev.Values {
			if isSpeedKey(k) {
				out.Values[k] = v
			}
		}
	}
	return out, probs
}

// Bounds of the TXT values: those of the settings they set
// (config.Settings.Validate), the rates as hsflowd.conf's.
const (
	maxRate      = 10_000_000
	maxPolling   = 3600
	minHeader    = 20
	maxHeader    = 256
	maxDropLimit = 1_000_000
)

// parseUint reads a decimal whole number within [lo, hi]. hsflowd reads
// TXT values with strtol(v, NULL, 0), which takes "abc" as 0 and "010"
// as 8; a value that is not plain decimal is refused here instead.
func parseUint(v string, lo, hi uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d outside %d..%d", n, lo, hi)
	}
	return n, nil
}

// canonicalKey is the Values key of a TXT key as written.
func canonicalKey(k string) string {
	k = strings.ToLower(strings.TrimSpace(k))
	if rest, ok := strings.CutPrefix(k, keySamplingDot); ok && k != keyBpsRatio {
		if bps, ok := hsflowdconf.ParseSpeed(rest); ok {
			return keySamplingDot + hsflowdconf.PrintSpeed(bps)
		}
	}
	return k
}

func isSpeedKey(k string) bool { return strings.HasPrefix(k, keySamplingDot) && k != keyBpsRatio }

func speedKeys(m map[string]string) int {
	n := 0
	for k := range m {
		if isSpeedKey(k) {
			n++
		}
	}
	return n
}

// Apply returns base (the settings of the files and flags) with the
// DNS-SD settings ds over it:
//   - the collectors are DNS-SD's alone (none: no static receiver);
//   - when the TXT records carry any sampling key (sampling,
//     sampling.<speed>, sampling.bps_ratio), the sampling rules are
//     DNS-SD's as a whole: base's sampling, sampling_speed and
//     sampling_bps_ratio are replaced. A port's rate is then
//     sampling.<its speed>, else sampling, else the speed default
//     (sampling.bps_ratio, else one per Mb/s) — config.Settings.
//     PortSamplingRate. hsflowd lets its speed default win over a plain
//     sampling= (hsflowconfig.c lookupPacketSamplingRate);
//   - polling, headerBytes, dropLimit, agentIP, agent and agent.cidr
//     replace their setting when present;
//   - every other setting is base's.
//
// base is not modified.
func Apply(base config.Settings, ds Settings) config.Settings {
	s := base
	s.Collectors = nil
	for _, c := range ds.Collectors {
		s.Collectors = append(s.Collectors, config.Collector{Address: c, MaxDatagramSize: maxDatagram(base)})
	}
	if len(s.Collectors) == 0 {
		s.Collectors = []config.Collector{{Address: config.NoCollector}}
	}
	num := func(k string) (uint64, bool) {
		v, ok := ds.Values[k]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		return n, err == nil
	}
	sampling := false
	for k := range ds.Values {
		if k == keySampling || isSpeedKey(k) || k == keyBpsRatio {
			sampling = true
		}
	}
	if sampling {
		s.Sampling, s.SamplingSpeed, s.SamplingBpsRatio = 0, nil, 0
		if n, ok := num(keySampling); ok {
			s.Sampling = uint32(n)
		}
		if n, ok := num(keyBpsRatio); ok {
			s.SamplingBpsRatio = n
		}
		for k, v := range ds.Values {
			if rest, ok := strings.CutPrefix(k, keySamplingDot); ok && isSpeedKey(k) {
				n, err := strconv.ParseUint(v, 10, 32)
				if err != nil {
					continue
				}
				if s.SamplingSpeed == nil {
					s.SamplingSpeed = map[string]uint32{}
				}
				s.SamplingSpeed[rest] = uint32(n)
			}
		}
	}
	if n, ok := num(keyPolling); ok {
		s.Polling = config.Seconds(n)
	}
	if n, ok := num(keyHeaderBytes); ok {
		s.HeaderBytes = int(n)
	}
	if n, ok := num(keyDropLimit); ok {
		s.DropsLimit = int(n)
	}
	if v, ok := ds.Values[keyAgentIP]; ok {
		s.AgentAddress = v
	}
	if v, ok := ds.Values[keyAgent]; ok {
		s.AgentInterface = v
	}
	if ds.CIDRs != nil {
		s.AgentCIDR = slices.Clone(ds.CIDRs)
	}
	return s
}

// maxDatagram is the datagram size of base's collectors (hsflowd.conf's
// datagramBytes applies to every collector), 0 for the default.
func maxDatagram(base config.Settings) int {
	for _, c := range base.Collectors {
		if c.MaxDatagramSize != 0 {
			return c.MaxDatagramSize
		}
	}
	return 0
}
