package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestEgressSampling runs the daemon with p1 sampled at ingress and p2 at
// egress (-port-direction), rate 1, and sends K numbered frames from
// host1 to host2 (in at p1, out at p2) and K from host2 to host1 (in at
// p2, out at p1: sampled by neither). Checked, by our decoder, goflow2
// and tshark alike: every frame host1 sent is sampled once at p1's
// ingress (input p1) and once at p2's egress (data source p2, output p2,
// input p1, as the kernel's skb_iif tells), no frame twice in one
// direction; p2's egress pool (metric and the last flow sample's
// sample_pool) equals p2's tx_packets since the daemon attached; p1's
// data source sends no sample of the frames it sent. Then SIGHUP
// (testEgressReload).
func TestEgressSampling(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	p2 := uint32(lab.LinkIndex(lab.Switch, "p2"))
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	writeConf := func(body string) {
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConf("[port_direction]\np2 = \"egress\"\n")
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1,p2", "-polling", "0", "-config", conf}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1", "p2")
	// The switch's bridge sends frames of its own (IGMP reports) out of
	// the ports now and then: p2's egress pool is compared with its
	// tx_packets over the test, from a reading of both with no frame
	// sent in between.
	var tx2, epool0 uint64
	for i := 0; ; i++ {
		tx2 = lab.LinkStats(t, lab.Switch, "p2").TxPackets
		m, err := fetchMetrics(lab)
		if err != nil {
			t.Fatal(err)
		}
		epool0, _ = m.get("sflowswitchd_port_egress_sample_pool_total", `port="p2"`)
		if lab.LinkStats(t, lab.Switch, "p2").TxPackets == tx2 {
			break
		}
		if i == 10 {
			t.Fatal("p2 never quiet")
		}
	}
	const k = 2000
	// To the other host's MAC: the bridge forwards each frame out of the
	// other port.
	lab.SendFrames(t, 0, numberedFrames(lab, 0, 1, lab.HostMACs[1], 1, k))
	lab.SendFrames(t, 1, numberedFrames(lab, 1, 0, lab.HostMACs[0], 100001, k))
	dgs := col.waitDelivered(t, lab)
	tx := lab.LinkStats(t, lab.Switch, "p2").TxPackets - tx2
	if tx < k {
		t.Fatalf("kernel: p2 sent %d frames, %d sent its way", tx, k)
	}

	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	l2 := `port="p2"`
	epool, _ := m.get("sflowswitchd_port_egress_sample_pool_total", l2)
	esamples, _ := m.get("sflowswitchd_port_egress_kernel_samples_total", l2)
	edrops, _ := m.get("sflowswitchd_port_egress_kernel_drops_total", l2)
	ipool, _ := m.get("sflowswitchd_port_sample_pool_total", l2)
	if epool-epool0 != tx || ipool != 0 {
		t.Errorf("metrics: p2 egress pool %d (from %d), ingress pool %d; kernel tx_packets %d over the test", epool-epool0, epool0, ipool, tx)
	}
	t.Logf("p2: tx_packets %d over the test (%d test frames), egress pool %d -> %d", tx, k, epool0, epool)
	if esamples != epool {
		t.Errorf("metrics: p2 egress samples %d at rate 1, pool %d", esamples, epool)
	}

	seen := map[[2]uint64]int{} // {data source, frame number}
	check := func(who string, i int, src, in, out uint32, num uint64) {
		switch {
		case src == p1 && (in != p1 || num > k):
			t.Errorf("%s: flow sample %d of p1: input %d (want %d), frame %d", who, i, in, p1, num)
		case src == p2 && (in != p1 || out != p2 || num > k):
			t.Errorf("%s: egress sample %d of p2: input %d output %d (want %d, %d), frame %d", who, i, in, out, p1, p2, num)
		case src != p1 && src != p2:
			t.Errorf("%s: flow sample %d of data source %d", who, i, src)
		}
	}
	flows2 := flowSamplesOf(dgs, p2)
	own, other := 0, 0
	for i, f := range flowSamplesOf(dgs, 0) {
		num, ok := frameNumber(f.header)
		if !ok && f.source.Index == p2 && f.input == sflow.IfIndexInternal && f.output.Value == p2 {
			own++ // the switch's own frame, sent through p2
			continue
		}
		if !ok {
			// The hosts answer the frames to their UDP port 9 with ICMP:
			// host1's answers go in at p1 and out at p2, and are sampled
			// like the test frames.
			other++
			if f.source.Index == p2 && (f.input != p1 || f.output.Value != p2) {
				t.Errorf("egress sample %d of p2 (not a test frame): input %d output %d", i, f.input, f.output.Value)
			}
			continue
		}
		seen[[2]uint64{uint64(f.source.Index), num}]++
		check("ours", i, f.source.Index, f.input, f.output.Value, num)
		if f.output.Format != sflow.InterfaceSingle && f.source.Index == p2 {
			t.Errorf("egress sample %d: output format %d", i, f.output.Format)
		}
	}
	for _, src := range []uint32{p1, p2} {
		for n := uint64(1); n <= k; n++ {
			if c := seen[[2]uint64{uint64(src), n}]; c != 1 && edrops == 0 {
				t.Errorf("frame %d: %d samples of data source %d, want 1", n, c, src)
			}
		}
	}
	if len(flows2) == 0 {
		t.Fatalf("no egress sample of p2\n%s", d.log())
	}
	// At rate 1 every frame is sampled: the last sample's pool is the
	// whole egress pool.
	if last := flows2[len(flows2)-1]; edrops == 0 && uint64(last.pool) != epool {
		t.Errorf("last egress sample_pool %d, p2 egress pool %d", last.pool, epool)
	}
	t.Logf("%d egress samples of p2 (%d the switch's own frames), %d of p1; %d samples of frames the hosts made", len(flows2), own, len(flowSamplesOf(dgs, p1)), other)
	// goflow2 and tshark read the same samples, rates, pools (and inputs
	// and outputs, checked here).
	checkIndependentDecoders(t, dgs, collectorPort, p2)
	checkIndependentDecoders(t, dgs, collectorPort, p1)
	gi := 0
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			fs, ok := s.(goflow.FlowSample)
			if !ok || fs.Header.SourceIdValue != p2 {
				continue
			}
			if (fs.Input != p1 && fs.Input != sflow.IfIndexInternal) || fs.Output != p2 {
				t.Errorf("goflow2: egress sample %d of p2: input %d output %d, want %d, %d", gi, fs.Input, fs.Output, p1, p2)
			}
			gi++
		}
	}
	rows := tsharkFields(t, dgs, collectorPort, "sflow.flow_sample.index", "sflow.flow_sample.input_interface", "sflow.flow_sample.output_interface_value")
	ti := 0
	for _, r := range rows {
		for j, idx := range r["sflow.flow_sample.index"] {
			if idx != strconv.FormatUint(uint64(p2), 10) {
				continue
			}
			in, out := r["sflow.flow_sample.input_interface"], r["sflow.flow_sample.output_interface_value"]
			if j >= len(in) || j >= len(out) || (parseU32(t, in[j]) != p1 && parseU32(t, in[j]) != sflow.IfIndexInternal) || parseU32(t, out[j]) != p2 {
				t.Errorf("tshark: egress sample %d of p2: input/output %v/%v, want %d/%d", ti, in, out, p1, p2)
			}
			ti++
		}
	}
	if gi != len(flows2) || ti != len(flows2) {
		t.Errorf("p2 samples: goflow2 %d, tshark %d, ours %d", gi, ti, len(flows2))
	}
	testEgressReload(t, lab, d, col, writeConf, p1, p2)
}

