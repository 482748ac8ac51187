package hsflowdconf

import "strings"

// DNSSD is hsflowd's DNS-SD module switched on: "DNS-SD { domain =
// .example.net }" (or the older sflow-level "DNSSD = on" and
// "DNSSD_domain = .example.net"; hsflowconfig.c HSPTOKEN_DNS_SD,
// HSPTOKEN_DNSSD, HSPTOKEN_DNSSD_DOMAIN).
type DNSSD struct {
	// Domain is appended to _sflow._udp as written (hsflowd's
	// convention: with a leading dot); "" = the resolver's search list.
	Domain string
	Pos
}

// dnssdBlock reads a DNS-SD { domain } block: it switches DNS-SD on.
func (p *parser) dnssdBlock(key token, depth int, open Pos) error {
	if p.cfg.DNSSD == nil {
		p.cfg.DNSSD = &DNSSD{Pos: key.Pos}
	}
	return p.block(key.s, depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in %s { }", k.s, key.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "domain", "dnssd_domain":
			p.dnssdDomain = v.s
		default:
			return p.errAt(k.Pos, "unknown setting %q in %s { } (domain is its only setting)", k.s, key.s)
		}
		return nil
	})
}

// dnssdOnOff reads DNSSD = on|off.
func (p *parser) dnssdOnOff(key, v token) error {
	switch strings.ToLower(v.s) {
	case "on":
		if p.cfg.DNSSD == nil {
			p.cfg.DNSSD = &DNSSD{Pos: key.Pos}
		}
	case "off":
		p.cfg.DNSSD = nil
	default:
		return p.errAt(v.Pos, "%s: expected on or off, found %q", key.s, v.s)
	}
	return nil
}
