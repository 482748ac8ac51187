// Package hsflowdconf reads the configuration file of the host agent
// hsflowd (/etc/hsflowd.conf) and keeps the settings that apply to a
// switch; sflowswitchd maps them onto its own settings
// (config/hsflowd.go).
//
// The syntax is hsflowd's (src/Linux/hsflowconfig.c, readTokens and
// HSPReadConfigFile): '#' starts a comment to the end of the line; tokens
// are separated by white space, '=' and ';'; '{' and '}' are tokens of
// their own even when written against a word; a token in double quotes
// may hold any character ("" is a quote); setting names are compared
// without regard to case. The file is one or more "sflow { ... }" blocks;
// inside, "name value" is a setting and "name { ... }" a block, nested at
// most 3 deep.
//
// The reader is stricter than hsflowd where hsflowd would silently
// truncate or guess: an unterminated quote, a token over 255 bytes or a
// missing '}' at the end of the file are refused. Like hsflowd, it refuses
// settings hsflowd does not know. Every refusal names the line and column.
// Settings hsflowd knows but that do not apply to sflowswitchd are kept in
// Config.Ignored with the reason.
package hsflowdconf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Error is a refusal, at a line and column (both from 1) of the file.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Pos is where a setting was read.
type Pos struct{ Line, Col int }

// Uint is a number read from the file and where it was.
type Uint struct {
	V uint64
	Pos
}

// Collector is a collector { ip udpport } block.
type Collector struct {
	IP      string // an address or a host name, as hsflowd accepts
	UDPPort uint16 // 6343 when not given
	Pos
}

// Pcap is a pcap { } (or epcap { }) block naming a port to sample.
type Pcap struct {
	Dev      string
	Sampling *Uint // the port's own 1-in-N rate, if given
	Pos
}

// Ignored is a setting hsflowd knows that sflowswitchd does not take,
// and why.
type Ignored struct {
	Setting string
	Reason  string
	Pos
}

// Config is what applies to a switch in an hsflowd configuration. Absent
// settings are nil or empty.
type Config struct {
	Collectors []Collector
	// Sampling is the global "sampling" (hsflowd: the rate of ports
	// whose speed is unknown, or of every port with sampling.bps_ratio=0).
	Sampling *Uint
	// SamplingSpeed maps link speeds in bit/s (sampling.10G = 10000 is
	// 10e9) to a rate.
	SamplingSpeed map[uint64]Uint
	// SamplingBpsRatio is sampling.bps_ratio: rate = speed in bit/s /
	// ratio (hsflowd's default 1000000); 0 turns the rule off.
	SamplingBpsRatio *Uint
	Polling          *Uint
	HeaderBytes      *Uint
	DatagramBytes    *Uint
	// AgentDevice is "agent" (the interface whose address is the agent
	// address); AgentIP is the deprecated "agentIP".
	AgentDevice string
	AgentIP     string
	// AgentCIDRs are the agent.cidr lines in file order; a leading '!'
	// excludes the prefix.
	AgentCIDRs []CIDR
	Pcaps      []Pcap
	// JSONPort is the json { udpport } (36343 when the block has none;
	// 0 = off); nil without a json block.
	JSONPort *Uint
	// DropmonLimit is dropmon { limit } (hsflowd's default 100 when the
	// block has none); nil without a dropmon block.
	DropmonLimit *Uint
	// DNSSD is configuration by DNS-SD (a DNS-SD { domain } block, or
	// DNSSD = on); nil when off (dnssd.go).
	DNSSD *DNSSD
	// Psample and Dent are the psample { } and dent { } blocks
	// (platform.go); nil without them.
	Psample *Psample
	Dent    *Dent
	Ignored []Ignored
}

// CIDR is one agent.cidr line.
type CIDR struct {
	Prefix netip.Prefix
	Not    bool
	Pos
}

// Defaults hsflowd applies inside blocks (hsflowd.h, mod_json.c).
const (
	defaultCollectorPort = 6343
	defaultJSONPort      = 36343
	defaultDropmonLimit  = 100
	maxDepth             = 3
	maxToken             = 255
)

// Parse reads an hsflowd configuration; name is used in errors.
func Parse(name string, data []byte) (*Config, error) {
	toks, err := tokenize(name, string(data))
	if err != nil {
		return nil, err
	}
	p := &parser{file: name, toks: toks, cfg: &Config{SamplingSpeed: map[uint64]Uint{}}}
	if err := p.file_(); err != nil {
		return nil, err
	}
	if p.cfg.DNSSD != nil {
		p.cfg.DNSSD.Domain = p.dnssdDomain
	}
	return p.cfg, nil
}

