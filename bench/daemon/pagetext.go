package main

// The fixed text of the results page (page.go): how the page is made and
// how each benchmark measures. None of it states a measured figure; the
// figures come from the results directory.

const pageIntro = `# Benchmarks: results

<!-- Written by bench/daemon page from one results directory; do not edit by hand. -->

What sflowswitchd costs, measured. Every figure on this page is from one
run of ` + "`make bench`" + `, given below with its command, machine and date, and
none is typed by hand: ` + "`bench/run.sh`" + ` (which ` + "`make bench`" + ` runs as root)
writes every raw table and plot into a results directory
` + "`bench/results/<UTC time>/`" + `, and at its end writes this page from that
directory alone with

    go -C bench run ./daemon page -figures figures ../bench/results/<UTC time> > bench/README.md

(the program is bench/daemon/page.go, its fixed text pagetext.go; it
copies the plots into [figures/](figures/)). When the benchmarks are run
again, the page is rewritten from the new run. Earlier runs stay in git
(` + "`git log -p -- bench/README.md`" + `). Two results directories are compared
figure by figure with ` + "`go -C bench run ./daemon agree RUN_A RUN_B`" + `.

`

// pageSections are the benchmarks' sections, in page order.
var pageSections = []pageSection{
	{
		title: "Samples per second end to end", file: "e2e.txt", part: "e2e", kind: "markdown",
		method: `
    bench/e2e.sh -sampling 1,10,100,1000     # = bench/daemon e2e -bin BIN -rounds 3 ...

The real daemon binary samples port p1 of a namespace lab (h1 → p1 →
bridge → p2 → h2, over veth): ` + "`sflowswitchd -ports p1 -sampling N -hook tc|xdp -drops off -polling 0`" + `,
the default 4 MiB ring, 128-byte headers; it sends to a counting
collector in its own namespace over veth. The frames come from
**bench/gen**, a generator at kernel speed (an XDP program of its own run
by BPF_PROG_RUN in live-frames mode, redirecting each frame out of h1's
veth, so that p1 receives it through its NAPI poll like a frame from a
NIC): 12-length IMIX, 1000 flows, as fast as its thread can, counted
exactly. Per round each hook and rate once (order rotated), 2 s warm-up, a
5 s window; then the generator stops, the daemon drains, and the trial's
accounting is checked exactly:

- generator sent = p1's rx_packets = the last sample_pool;
- kernel samples = ring drops + read by the agent;
- read = encoded + sub-sampled away (+ agent drops);
- encoded − send errors = delivered + collector socket drops.

Loss = 1 − delivered / (kernel samples − sub-sampled away). When N is not a
power of two the kernel samples at the power of two below it and the
agent keeps the right share of those: the sub-sampling that makes the rate
exact. Nothing is lost silently: a sample that does not fit the ring while
the worker is behind is counted in the port's
` + "`sflowswitchd_port_kernel_drops_total`" + ` and in the next flow sample's
` + "`drops`" + ` field; a larger ` + "`ring_bytes`" + ` or a quota
([backoff](../docs/guides/configure.md#backoff)) is the remedy when
1-in-1 on a busy port matters. The generator's thread carries the receive
path's softirq work (p1's NAPI poll, the sampler, the bridge, p2 and h2),
so its CPU is near 100 % whenever it runs as fast as it can.
`,
		plots: []plotRef{
			{"e2e/e2e-samples.png", "e2e-samples.png", "samples/s delivered end to end by sampling rate and hook"},
			{"e2e/e2e-cpu.png", "e2e-cpu.png", "the daemon's CPU per sample delivered by sampling rate and hook"},
			{"e2e/e2e-loss.png", "e2e-loss.png", "samples lost over the trial by sampling rate and hook"},
		},
	},
	{
		title: "Forwarding next to the other techniques", file: "compare.txt", part: "compare", kind: "markdown",
		method: `
    bench/compare.sh -traffic gen     # = bench/daemon compare ...; writes compare/results.json and the plots

Forwarding rate, kernel ns per packet, the sampling process's CPU per
million forwarded packets, samples/s and losses of sflowswitchd (its
default hook, TC on a veth port, and -hook xdp) against a packet socket
with a classic BPF random filter and a TCX program with a ring buffer (the
host agent hsflowd's two techniques, rebuilt in bench/baselines), at
1-in-1 to 1-in-1000, alternating within each round, on bench/gen's
frames; then each technique's CPU with no traffic, and the sample_pool's
accuracy on exactly counted traffic.
`,
		plots: []plotRef{
			{"compare/forwarding.png", "compare-forwarding.png", "forwarding rate / no program by sampling rate and technique"},
			{"compare/samples.png", "compare-samples.png", "samples/s at the collector by sampling rate and technique"},
			{"compare/loss.png", "compare-loss.png", "fraction of samples lost by sampling rate and technique"},
			{"compare/cpu.png", "compare-cpu.png", "CPU per million forwarded packets by sampling rate and technique"},
			{"compare/nspkt.png", "compare-nspkt.png", "kernel ns per packet by sampling rate and technique"},
		},
	},
	{
		title: "Per-packet cost", file: "xdp.txt", part: "xdp", kind: "markdown",
		method: `
    bench/xdp.sh -rounds 9 -rate-rounds 2 -parts frames,testrun,delivery,tc,profile -profile-trial 5s

The sampler's unsampled and sampled paths against a do-nothing XDP and TC
program, XDP against TC, TCX links against clsact filters: from the
kernel's BPF run-time statistics on real frames (frames), in
BPF_PROG_TEST_RUN (testrun), samples/s into user space through the ring
buffer and AF_XDP (delivery), and from ` + "`perf record`" + ` samples with the
statistics off (profile).
`,
	},
	{
		title: "The daemon: CPU and memory, samples/s in process, encoding, idle", file: "daemon.txt", part: "daemon", kind: "columns",
		method: `
    bench/daemon.sh     # DAEMON_BENCH_ROUNDS, DAEMON_BENCH_WINDOW

1. **cpu:** the whole daemon's CPU (utime+stime) and RSS while a 4-port
   lab forwards at trafgen's maximum rate, at 1-in-1000 and 1-in-10.
2. **live:** samples/s end to end in process (XDP ring → workers → UDP →
   collector) on BPF_PROG_RUN live frames at 1-in-1, for
   max_datagram_size 1400 and 9000, with a CPU profile of the workers.
3. **encode:** the workers alone, fed samples from memory: CPU per flow
   sample.
4. **idle:** the daemon sampling four ports without traffic: CPU and
   context switches per second (idle means asleep).
`,
	},
	{
		title: "Dropped-packet notifications", file: "drops.txt", part: "drops", kind: "gobench", skip: []string{"ns/op"},
		method: `
    bench/drops.sh      # BenchmarkDropsForwarding, BenchmarkDropsFlood of bench/drops

The bridge's forwarding rate with the drop program attached (nothing
dropped in the switch's namespace) against without it, alternating 1 s
windows; and the real daemon under a flood of drops: drops/s, ns per
drop, the daemon's CPU with notifications on and off.
`,
	},
	{
		title: "Ring size", file: "ring.txt", part: "ring", kind: "gobench", skip: []string{"ns/op"},
		method: `
    bench/ring.sh       # BenchmarkRingBurst of test/e2e; RING_BENCH_ROUNDS, RING_BENCH_BURSTS

Samples lost by 20 000-frame bursts at 1-in-1 per ring size (1, 2, 4,
8 MiB), on the machine as it is (idle) and beside ` + "`stress-ng --cpu 1`" + `
(stress): what the default ` + "`ring_bytes`" + ` (4 MiB) rests on.
`,
	},
	{
		title: "Scale to 1000 ports", file: "scale.txt", part: "scale", kind: "gobench", skip: []string{"ns/op"},
		method: `
    bench/scale.sh      # BenchmarkScale of test/e2e

Start-up with 1000 sampled ports, RSS, a full GETBULK walk of the
SFLOW-MIB through a real snmpd, the XDP program's per-frame cost with 1
and 1000 ports configured.
`,
	},
	{
		title: "Egress sampling, extended_router and transit", file: "egress.txt", part: "egress", kind: "markdown",
		method: `
    bench/egress.sh main     # ROUNDS, N

The samplers' per-packet cost (kernel ns per run in BPF_PROG_TEST_RUN)
with egress sampling, the route lookups of extended_router, tunnel records
and transit built in, the working tree against a base revision, the two
test binaries alternating every round. The tunnel rows compare
BenchmarkTCSamplerRate1 on a plain port with the same port configured as
a VXLAN device.
`,
	},
	{
		title: "Go micro-benchmarks", file: "go.txt", part: "go", kind: "gobench",
		method: `
    go test -run '^$' -bench . -benchmem -count 6 -benchtime 100ms ./sflow/ ./agent/... ./apps/... ./dataplane/ ...

Encoding, decoding and the agent's per-sample work in user space, the
dataplane's BPF_PROG_TEST_RUN benchmarks, reading a link's and the host's
counters, AgentX PDUs and bench/gen's frames/s; medians over the runs (compare two runs' go.txt with
` + "`benchstat`" + `).
`,
	},
}

