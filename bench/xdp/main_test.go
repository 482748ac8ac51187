package main

import (
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/bench/gen"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"max", 0, true}, {"250k", 250e3, true}, {"2M", 2e6, true}, {"1500", 1500, true},
		{"1.5M", 1.5e6, true}, {"", 0, false}, {"k", 0, false}, {"-3k", 0, false}, {"0", 0, false},
	} {
		got, err := gen.ParseRate(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("gen.ParseRate(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("median reordered its input %v", in)
			}
		}
	}
}

func TestRatiosDiffsPairByRound(t *testing.T) {
	a, b := []float64{2, 9, 4}, []float64{1, 3, 0}
	r := ratios(a, b) // the round with b = 0 is left out
	if len(r) != 2 || r[0] != 2 || r[1] != 3 {
		t.Errorf("ratios = %v, want [2 3]", r)
	}
	d := diffs(a, b[:2])
	if len(d) != 2 || d[0] != 1 || d[1] != 6 {
		t.Errorf("diffs = %v, want [1 6]", d)
	}
}

// perfScript is `perf script -F period,ip,sym` output of a call-graph
// recording (captured on this machine, trimmed): a sample in the attached
// xdp_floor, one in a helper called by it, one in the dispatcher, one in
// another program of the same name at another address, one idle.
const perfScript = `     50000 
	ffffffffc0025f3e bpf_prog_b05fc46bfe36e060_xdp_floor
	ffffffff81dbbecf veth_xdp_rcv_skb
	ffffffff81dbcd19 veth_xdp_rcv

     50000 
	ffffffff8152d25d bpf_get_prandom_u32
	ffffffffc0025f24 bpf_prog_b05fc46bfe36e060_xdp_floor
	ffffffff81dbbecf veth_xdp_rcv_skb

     50000 
	ffffffffc0026187 bpf_dispatcher_xdp
	ffffffff81dbbecf veth_xdp_rcv_skb

     50000 
	ffffffffc0031f3e bpf_prog_b05fc46bfe36e060_xdp_floor
	ffffffff81dbbecf veth_xdp_rcv_skb

     50000 
	ffffffff821f2c2b pv_native_safe_halt
	ffffffff821f4735 default_idle

`

func TestAttribute(t *testing.T) {
	prog := []ipRange{{0xffffffffc0025ee0, 0xffffffffc0025f80}, {0xffffffffc0027000, 0xffffffffc0027100}}
	c, err := attribute(strings.NewReader(perfScript+"PERF_RECORD_LOST lost 3\n"), prog, dispatcherSyms, 50000)
	if err != nil {
		t.Fatal(err)
	}
	want := profileCount{samples: 5, prog: 2, disp: 1, lost: 1}
	if c != want {
		t.Errorf("attribute = %+v, want %+v", c, want)
	}
	// The last sample needs no trailing blank line.
	c, err = attribute(strings.NewReader(strings.TrimRight(perfScript, "\n")), prog[:1], dispatcherSyms, 50000)
	if err != nil || c.samples != 5 || c.prog != 2 {
		t.Errorf("attribute without final blank line = %+v, %v", c, err)
	}
	for _, bad := range []string{
		perfScript + "     40000 \n\tffffffffc0025f3e x\n", // other period
		"\tffffffffc0025f3e x\n",                           // frame before any header
		"     50000 \n\tzz x\n",                            // bad IP
	} {
		if _, err := attribute(strings.NewReader(bad), prog, dispatcherSyms, 50000); err == nil {
			t.Errorf("attribute(%q) accepted bad input", bad)
		}
	}
}

// tcScript is perf script output of TC ingress samples (addresses made up,
// symbols as on this machine): one in the program under cls_bpf, one in
// the classifier outside the program, one in the XDP dispatcher.
const tcScript = `     50000 
	ffffffffc0025f3e bpf_prog_0123456789abcdef_tc_sampler
	ffffffff81efb6e0 cls_bpf_classify
	ffffffff81ee4b10 tcf_classify
	ffffffff81e59ea0 tc_run
	ffffffff81e66fe0 __netif_receive_skb_core.constprop.0

     50000 
	ffffffff81efb700 cls_bpf_classify
	ffffffff81ee4b10 tcf_classify
	ffffffff81e59ea0 tc_run
	ffffffff81e66fe0 __netif_receive_skb_core

     50000 
	ffffffffc0026187 bpf_dispatcher_xdp
	ffffffff81dbbecf veth_xdp_rcv_skb
`

// TestAttributeTC: with the TC hook's symbols, tc_run frames outside the
// program count as the hook and the XDP dispatcher does not.
func TestAttributeTC(t *testing.T) {
	prog := []ipRange{{0xffffffffc0025ee0, 0xffffffffc0025f80}}
	c, err := attribute(strings.NewReader(tcScript), prog, tcRunSyms, 50000)
	if err != nil {
		t.Fatal(err)
	}
	if want := (profileCount{samples: 3, prog: 1, disp: 1, rx: 2}); c != want {
		t.Errorf("attribute = %+v, want %+v", c, want)
	}
}

func TestStddev(t *testing.T) {
	if got := stddev([]float64{2, 4, 4, 4, 5, 5, 7, 9}); got < 2.138 || got > 2.139 {
		t.Errorf("stddev = %v, want 2.1381 (sample standard deviation)", got)
	}
	if got := stddev([]float64{3}); got != 0 {
		t.Errorf("stddev of one value = %v, want 0", got)
	}
}