type token struct {
	s      string
	quoted bool
	Pos
}

// tokenize splits the file as hsflowd's readTokens does.
func tokenize(file, data string) ([]token, error) {
	var toks []token
	for ln, line := range strings.Split(data, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if i := strings.IndexByte(line, '#'); i >= 0 { // hsflowd cuts at '#' even in quotes
			line = line[:i]
		}
		for i := 0; i < len(line); {
			c := line[i]
			pos := Pos{Line: ln + 1, Col: i + 1}
			switch {
			case c == ' ' || c == '\t' || c == '\r' || c == '=' || c == ';':
				i++
			case c == '{' || c == '}':
				toks = append(toks, token{s: string(c), Pos: pos})
				i++
			case c == '"':
				var b strings.Builder
				i++
				closed := false
				for i < len(line) {
					if line[i] == '"' {
						if i+1 < len(line) && line[i+1] == '"' {
							b.WriteByte('"')
							i += 2
							continue
						}
						i++
						closed = true
						break
					}
					b.WriteByte(line[i])
					i++
				}
				if !closed {
					return nil, &Error{file, pos.Line, pos.Col, "unterminated quoted string"}
				}
				if b.Len() > maxToken {
					return nil, &Error{file, pos.Line, pos.Col, fmt.Sprintf("quoted string of %d bytes, at most %d", b.Len(), maxToken)}
				}
				toks = append(toks, token{s: b.String(), quoted: true, Pos: pos})
			default:
				j := i
				for j < len(line) && !strings.ContainsRune(" \t\r=;{}", rune(line[j])) {
					j++
				}
				if j-i > maxToken {
					return nil, &Error{file, pos.Line, pos.Col, fmt.Sprintf("word of %d bytes, at most %d", j-i, maxToken)}
				}
				toks = append(toks, token{s: line[i:j], Pos: pos})
				i = j
			}
		}
	}
	return toks, nil
}

type parser struct {
	// dnssdDomain is the last DNS-SD domain read (DNSSD_domain or a
	// DNS-SD block's domain).
	dnssdDomain string
	file        string
	toks        []token
	i           int
	cfg         *Config
}

func (p *parser) errAt(pos Pos, format string, args ...any) error {
	return &Error{p.file, pos.Line, pos.Col, fmt.Sprintf(format, args...)}
}

func (p *parser) next() (token, bool) {
	if p.i >= len(p.toks) {
		return token{}, false
	}
	t := p.toks[p.i]
	p.i++
	return t, true
}

func (p *parser) peekOpen() bool {
	return p.i < len(p.toks) && p.toks[p.i].s == "{" && !p.toks[p.i].quoted
}

func (p *parser) lastPos() Pos {
	if len(p.toks) == 0 {
		return Pos{1, 1}
	}
	t := p.toks[len(p.toks)-1]
	return Pos{t.Line, t.Col + len(t.s)}
}

// file_ reads sflow { ... } blocks until the end.
func (p *parser) file_() error {
	for {
		t, ok := p.next()
		if !ok {
			return nil
		}
		if t.quoted || !strings.EqualFold(t.s, "sflow") {
			return p.errAt(t.Pos, "expected \"sflow {\" at the top level, found %q", t.s)
		}
		if !p.peekOpen() {
			return p.errAt(t.Pos, "expected '{' after sflow")
		}
		p.i++
		if err := p.block("sflow", 1, t.Pos, p.sflowItem); err != nil {
			return err
		}
	}
}

// block reads items up to the matching '}' with item.
func (p *parser) block(name string, depth int, open Pos, item func(key token, depth int) error) error {
	if depth > maxDepth {
		return p.errAt(open, "blocks nested more than %d deep", maxDepth)
	}
	for {
		t, ok := p.next()
		if !ok {
			return p.errAt(p.lastPos(), "end of file inside the %s block opened at line %d (missing '}')", name, open.Line)
		}
		if !t.quoted && t.s == "}" {
			return nil
		}
		if !t.quoted && t.s == "{" {
			return p.errAt(t.Pos, "unexpected '{' (a block needs a name)")
		}
		if err := item(t, depth); err != nil {
			return err
		}
	}
}

// value reads the value of setting key.
func (p *parser) value(key token) (token, error) {
	t, ok := p.next()
	if !ok || (!t.quoted && (t.s == "{" || t.s == "}")) {
		pos := p.lastPos()
		if ok {
			pos = t.Pos
		}
		return token{}, p.errAt(pos, "setting %s has no value", key.s)
	}
	return t, nil
}