const pageElsewhere = `## Not in make bench

These need another kernel or a long run, and are not part of
` + "`make bench`" + `; their runs are in the [CHANGELOG](../CHANGELOG.md) or in git
with the commits that made them.

- **The psample path:** ` + "`SFPS_BENCH_PATHS=psample,psample-netlink,xdp,tc go test -run '^$' -bench BenchmarkPathCPU -benchtime 1x ./source`" + `:
  the agent's CPU per sample and the kernel's per frame, psample against
  XDP and TC (needs ` + "`psample`" + ` and ` + "`act_sample`" + `: the Debian VMs);
  ` + "`psample`" + ` reads through the tap where it attaches (the default intake),
  ` + "`psample-netlink`" + ` through the netlink socket. Its dated runs are in the
  [CHANGELOG](../CHANGELOG.md), "the psample path's CPU per sample": in the
  Debian 12 VM the tap is at 1.3–1.6 times the ring paths' CPU per sample,
  netlink at 2.1–2.3.
- **act_sample's sampled fraction:** BenchmarkActSampleFraction of
  dataplane/psample in the Debian 12 VM (` + "`make vagrant-test RELEASES=bookworm TEST_PKGS=./dataplane/psample/ ...`" + `).
- **Upgrade in place:** ` + "`go test -c -o /tmp/e2e.test ./test/e2e && cd test/e2e && /tmp/e2e.test -test.run 'TestHitlessUpgrade$' -test.v`" + `:
  the handover of an upgrade by SIGUSR2, from the old program's last
  sample to the new one's first.
- **A drop program against an earlier one:** BenchmarkDropCost of
  bench/drops (` + "`DROPS_A=OLD.o`" + `).
`