// testEgressReload is TestEgressSampling's second part: SIGHUP with p1
// sampled both ways (direction = "both", p2 still egress by its own
// entry). p1's egress sampler attaches; frames from host2 (in at p2, out
// at p1) are sampled once, at p1's egress (output p1, input p2), and
// p1's flow samples' pools go on increasing over the change.
func testEgressReload(t *testing.T, lab *netlab.Lab, d *daemon, col *collector, writeConf func(string), p1, p2 uint32) {
	before := len(flowSamplesOf(col.snapshot(t), p1))
	var lastPool uint32
	if fs := flowSamplesOf(col.snapshot(t), p1); len(fs) > 0 {
		lastPool = fs[len(fs)-1].pool
	}
	writeConf("direction = \"both\"\n[port_direction]\np2 = \"egress\"\n")
	d.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mode := ""
		err := lab.Do(lab.Switch, func() error {
			var err error
			mode, err = dataplane.KernelAttachmentEgress(int(p1))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if mode != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p1 not sampled at egress 10 s after SIGHUP\n%s", d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond) // the agent's Apply ends after the attach
	const k = 500
	sent := time.Now()
	lab.SendFrames(t, 1, numberedFrames(lab, 1, 0, lab.HostMACs[0], 200001, k))
	// The re-attach restarted the kernel counters the harness's
	// accounting reads (waitDelivered): wait for quiet instead.
	dgs := col.waitQuiet(t, sent, p1)
	fs := flowSamplesOf(dgs, p1)[before:]
	got := map[uint64]int{}
	for i, f := range fs {
		if f.pool <= lastPool {
			t.Errorf("p1 flow sample %d after SIGHUP: pool %d not above %d", i, f.pool, lastPool)
		}
		lastPool = f.pool
		num, ok := frameNumber(f.header)
		if !ok {
			continue // the hosts' ICMP answers, sampled at p1 both ways
		}
		if num < 200001 || num >= 200001+k {
			t.Errorf("p1 flow sample %d after SIGHUP: frame %d", i, num)
			continue
		}
		got[num]++
		if f.input != p2 || f.output.Value != p1 {
			t.Errorf("p1 egress sample of frame %d: input %d output %d, want %d, %d", num, f.input, f.output.Value, p2, p1)
		}
	}
	for n := uint64(200001); n < 200001+k; n++ {
		if got[n] != 1 {
			t.Errorf("frame %d: %d samples at p1's egress after SIGHUP, want 1", n, got[n])
		}
	}
	checkIndependentDecoders(t, dgs, collectorPort, p1)
}
