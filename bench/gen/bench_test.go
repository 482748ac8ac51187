package gen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// BenchmarkSend measures the generator itself: b.N frames sent (exactly)
// from host 1 into p1, where an XDP program drops each one (native XDP on
// the veth: the cheapest receiver, no skb, no stack), so that what is
// measured is the generator and not a forwarding path. One op is one
// frame sent. Reported: frames/s (frames accepted by the veth per second
// of wall time) and gen-ns/frame (the sending thread's CPU per frame).
//
//	softirq:  p1's NAPI poll (the drop) runs where the kernel schedules
//	          it: on the generator's CPU, at the end of each of its
//	          batches, so gen-ns/frame includes receiving and dropping;
//	threaded: p1's NAPI poll runs in a kernel thread of its own, so the
//	          sending thread's CPU is the generator's alone (frames the
//	          veth refuses when that thread falls behind are counted, not
//	          sent).
//
// The thread is pinned to CPU 1 (the benchmark needs 2 CPUs).
//
//	go -C bench test -run '^$' -bench Send -benchtime 5000000x ./gen/
func BenchmarkSend(b *testing.B) {
	for _, napi := range []string{"softirq", "threaded"} {
		for _, sz := range []struct {
			name  string
			sizes []int
		}{{"64B", []int{60}}, {"IMIX", IMIX}} {
			b.Run(fmt.Sprintf("napi=%s/frames=%s", napi, sz.name), func(b *testing.B) {
				benchSend(b, napi == "threaded", sz.sizes)
			})
		}
	}
}

func benchSend(b *testing.B, threaded bool, sizes []int) {
	l := netlab.New(b, 2)
	drop, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xdp_drop", Type: ebpf.XDP, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}, // XDP_DROP
	})
	if err != nil {
		b.Fatal(err)
	}
	defer drop.Close()
	var lk link.Link
	err = netnsutil.DoNamed(l.Switch, func() error {
		var err error
		lk, err = link.AttachXDP(link.XDPOptions{Program: drop, Interface: l.LinkIndex(l.Switch, "p1"), Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close()
	if threaded {
		if _, err := ThreadedNAPI(l.Switch, "p1"); err != nil {
			b.Fatal(err)
		}
	}
	g, err := New(Config{Namespace: l.Hosts[0], Device: "eth0", SrcMAC: l.HostMACs[0], DstMAC: l.HostMACs[1],
		Src: l.HostAddrs[0], Dst: l.HostAddrs[1], DstPort: 7000, Flows: 1000, Sizes: sizes, CPU: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	// Warm up: the kernel's page pool, the devmap's bulk queue.
	if err := g.Send(context.Background(), 100_000, 0); err != nil {
		b.Fatal(err)
	}
	c0, err := g.Counters()
	if err != nil {
		b.Fatal(err)
	}
	cpu0, err := g.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := g.Send(context.Background(), uint64(b.N), 0); err != nil {
		b.Fatal(err)
	}
	sec := time.Since(start).Seconds()
	b.StopTimer()
	c1, err := g.Counters()
	if err != nil {
		b.Fatal(err)
	}
	cpu1, err := g.CPU()
	if err != nil {
		b.Fatal(err)
	}
	runs, sent := c1.Runs-c0.Runs, c1.Sent-c0.Sent
	if runs != uint64(b.N) || sent+c1.Dropped-c0.Dropped != runs {
		b.Fatalf("%d frames asked, %d made, %d sent + %d refused", b.N, runs, sent, c1.Dropped-c0.Dropped)
	}
	b.ReportMetric(float64(sent)/sec, "frames/s")
	b.ReportMetric(float64(c1.Dropped-c0.Dropped)/float64(runs), "refused/frame")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(runs), "gen-ns/frame")
	b.ReportMetric(float64(runs)/(cpu1-cpu0).Seconds(), "frames/CPU-s")
}
