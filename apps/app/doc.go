// Package app is sflowswitchd's application sub-agent: applications on
// the switch report sampled transactions and counters (through the local
// JSON API or the Go library apps/httpsflow), and the Engine encodes
// them as sFlow (spec/sflow_application.txt, spec/sflow_http.txt, with
// host_parent from spec/sflow_host.txt) and sends them to the collectors.
// Optionally the same transactions feed the RFC 3729 (APM-MIB) reports of
// an apm.Engine. README.md describes the JSON message format and the
// encoding rules.
package app