// skipBlock reads and discards a block's contents (a block sflowswitchd
// ignores as a whole).
func (p *parser) skipBlock(name string, depth int, open Pos) error {
	return p.block(name, depth, open, func(key token, d int) error {
		if p.peekOpen() {
			o := p.toks[p.i].Pos
			p.i++
			return p.skipBlock(key.s, d+1, o)
		}
		_, err := p.value(key)
		return err
	})
}

func (p *parser) ignore(key token, reason string) {
	p.cfg.Ignored = append(p.cfg.Ignored, Ignored{Setting: key.s, Reason: reason, Pos: key.Pos})
}

// Reasons for the settings sflowswitchd does not take.
const (
	whyOtherSampler = "another packet-sampling source; sflowswitchd samples every port with XDP/TC instead (psample { } for a switch ASIC's samples)"
	whyHost         = "host, VM or container monitoring, not a switch agent's job; sflowswitchd reports the switch's ports and host counters instead"
	whyNoPlatform   = "a switch platform integration; sflowswitchd reads ports, counters and forwarding from the Linux kernel instead (psample { } and dent { } for an ASIC)"
	whyDeprecated   = "deprecated in hsflowd; nothing replaces it"
	whyNotHere      = "no equivalent in sflowswitchd; the setting has no effect"
)

// ignoredBlocks are hsflowd's modules that do not apply, with the reason.
var ignoredBlocks = map[string]string{
	"kvm":        whyHost,
	"xen":        whyHost,
	"docker":     whyHost,
	"containerd": whyHost,
	"k8s":        whyHost,
	"nvml":       whyHost,
	"systemd":    whyHost,
	"dbus":       whyHost,
	"ulog":       whyOtherSampler,
	"nflog":      whyOtherSampler,
	"tcp":        "TCP round-trip annotations of packet samples are not supported; samples are sent without them",
	"cumulus":    whyNoPlatform,
	"ovs":        whyNoPlatform,
	"os10":       whyNoPlatform,
	"opx":        whyNoPlatform,
	"sonic":      whyNoPlatform,
	"eapi":       whyNoPlatform,
	"vpp":        whyNoPlatform,
	"nlroute":    "route and link notifications are not supported; the kernel's FIB and FDB are read for each sample's forwarding records instead",
}

// ignoredSettings are sflow-level settings that do not apply.
var ignoredSettings = map[string]string{
	"modules":            "no module loading; the features are built in and switched on by their settings",
	"loopback":           whyDeprecated,
	"refreshadaptors":    "no periodic rescan; ports are followed through netlink as they change",
	"checkadaptors":      "no periodic rescan; ports are followed through netlink as they change",
	"refreshvms":         whyHost,
	"forgetvms":          whyHost,
	"subagentid":         "sub_agent_id is one per CPU (and per application), chosen by the agent",
	"uuid":               "the host UUID is not sent; the agent address identifies the switch",
	"xen.update.dominfo": whyHost,
	"xen.dsk":            whyHost,
	"uloggroup":          whyOtherSampler,
	"nfloggroup":         whyOtherSampler,
	"ulogprobability":    whyOtherSampler,
	"nflogprobability":   whyOtherSampler,
	"jsonfifo":           "the JSON API is a loopback UDP socket only (json { udpport })",
	"samplingdirection":  whyDeprecated + " (ignored by hsflowd too)",
}

