package hsflowdconf

import (
	"regexp"
	"strings"
)

// Psample is hsflowd's psample { group ingress egress } (mod_psample.c,
// hsflowconfig.c HSPOBJ_PSAMPLE): read the samples of psample group Group
// as ingress samples and of Group+1 as egress samples, each direction
// when on. hsflowd's defaults: group 1, ingress on, egress off.
type Psample struct {
	Group           uint32
	Ingress, Egress bool
	Pos
}

// Dent is hsflowd's dent { sw switchport } (mod_dent.c): the agent puts
// a tc matchall + sample rule on every switch port (a name matching
// SwitchPort), sending to psample's groups; SW installs the rules in
// software too (no skip_sw).
type Dent struct {
	// SwitchPort is the switch ports' regular expression as written;
	// "" = hsflowd's default DefaultSwitchPort.
	SwitchPort string
	SW         bool
	Pos
}

// DefaultSwitchPort is mod_dent's HSP_DEFAULT_SWITCHPORT_REGEX.
const DefaultSwitchPort = `^swp[0-9s]+$`

// psampleBlock reads a psample { } block.
func (p *parser) psampleBlock(key token, depth int, open Pos) error {
	ps := &Psample{Group: 1, Ingress: true, Pos: key.Pos}
	err := p.block(key.s, depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in %s { }", k.s, key.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "group":
			// hsflowd: expectInteger32(..., 1, 32).
			u, err := p.uint(k, v, 1, 32)
			if err != nil {
				return err
			}
			ps.Group = uint32(u.V)
		case "ingress":
			return p.onOff(k, v, &ps.Ingress)
		case "egress":
			return p.onOff(k, v, &ps.Egress)
		default:
			return p.errAt(k.Pos, "unknown setting %q in %s { } (group, ingress, egress)", k.s, key.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !ps.Ingress && !ps.Egress {
		p.ignore(key, "both ingress and egress off: no psample group is read; ports are sampled with XDP/TC instead")
		return nil
	}
	p.cfg.Psample = ps
	return nil
}

// dentBlock reads a dent { } block.
func (p *parser) dentBlock(key token, depth int, open Pos) error {
	dt := &Dent{Pos: key.Pos}
	err := p.block(key.s, depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in %s { }", k.s, key.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "sw":
			return p.onOff(k, v, &dt.SW)
		case "switchport":
			if _, err := regexp.Compile(v.s); err != nil {
				return p.errAt(v.Pos, "switchport %q is not a regular expression: %v", v.s, err)
			}
			dt.SwitchPort = v.s
		default:
			return p.errAt(k.Pos, "unknown setting %q in %s { } (sw, switchport)", k.s, key.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.cfg.Dent = dt
	return nil
}

// onOff reads an on|off value into b.
func (p *parser) onOff(k, v token, b *bool) error {
	switch strings.ToLower(v.s) {
	case "on":
		*b = true
	case "off":
		*b = false
	default:
		return p.errAt(v.Pos, "%s: expected on or off, found %q", k.s, v.s)
	}
	return nil
}
