// Package dataplane is the sampler loader: it loads the XDP sampler (and
// its TC twin), attaches it to the switch ports, sets each port's
// sampling through BPF maps, and hands the samples to the sample sources
// of package source. What a sample source needs of it is SetPort,
// RemovePort, Source, Stats and Pinned (source.Samplers).
//
// The jobs around it are packages of their own: the ports themselves
// (dataplane/ports), their interface counters (dataplane/linkstats),
// dropped-packet notifications (dataplane/drops), the pin directory
// (dataplane/pin), the kernel feature probes (dataplane/features), the
// clsact filters (dataplane/clsact), the samplers' counter arrays
// (dataplane/portstats), the user-space end of the rings and AF_XDP
// sockets (dataplane/reader), egress sampling (dataplane/egress) and the
// following of sampled frames (dataplane/transit). Of the loader's own
// roles, the ports' counters are read through Stats, the state pinned
// across processes through Pinned, a monitor port's XSKMAP keys through
// XSKMap and transit through Transit.
//
// # Sampling
//
// The XDP sampler (package bpf) is loaded once and attached to every
// sampled port, or its TC twin at TC ingress (Hook: on veth ports by
// default), through a TCX link where the kernel has TCX and otherwise as a
// cls_bpf filter on the port's clsact qdisc (package clsact, which also
// removes a killed run's filters at Open). Each port's sampling rate and
// delivery path are set at run time through BPF maps; sample_pool,
// samples and drops are counted per CPU in the kernel and summed without
// a syscall per read. Samples reach user space through one BPF ring
// buffer per worker (inline ports) or through AF_XDP sockets (monitor
// ports). See docs/ARCHITECTURE.md, "Packet sampling" and "Hooks".
//
// # Namespaces
//
// The daemon runs inside the switch's network namespace. Open takes the
// namespace of the calling thread and does its netlink and tc work there
// even when called later from another thread.
package dataplane
