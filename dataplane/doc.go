// Package dataplane is sflowswitchd's view of the Linux kernel dataplane of
// a switch: it samples packets on the switch ports with an XDP program,
// discovers the ports and follows them as they come and go, and reads
// their interface counters.
//
// # Sampling
//
// The XDP sampler (package bpf) is loaded once and attached to every
// sampled port, or its TC twin at TC ingress (Hook: on veth ports by
// default), through a TCX link where the kernel has TCX and otherwise as a
// cls_bpf filter on the port's clsact qdisc (clsact.go, which also removes
// a killed run's filters at Open). Each port's sampling rate and delivery
// path are set at run time through BPF maps; sample_pool, samples and
// drops are counted per CPU in the kernel and summed without a syscall per
// read. Samples reach user space through one BPF ring buffer per worker
// (inline ports) or through AF_XDP sockets (monitor ports). See
// docs/ARCHITECTURE.md, "Packet sampling" and "Hooks".
//
// # Ports
//
// WatchPorts reports the links of a network namespace (PortAdded for every
// existing link, then PortAdded / PortChanged / PortRemoved) from netlink
// link notifications, and resynchronises by listing all links again when
// the notification socket fails, so no hot-plug is missed. ListPorts is a
// one-shot listing, and SelectPorts turns the configured port names or
// shell globs into a PortSelector.
//
// # Counters
//
// ReadLinkCounters (or a LinkCounterReader, for pollers) returns the 64-bit
// netlink link statistics, speed and duplex from ethtool, admin/oper
// status and promiscuity of one interface, for sFlow if_counters.
// ReadEthernetCounters returns the dot3 counters of sFlow
// ethernet_counters where the driver exposes them in its ethtool
// statistics. Counters Linux does not keep are UnknownCounter, the value
// sFlow v5 prescribes for an unavailable counter.
//
// # Namespaces
//
// The daemon runs inside the switch's network namespace. The port and
// counter functions take a netns.NsHandle so that tests can watch a lab
// namespace without moving the process; a handle <= 0 means the namespace
// of the calling thread.
package dataplane
