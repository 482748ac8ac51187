package e2e

import (
	"bytes"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// collectorPort is the first collector's UDP port (IANA sflow).
const collectorPort = 6343

// TestSampling runs the daemon at rates 1, 10, 100 and 1000 (only 1 a power
// of two) on p1,p2 and sends K distinct frames from host1 towards host2.
// Checked: the pool counts every frame p1 received (kernel rx_packets),
// the flow sample count plus the samples lost in the ring (the drops
// field) is binomial(K, 1/N) within 4 standard deviations (exactly K at
// N = 1), every sample is accounted for exactly (selected = delivered +
// ring drops, in the metrics and in the drops field), datagram and sample
// sequences are contiguous, each data source has one sub-agent, the
// sampled headers are the frames sent, and goflow2 and tshark read the
// same samples, rates and pools as our decoder.
//
// The burst at N = 1 (K frames in some 40–400 ms) may overflow a worker's
// ring on a loaded 2-core machine, where the worker shares a CPU with the
// sender and the collector: such losses are allowed, but each one must be
// counted (BenchmarkRingBurst measures how often they happen). The case
// "stalled" makes sure they are: the daemon is stopped (SIGSTOP) during
// the burst, as a worker kept off its CPU would be, with a 1 MiB ring
// that holds fewer samples than the burst.
func TestSampling(t *testing.T) {
	lab := newLab(t, 2)
	// The default hook samples these veth ports at TC ingress; the XDP
	// sampler runs the same cases at two rates (-hook xdp).
	for _, c := range []samplingParams{
		{n: 1, k: 20000, hook: "auto"},
		{n: 10, k: 20000, hook: "auto"},
		{n: 100, k: 200000, hook: "auto"},
		{n: 1000, k: 1000000, hook: "auto"},
		{n: 1, k: 20000, hook: "xdp"},
		{n: 100, k: 200000, hook: "xdp"},
		{n: 1, k: 20000, hook: "auto", ringBytes: 1 << 20, stalled: true},
	} {
		name := fmt.Sprintf("hook=%s/N=%d", c.hook, c.n)
		if c.stalled {
			name += "/stalled"
		}
		t.Run(name, func(t *testing.T) { samplingCase(t, lab, c) })
	}
}

// samplingParams is one case of TestSampling: rate n, k frames, the
// daemon's -hook, its -ring-bytes (0: the default) and whether the daemon
// is stopped while the frames are sent.
type samplingParams struct {
	n, k      int
	hook      string
	ringBytes int
	stalled   bool
}

func samplingCase(t *testing.T, lab *netlab.Lab, c samplingParams) {
	n, k := c.n, c.k
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	before := lab.RxPackets(t, lab.Switch, "p1")
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", strconv.Itoa(n), "-ports", "p1,p2", "-polling", "0", "-hook", c.hook}
	if c.ringBytes != 0 {
		args = append(args, "-ring-bytes", strconv.Itoa(c.ringBytes))
	}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1", "p2")
	if rx := lab.RxPackets(t, lab.Switch, "p1"); rx != before {
		t.Fatalf("p1 received %d frames nobody sent while the daemon started", rx-before)
	}

	if c.stalled {
		d.stop(t)
	}
	start := time.Now()
	sendNumbered(t, lab, 0, 1, 1, k)
	sent := time.Now()
	if c.stalled {
		d.signal(t, syscall.SIGCONT)
	}
	dgs := col.waitDelivered(t, lab)
	t.Logf("N=%d: sent %d frames in %v; %d datagrams", n, k, sent.Sub(start).Round(time.Millisecond), len(dgs))
	if n == 1 {
		// One more frame once the ring is drained: its sample follows
		// every loss of the burst, so its drops field counts them all (a
		// sample read while the ring was still full can precede the last
		// loss; sflow_version_5.txt: drops is a running total).
		sendNumbered(t, lab, 0, 1, uint64(k+1), 1)
		k++
		dgs = col.waitDelivered(t, lab)
	}

	rx := lab.RxPackets(t, lab.Switch, "p1") - before
	if rx != uint64(k) {
		t.Fatalf("kernel: p1 received %d frames, %d sent (lab not quiet?)", rx, k)
	}
	flows := flowSamplesOf(dgs, p1)
	if len(flows) == 0 {
		t.Fatalf("no flow sample of p1 (ifindex %d)\n%s", p1, d.log())
	}

	// (a) Pools. The daemon's pool counter must equal the kernel's count
	// exactly. A sample's pool is the port's pool when the frame was
	// sampled (the sampling CPU's count at that frame plus the other CPUs'
	// counts as their latest samples told, agent/pool.go): frames arrive in
	// number order, so it never counts a frame after the sampled one, and
	// consecutive samples carry strictly increasing pools; with N=1 every
	// frame is a sample, so the last pool is exactly rx_packets.
	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	if pool, ok := m.get("sflowswitchd_port_sample_pool_total", `port="p1"`); !ok || pool != rx {
		t.Errorf("metrics: p1 sample pool %d (found %v), kernel rx_packets %d", pool, ok, rx)
	}
	if lost := m.sum("sflowswitchd_samples_dropped_total"); lost != 0 {
		t.Errorf("metrics: %d samples dropped in user space (unknown port, send error or too large)", lost)
	}
	// Exact accounting: every frame the kernel selected was read by the
	// agent or counted as a ring drop, and every sample read was sent
	// (or sub-sampled away at N not a power of two).
	_, selected, kdrops := portCounters(m, "p1")
	read, away := m.sum("sflowswitchd_kernel_samples_total"), m.sum("sflowswitchd_subsampled_away_total")
	if selected != read+kdrops || read != uint64(len(flows))+away {
		t.Errorf("metrics: kernel selected %d, agent read %d + ring drops %d; read = %d flow samples + %d sub-sampled away?",
			selected, read, kdrops, len(flows), away)
	}
	last := flows[len(flows)-1]
	if uint64(last.pool) > rx {
		t.Errorf("last sample_pool %d > frames received %d", last.pool, rx)
	}
	// With N=1 every frame is a sample and the last one is the frame that
	// came last, so its pool is every frame received, unless a sample
	// lost in the ring left another CPU's last count untold (pool.go).
	if n == 1 && kdrops == 0 && uint64(last.pool) != rx {
		t.Errorf("N=1: last sample_pool %d, want every frame received: %d", last.pool, rx)
	}
	// The drops field carries the port's ring losses: all of them in the
	// last sample at N=1 (it follows the burst), at most them before.
	if uint64(last.drops) > kdrops || (n == 1 && uint64(last.drops) != kdrops) {
		t.Errorf("drops field of the last sample %d, metrics: %d ring drops", last.drops, kdrops)
	}
	var prevPool uint32
	var prevFrame uint64
	exact := 0 // samples whose pool is exactly the sampled frame's number
	seen := map[uint64]bool{}
	for i, f := range flows {
		if f.rate != uint32(n) {
			t.Fatalf("flow sample %d: sampling_rate %d, want %d", i, f.rate, n)
		}
		if i > 0 && f.pool <= prevPool {
			t.Errorf("flow sample %d: sample_pool not increasing %d -> %d", i, prevPool, f.pool)
		}
		prevPool = f.pool
		num, ok := frameNumber(f.header)
		if !ok {
			t.Fatalf("flow sample %d: sampled header is not a test frame: %x", i, f.header)
		}
		if num < 1 || num > uint64(k) || seen[num] {
			t.Fatalf("flow sample %d: frame number %d out of range or sampled twice", i, num)
		}
		seen[num] = true
		if uint64(f.pool) > num {
			t.Errorf("flow sample %d of frame %d: sample_pool %d counts frames that arrived after it", i, num, f.pool)
		}
		if uint64(f.pool) == num {
			exact++
		}
		if num < prevFrame {
			t.Errorf("flow sample %d: frame %d sampled after frame %d (samples reordered)", i, num, prevFrame)
		}
		prevFrame = num
		// The header is the frame sent (up to the send-time stamp, which
		// also changes the UDP checksum), plus the FCS in frame_length.
		want := testFrames(lab, 0, 1, num, 1)[0]
		h := f.header
		if h.FrameLength != uint32(len(want))+4 || h.Stripped != 4 || len(h.Header) != len(want) ||
			!bytes.Equal(h.Header[:40], want[:40]) || !bytes.Equal(h.Header[42:50], want[42:50]) {
			t.Fatalf("flow sample %d: header %x (frame_length %d, stripped %d), sent %x", i, h.Header, h.FrameLength, h.Stripped, want)
		}
		if f.input != p1 {
			t.Errorf("flow sample %d: input %d, want p1 = %d", i, f.input, p1)
		}
	}

	// (b) Sample count: binomial(K, 1/N), exactly K at N=1; samples lost
	// in the ring are reported in drops and counted as taken.
	drops := int(last.drops)
	mean, sd, ok := withinSigmas(len(flows)+drops, k, 1/float64(n), 4)
	t.Logf("N=%d: %d flow samples + %d drops, expected %.0f ± %.1f; last pool %d, kernel rx %d; %d samples' pool = their frame's number (the rest: frames another CPU received since its last sample)",
		n, len(flows), drops, mean, sd, last.pool, rx, exact)
	if !ok {
		t.Errorf("N=%d: %d flow samples + %d drops of %d frames, want %.0f ± 4×%.1f", n, len(flows), drops, k, mean, sd)
	}
	// A stopped daemon reads nothing: the ring holds what fits (a record
	// is at least 176 bytes with 128-byte headers), the rest is dropped.
	if c.stalled && (kdrops == 0 || len(flows) > c.ringBytes/176+1) {
		t.Errorf("stalled: %d flow samples and %d ring drops with a %d-byte ring", len(flows), kdrops, c.ringBytes)
	}

	// (c)-(e) Sequences and sub-agents; agent address.
	checkDatagramSequences(t, dgs)
	checkSampleSequences(t, dgs)
	for _, dg := range dgs {
		if dg.our.AgentAddress != lab.AgentAddr {
			t.Fatalf("agent address %s, want %s (the only address in the switch namespace)", dg.our.AgentAddress, lab.AgentAddr)
		}
		if dg.gf.SequenceNumber != dg.our.SequenceNumber || dg.gf.SubAgentId != dg.our.SubAgentID ||
			int(dg.gf.SamplesCount) != len(dg.our.Samples) || len(dg.gf.Samples) != len(dg.our.Samples) {
			t.Fatalf("goflow2 reads datagram %d/%d with %d samples, our decoder %d/%d with %d",
				dg.gf.SubAgentId, dg.gf.SequenceNumber, dg.gf.SamplesCount, dg.our.SubAgentID, dg.our.SequenceNumber, len(dg.our.Samples))
		}
	}
	// (f) Independent decoders.
	checkIndependentDecoders(t, dgs, collectorPort, p1)
}
