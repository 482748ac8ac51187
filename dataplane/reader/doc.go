// Package reader is the user-space end of the samplers: a worker's Source
// reads the worker's BPF ring buffer in place (ring.go, the kernel's
// layout of kernel/bpf/ringbuf.c) and the AF_XDP sockets of the monitor
// ports it owns (Monitor: one socket per RX queue, each in the sampler's
// XSKMAP), waiting for both in one epoll set, and hands each kernel
// sample to the worker as a RawSample. The sampler loader (package
// dataplane) makes one Source per worker (dataplane.Dataplane.Source),
// opens a monitor port's sockets when SetPort puts it in monitor mode, and
// registers them with the Source (MonitorPorts).
package reader