// sflowItem reads one item of the sflow block.
func (p *parser) sflowItem(key token, depth int) error {
	k := strings.ToLower(key.s)
	if p.peekOpen() {
		open := p.toks[p.i].Pos
		p.i++
		switch k {
		case "collector":
			return p.collector(key, depth+1, open)
		case "pcap", "epcap":
			return p.pcap(key, depth+1, open)
		case "json":
			return p.json(key, depth+1, open)
		case "dropmon":
			return p.dropmon(key, depth+1, open)
		case "dns-sd":
			return p.dnssdBlock(key, depth+1, open)
		case "psample":
			return p.psampleBlock(key, depth+1, open)
		case "dent":
			return p.dentBlock(key, depth+1, open)
		}
		if why, ok := ignoredBlocks[k]; ok {
			p.ignore(key, why)
			return p.skipBlock(key.s, depth+1, open)
		}
		return p.errAt(key.Pos, "unknown block %q in sflow { } (not an hsflowd module)", key.s)
	}
	v, err := p.value(key)
	if err != nil {
		return err
	}
	c := p.cfg
	switch k {
	case "sampling", "packetsamplingrate":
		c.Sampling, err = p.uint(key, v, 0, 10_000_000)
	case "polling", "counterpollinginterval":
		c.Polling, err = p.uint(key, v, 0, 300)
	case "headerbytes":
		c.HeaderBytes, err = p.uint(key, v, 0, 256)
	case "datagrambytes":
		c.DatagramBytes, err = p.uint(key, v, 200, 8192)
	case "agent":
		c.AgentDevice = v.s
	case "agentip":
		if _, perr := netip.ParseAddr(v.s); perr != nil {
			return p.errAt(v.Pos, "agentIP %q is not an IP address", v.s)
		}
		c.AgentIP = v.s
	case "agent.cidr":
		s, not := strings.CutPrefix(v.s, "!")
		pfx, perr := netip.ParsePrefix(s)
		if perr != nil {
			return p.errAt(v.Pos, "agent.cidr %q is not an IP prefix (e.g. 198.18.0.0/15 or !10.0.0.0/8)", v.s)
		}
		c.AgentCIDRs = append(c.AgentCIDRs, CIDR{Prefix: pfx.Masked(), Not: not, Pos: v.Pos})
	case "dnssd":
		err = p.dnssdOnOff(key, v)
	case "dnssd_domain":
		// hsflowd keeps the domain whether or not DNS-SD is on.
		p.dnssdDomain = v.s
	case "jsonport":
		var u *Uint
		if u, err = p.uint(key, v, 1025, 65535); err == nil {
			c.JSONPort = u
		}
	default:
		if why, ok := ignoredSettings[k]; ok {
			p.ignore(key, why)
			return nil
		}
		if rest, ok := cutPrefixFold(key.s, "sampling."); ok {
			return p.samplingDot(key, rest, v)
		}
		if _, ok := cutPrefixFold(key.s, "polling."); ok {
			if _, err := p.uint(key, v, 0, 300); err != nil {
				return err
			}
			p.ignore(key, "applications report their counters when they choose (JSON API)")
			return nil
		}
		return p.errAt(key.Pos, "unknown setting %q in sflow { }", key.s)
	}
	return err
}

// samplingDot reads sampling.<speed>, sampling.bps_ratio and
// sampling.<application>.
func (p *parser) samplingDot(key token, rest string, v token) error {
	n, err := p.uint(key, v, 0, 10_000_000)
	if err != nil {
		return err
	}
	if strings.EqualFold(rest, "bps_ratio") {
		p.cfg.SamplingBpsRatio = n
		return nil
	}
	if bps, ok := ParseSpeed(rest); ok {
		p.cfg.SamplingSpeed[bps] = *n
		return nil
	}
	p.ignore(key, "application sampling is the application's own sampling_rate (JSON API)")
	return nil
}

// ParseSpeed reads a link speed as hsflowd prints them: digits with an
// optional K, M, G or T suffix, in bit/s ("10G" is 10e9).
func ParseSpeed(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	s, mult := cutMultiplier(s, "KMGT")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > (1<<63)/mult {
		return 0, false
	}
	return n * mult, true
}

// PrintSpeed prints a link speed in bit/s as hsflowd does to look up
// sampling.<speed> (src/Linux/util.c printSpeed): the digits, of which
// the last 12, 9, 6 or 3 are replaced by T, G, M or K when there are more
// than that many, truncating ("2500000000" is "2G", 1e12 is "1T").
func PrintSpeed(bps uint64) string {
	d := strconv.FormatUint(bps, 10)
	for _, u := range []struct {
		chop   int
		suffix string
	}{{12, "T"}, {9, "G"}, {6, "M"}, {3, "K"}} {
		if len(d) > u.chop {
			return d[:len(d)-u.chop] + u.suffix
		}
	}
	return d
}

