package config

import (
	"fmt"
	"regexp"

	"github.com/sflowswitchd/sflowswitchd/config/hsflowdconf"
)

// DefaultDentSwitchPort is hsflowd's mod_dent switch-port pattern
// (HSP_DEFAULT_SWITCHPORT_REGEX).
const DefaultDentSwitchPort = `^swp[0-9s]+$`

// validatePlatform checks the switch-platform settings: listen-only
// psample by group and the DENT rules.
func (s *Settings) validatePlatform() []error {
	var errs []error
	byGroup := s.PsampleIngressGroup != 0 || s.PsampleEgressGroup != 0
	if byGroup && s.PsampleGroup != 0 {
		errs = append(errs, fmt.Errorf("psample_group %d with psample_ingress_group/psample_egress_group: choose one listen-only mode", s.PsampleGroup))
	}
	if byGroup && s.PsampleIngressGroup == s.PsampleEgressGroup {
		errs = append(errs, fmt.Errorf("psample_ingress_group and psample_egress_group are both %d: a group has one direction", s.PsampleIngressGroup))
	}
	if s.Dent {
		if !byGroup {
			errs = append(errs, fmt.Errorf("dent needs the psample groups its rules send to (psample_ingress_group, psample_egress_group; hsflowd.conf psample { group })"))
		}
		if s.DentSwitchPort == "" {
			errs = append(errs, fmt.Errorf("dent_switchport is empty (hsflowd's default is %q)", DefaultDentSwitchPort))
		}
	}
	if s.DentSwitchPort != "" {
		if _, err := regexp.Compile(s.DentSwitchPort); err != nil {
			errs = append(errs, fmt.Errorf("dent_switchport %q: %w", s.DentSwitchPort, err))
		}
	}
	return errs
}

// SwitchPort reports whether port name is one of DENT's switch ports
// (always true when dent is off).
func (s *Settings) SwitchPort(name string) bool { return s.SwitchPorts()(name) }

// SwitchPorts returns SwitchPort with the pattern compiled once.
func (s *Settings) SwitchPorts() func(name string) bool {
	if !s.Dent {
		return func(string) bool { return true }
	}
	re, err := regexp.Compile(s.DentSwitchPort)
	if err != nil { // refused by Validate
		return func(string) bool { return false }
	}
	return re.MatchString
}

// applyPlatform maps hsflowd.conf's psample { } and dent { } onto s.
// psample { group=G ingress egress } reads G as the ingress group and G+1
// as the egress group (mod_psample.c), the ports sampled in the
// directions that are on. dent { } without a psample block uses
// hsflowd's psample defaults (group 1, ingress), which mod_dent's rules
// then send to.
func applyPlatform(c *hsflowdconf.Config, s *Settings) {
	ps := c.Psample
	if ps == nil && c.Dent != nil {
		ps = &hsflowdconf.Psample{Group: 1, Ingress: true}
	}
	if ps != nil {
		s.PsampleIngressGroup, s.PsampleEgressGroup = 0, 0
		if ps.Ingress {
			s.PsampleIngressGroup = ps.Group
		}
		if ps.Egress {
			s.PsampleEgressGroup = ps.Group + 1
		}
		switch {
		case ps.Ingress && ps.Egress:
			s.Direction = "both"
		case ps.Egress:
			s.Direction = "egress"
		default:
			s.Direction = "ingress"
		}
	}
	if d := c.Dent; d != nil {
		s.Dent, s.DentSW, s.DentSwitchPort = true, d.SW, d.SwitchPort
		if s.DentSwitchPort == "" {
			s.DentSwitchPort = DefaultDentSwitchPort
		}
	}
}

// dentGroups gives dent without psample groups hsflowd's psample
// defaults (group 1, ingress), as hsflowd.conf's dent { } alone has.
func dentGroups(s *Settings) {
	if s.Dent && s.PsampleIngressGroup == 0 && s.PsampleEgressGroup == 0 && s.PsampleGroup == 0 {
		s.PsampleIngressGroup = 1
	}
}
