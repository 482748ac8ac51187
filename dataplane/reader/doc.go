// Package reader is the user-space end of the samplers: a worker's Source
// reads the worker's BPF ring buffer in place (ring.go, the kernel's
// layout of kernel/bpf/ringbuf.c) and the AF_XDP sockets of the monitor
// ports it owns, waiting for both in one epoll set, and hands each kernel
// sample to the worker as a RawSample. The sampler loader (package
// dataplane) makes one Source per worker (dataplane.Dataplane.Source) and
// registers the monitor ports' sockets with it (MonitorPorts).
package reader
