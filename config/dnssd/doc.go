// Package dnssd is configuration by DNS Service Discovery, as hsflowd's
// DNS-SD module does it (src/Linux/mod_dnssd.c, hsflowconfig.c
// dynamic_config_line): the SRV records of _sflow._udp<domain> name the
// collectors, its TXT records ("key=value") carry the settings. The
// package asks the DNS (Resolver.Query, with github.com/miekg/dns),
// reads the TXT settings (ParseTXT), lays them over the settings of the
// files and flags (Apply), and times the queries (Run, Timing): first at
// a random time within 30 s of the start, then at the smallest TTL of
// the answer, never more often than every 10 s, every 300 s without a
// TTL. The daemon installs each answer through its reload path
// (docs/guides/fleet.md).
package dnssd
