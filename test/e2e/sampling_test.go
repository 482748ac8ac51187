package e2e

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/testkit/netlab"
)

// collectorPort is the first collector's UDP port (IANA sflow).
const collectorPort = 6343

// TestSampling runs the daemon at rates 1, 10, 100 and 1000 (only 1 a power
// of two) on p1,p2 and sends K distinct frames from host1 towards host2.
// Checked: the pool counts every frame p1 received (kernel rx_packets),
// the flow sample count is binomial(K, 1/N) within 4 standard deviations,
// datagram and sample sequences are contiguous, each data source has one
// sub-agent, the sampled headers are the frames sent, and goflow2 and
// tshark read the same samples, rates and pools as our decoder.
func TestSampling(t *testing.T) {
	lab := newLab(t, 2)
	// The default hook samples these veth ports at TC ingress; the XDP
	// sampler runs the same cases at two rates (-hook xdp).
	for _, c := range []struct {
		n, k int
		hook string
	}{
		{1, 20000, "auto"},
		{10, 20000, "auto"},
		{100, 200000, "auto"},
		{1000, 1000000, "auto"},
		{1, 20000, "xdp"},
		{100, 200000, "xdp"},
	} {
		t.Run(fmt.Sprintf("hook=%s/N=%d", c.hook, c.n), func(t *testing.T) { samplingCase(t, lab, c.n, c.k, c.hook) })
	}
}

func samplingCase(t *testing.T, lab *netlab.Lab, n, k int, hook string) {
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	before := lab.RxPackets(t, lab.Switch, "p1")
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", strconv.Itoa(n), "-ports", "p1,p2", "-polling", "0", "-hook", hook)
	d.waitReady(t, lab, "p1", "p2")
	if rx := lab.RxPackets(t, lab.Switch, "p1"); rx != before {
		t.Fatalf("p1 received %d frames nobody sent while the daemon started", rx-before)
	}

	start := time.Now()
	sendNumbered(t, lab, 0, 1, 1, k)
	sent := time.Now()
	dgs := col.waitQuiet(t, sent, p1)
	t.Logf("N=%d: sent %d frames in %v; %d datagrams", n, k, sent.Sub(start).Round(time.Millisecond), len(dgs))

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
	last := flows[len(flows)-1]
	if uint64(last.pool) > rx {
		t.Errorf("last sample_pool %d > frames received %d", last.pool, rx)
	}
	if n == 1 && uint64(last.pool) != rx {
		t.Errorf("N=1: last sample_pool %d, want every frame received: %d", last.pool, rx)
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

	// (b) Sample count: binomial(K, 1/N); samples lost in the ring are
	// reported in drops and counted as taken.
	drops := int(last.drops)
	mean, sd, ok := withinSigmas(len(flows)+drops, k, 1/float64(n), 4)
	t.Logf("N=%d: %d flow samples + %d drops, expected %.0f ± %.1f; last pool %d, kernel rx %d; %d samples' pool = their frame's number (the rest: frames another CPU received since its last sample)",
		n, len(flows), drops, mean, sd, last.pool, rx, exact)
	if !ok {
		t.Errorf("N=%d: %d flow samples + %d drops of %d frames, want %.0f ± 4×%.1f", n, len(flows), drops, k, mean, sd)
	}
	if drops != 0 {
		t.Errorf("N=%d: the ring dropped %d samples", n, drops)
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