// cutMultiplier removes a trailing decimal multiplier letter (either
// case) of those in allowed ("KMGT": 1e3, 1e6, 1e9, 1e12) and returns the
// rest with the multiplier (1 without a suffix).
func cutMultiplier(s, allowed string) (string, uint64) {
	if s == "" {
		return s, 1
	}
	c := s[len(s)-1]
	if c >= 'a' && c <= 'z' {
		c -= 'a' - 'A'
	}
	if strings.IndexByte(allowed, c) < 0 {
		return s, 1
	}
	var mult uint64
	switch c {
	case 'K':
		mult = 1e3
	case 'M':
		mult = 1e6
	case 'G':
		mult = 1e9
	case 'T':
		mult = 1e12
	default:
		return s, 1
	}
	return s[:len(s)-1], mult
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// uint reads an integer as hsflowd's expectInteger32: decimal digits with
// an optional K, M or G multiplier, within [lo, hi].
func (p *parser) uint(key, v token, lo, hi uint64) (*Uint, error) {
	s, mult := cutMultiplier(v.s, "KMG")
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return nil, p.errAt(v.Pos, "%s: %q is not a whole number", key.s, v.s)
	}
	if n*mult < lo || n*mult > hi {
		return nil, p.errAt(v.Pos, "%s: %d outside %d..%d", key.s, n*mult, lo, hi)
	}
	return &Uint{V: n * mult, Pos: v.Pos}, nil
}

func (p *parser) collector(key token, depth int, open Pos) error {
	col := Collector{UDPPort: defaultCollectorPort, Pos: key.Pos}
	err := p.block("collector", depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in collector { }", k.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "ip":
			col.IP = v.s
		case "udpport":
			u, err := p.uint(k, v, 1, 65535)
			if err != nil {
				return err
			}
			col.UDPPort = uint16(u.V)
		case "dev", "namespace":
			p.ignore(k, "collectors are reached through the routing table of the daemon's namespace (no VRF device or namespace per collector)")
		default:
			return p.errAt(k.Pos, "unknown setting %q in collector { }", k.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if col.IP == "" {
		return p.errAt(key.Pos, "collector { } without ip")
	}
	p.cfg.Collectors = append(p.cfg.Collectors, col)
	return nil
}

func (p *parser) pcap(key token, depth int, open Pos) error {
	pc := Pcap{Pos: key.Pos}
	err := p.block(key.s, depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in %s { }", k.s, key.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "dev":
			pc.Dev = v.s
		case "sampling":
			if pc.Sampling, err = p.uint(k, v, 0, 10_000_000); err != nil {
				return err
			}
		case "dev.pattern":
			p.ignore(k, "port selection by regular expression is not supported; list ports (globs) with -ports")
		case "speed":
			p.ignore(k, "port selection by speed is not supported; every up port is sampled unless ports are listed")
		case "promisc", "vport", "dynamic":
			p.ignore(k, whyNotHere)
		default:
			return p.errAt(k.Pos, "unknown setting %q in %s { }", k.s, key.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if pc.Dev == "" {
		p.ignore(key, "a pcap block without dev selects no port here; it has no effect")
		return nil
	}
	p.cfg.Pcaps = append(p.cfg.Pcaps, pc)
	return nil
}

func (p *parser) json(key token, depth int, open Pos) error {
	port := &Uint{V: defaultJSONPort, Pos: key.Pos}
	err := p.block("json", depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in json { }", k.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "udpport", "jsonport":
			if port, err = p.uint(k, v, 0, 65535); err != nil {
				return err
			}
		case "fifo", "jsonfifo":
			p.ignore(k, "the JSON API is a loopback UDP socket only")
		default:
			return p.errAt(k.Pos, "unknown setting %q in json { }", k.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.cfg.JSONPort = port
	return nil
}

func (p *parser) dropmon(key token, depth int, open Pos) error {
	limit := &Uint{V: defaultDropmonLimit, Pos: key.Pos}
	err := p.block("dropmon", depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in dropmon { }", k.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch kk := strings.ToLower(k.s); kk {
		case "limit":
			if limit, err = p.uint(k, v, 1, 10000); err != nil {
				return err
			}
		case "start", "force", "sw", "hw", "rn", "hw_unknown", "hw_function", "sw_passive", "hw_passive":
			if !strings.EqualFold(v.s, "on") && !strings.EqualFold(v.s, "off") {
				return p.errAt(v.Pos, "%s: expected on or off, found %q", k.s, v.s)
			}
			p.ignore(k, "drop sources are the kernel's drop tracepoint (skb:kfree_skb), always on with drops; no drop_monitor hardware or software switch")
		case "group":
			p.ignore(k, whyDeprecated+" (dropmon group)")
		case "hide":
			p.ignore(k, "every drop reason is reported; none is hidden")
		case "max", "max_trip":
			p.ignore(k, "the notifications are bounded by limit alone (the rest counted in each sample's drops field)")
		default:
			return p.errAt(k.Pos, "unknown setting %q in dropmon { }", k.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.cfg.DropmonLimit = limit
	return nil
}
