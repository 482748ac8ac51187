// Package baselines holds the benchmark baselines `make bench` compares
// sflowswitchd with (bench/README.md, "Forwarding next to the other techniques"): small
// programs that sample a port the way other agents do, each sending the
// same sFlow datagrams through bench/baselines/internal/emit.
//
//   - pcapsample: a packet socket with a classic BPF random 1-in-N filter
//     and a memory-mapped receive ring (libpcap-based agents, the host
//     agent's pcap module);
//   - tcsample: a TCX eBPF program with a per-packet random modulo test
//     and a ring buffer (the host agent's eBPF module).
//
// The tests here run each on a lab port and check that it samples
// correctly.
package baselines
