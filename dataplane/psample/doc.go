// Package psample is the third way the agent samples packets, beside the
// XDP and TC samplers: the kernel's PSAMPLE channel, through which switch
// ASICs (Spectrum/mlxsw, Prestera, Sparx5, SONiC's SAI platforms) and the
// software action act_sample deliver the packets they sampled.
//
// One file per object kind, as github.com/vishvananda/netlink does:
//
//   - attr.go: the PSAMPLE generic-netlink message (include/uapi/linux/
//     psample.h) parsed into a Sample without allocation;
//   - family.go: the "psample" generic-netlink family and its "packets"
//     multicast group, and the feature probes (psample, act_sample);
//   - conn.go: a socket joined to the packets group, read in batches
//     (recvmmsg) with a wake-up eventfd, overruns (ENOBUFS) counted; or,
//     where the kernel allows it, the tap;
//   - tap.go: the tap, an fentry program on psample_sample_packet
//     (dataplane/bpf/psample_tap.c) writing the samples into a BPF ring
//     buffer read in place, its losses counted per group;
//   - seq.go: PSAMPLE_ATTR_GROUP_SEQ gaps, the samples the kernel sent and
//     the socket lost;
//   - rule.go: the tc rule that makes the samples, matchall + sample on a
//     port's ingress or egress (tc_act/tc_sample.h), installed, changed in
//     place and removed through netlink, and the stale rules of a killed
//     daemon removed;
//   - stats.go: a port's 64-bit packet counters (RTM_GETSTATS), the pool
//     of the samples;
//   - offload.go: whether a port offloads tc (ethtool's hw-tc-offload).
//
// docs/ARCHITECTURE.md, "The psample path", says how the agent uses it.
package psample
