package config

import (
	"fmt"
	"path"
	"strings"
)

// SONiC mode's defaults: where SONiC describes its Redis databases
// (sonic-swss-common SonicDBConfig), how long hsflowd waits for
// SYSTEM_READY (mod_sonic.c, sonic { waitReady }), and where hsflowd
// writes its running configuration (hsflowd.h HSP_DEFAULT_OUTPUTFILE).
const (
	DefaultSonicDBConfig  = "/var/run/redis/sonic-db/database_config.json"
	DefaultSonicWaitReady = 180
	DefaultSonicAutoFile  = "/etc/hsflowd.auto"
	// MaxSonicWaitReady bounds sonic_wait_ready (an hour).
	MaxSonicWaitReady = 3600
)

// validateSonic checks SONiC mode's settings. SONiC mode takes the
// collectors, polling, agent and direction from Redis and reads psample
// groups 1 and 2, so a psample_group of its own or rules of the agent's
// (hook psample installs them) are refused with it.
func (s *Settings) validateSonic() []error {
	var errs []error
	if s.SonicWaitReady < 0 || s.SonicWaitReady > MaxSonicWaitReady {
		errs = append(errs, fmt.Errorf("sonic_wait_ready %d outside 0..%d s", s.SonicWaitReady, MaxSonicWaitReady))
	}
	if s.SonicDBConfig == "" || !path.IsAbs(s.SonicDBConfig) {
		errs = append(errs, fmt.Errorf("sonic_db_config %q: want an absolute path", s.SonicDBConfig))
	}
	if s.SonicAutoFile != "" && !path.IsAbs(s.SonicAutoFile) {
		errs = append(errs, fmt.Errorf("sonic_auto_file %q: want an absolute path or \"\"", s.SonicAutoFile))
	}
	if !s.Sonic {
		return errs
	}
	if s.PsampleGroup != 0 {
		errs = append(errs, fmt.Errorf("psample_group %d with sonic: SONiC mode reads psample groups 1 (ingress) and 2 (egress), which SONiC's orchagent fills", s.PsampleGroup))
	}
	if s.Hook != "auto" && s.Hook != "psample" {
		errs = append(errs, fmt.Errorf("hook %s with sonic: SONiC's ASIC samples, the agent reads psample (hook auto or psample)", s.Hook))
	}
	if s.DNSSD {
		errs = append(errs, fmt.Errorf("dns_sd with sonic: SONiC's collectors are in its Redis (CONFIG_DB SFLOW_COLLECTOR)"))
	}
	// The sflow container's hsflowd.conf says psample { group = 1
	// egress = on }: groups 1 and 2, what SONiC mode reads anyway.
	if (s.PsampleIngressGroup != 0 && s.PsampleIngressGroup != 1) || (s.PsampleEgressGroup != 0 && s.PsampleEgressGroup != 2) {
		errs = append(errs, fmt.Errorf("psample groups %d/%d with sonic: SONiC's orchagent fills groups 1 (ingress) and 2 (egress)", s.PsampleIngressGroup, s.PsampleEgressGroup))
	}
	if s.Dent {
		errs = append(errs, fmt.Errorf("dent with sonic: SONiC's orchagent programs the sampling, the agent installs no rule"))
	}
	if len(s.MonitorPorts) > 0 {
		errs = append(errs, fmt.Errorf("monitor_ports with sonic: SONiC's ports are the ASIC's"))
	}
	return errs
}

// validDevice tells whether name can be a Linux network device name
// (IFNAMSIZ: at most 15 bytes, no '/', no white space, not "." or "..").
func validDevice(name string) bool {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	return !strings.ContainsAny(name, "/ \t\n\r\v\f:")
}
