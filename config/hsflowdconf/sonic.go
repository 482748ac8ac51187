package hsflowdconf

import "strings"

// Sonic is hsflowd's sonic { } block (host-sflow mod_sonic.c; the sflow
// container's hsflowd.conf has one): its presence turns SONiC mode on.
type Sonic struct {
	// WaitReady is waitReady, seconds to wait for SYSTEM_READY; nil
	// when absent.
	WaitReady *Uint
	// UnixSock is unixsock (on by default): connect to Redis through its
	// unix socket rather than host and port.
	UnixSock bool
	Pos
}

// sonic reads the sonic { } block.
func (p *parser) sonic(key token, depth int, open Pos) error {
	s := &Sonic{UnixSock: true, Pos: key.Pos}
	err := p.block("sonic", depth, open, func(k token, d int) error {
		if p.peekOpen() {
			return p.errAt(k.Pos, "unexpected block %q in sonic { }", k.s)
		}
		v, err := p.value(k)
		if err != nil {
			return err
		}
		switch strings.ToLower(k.s) {
		case "waitready":
			if s.WaitReady, err = p.uint(k, v, 0, 3600); err != nil {
				return err
			}
		case "unixsock":
			switch strings.ToLower(v.s) {
			case "on", "yes", "true":
				s.UnixSock = true
			case "off", "no", "false":
				s.UnixSock = false
			default:
				return p.errAt(v.Pos, "unixsock: expected on or off, found %q", v.s)
			}
		case "setifalias", "setifname", "suppressother", "sflowctl":
			p.ignore(k, "SONiC mode numbers and names ports as SONiC does; the netdevs are left alone")
		default:
			return p.errAt(k.Pos, "unknown setting %q in sonic { }", k.s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.cfg.Sonic = s
	return nil
}
