package config

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// dnssdCollectors replaces the collectors of the files and flags by
// none when DNS-SD is on: DNS-SD names the collectors (hsflowd too
// starts a DNS-SD agent with no collector and ignores the file's).
// Their datagram size (hsflowd.conf's datagramBytes) stays, for the
// collectors DNS-SD names. Collectors that were given are noted once.
func dnssdCollectors(s *Settings, notes io.Writer) {
	size := 0
	var given []string
	for _, c := range s.Collectors {
		if c.Address != NoCollector {
			given = append(given, c.Address)
		}
		if c.MaxDatagramSize != 0 && size == 0 {
			size = c.MaxDatagramSize
		}
	}
	if len(given) > 0 && notes != nil {
		key := "dns-sd collectors:" + strings.Join(given, ",")
		if _, dup := reportedIgnored.LoadOrStore(key, true); !dup {
			fmt.Fprintf(notes, "sflowswitchd: collectors %s not used: with DNS-SD on, the collectors are the SRV records of _sflow._udp%s\n",
				strings.Join(given, ", "), s.DNSSDDomain)
		}
	}
	s.Collectors = []Collector{{Address: NoCollector, MaxDatagramSize: size}}
}

// validateDNSSD checks the DNS-SD settings (the domain's syntax is the
// daemon's Validate's, with the resolver's).
func (s *Settings) validateDNSSD() []error {
	var errs []error
	if s.DNSSDStartDelay < 0 || s.DNSSDStartDelay > 3600 {
		errs = append(errs, fmt.Errorf("dns_sd_start_delay %d outside 0..3600 seconds", s.DNSSDStartDelay))
	}
	if s.DNSSD && !filepath.IsAbs(s.DNSSDResolvConf) {
		errs = append(errs, fmt.Errorf("dns_sd_resolv_conf %q must be an absolute path", s.DNSSDResolvConf))
	}
	if strings.ContainsAny(s.DNSSDDomain, " \t\n/\\") {
		errs = append(errs, fmt.Errorf("dns_sd_domain %q is not a domain name", s.DNSSDDomain))
	}
	return errs
}
