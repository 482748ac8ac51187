// Package bpf holds the packet samplers (sampler.c at XDP, tc_sampler.c at
// TC ingress, their shared paths in sampler.h), the dropped-packet program
// (drops.c) and their generated Go bindings, among them the Go types of
// the records user space reads (SamplerSampleMeta, DropsDropEvent). The
// objects and bindings are committed so that `go build` needs no clang;
// `go generate ./dataplane/bpf/` (or `make generate`) rebuilds them.
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type port_config -type port_counters -type sample_meta Sampler sampler.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel TcSampler tc_sampler.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel TcEgress tc_egress.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type drop_config -type drop_stats -type drop_event Drops drops.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel FibGen fibgen.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -target bpfel -type transit_stats Transit transit.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type tap_sample -type tap_stats PsampleTap psample_tap.c
