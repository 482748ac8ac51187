package drops

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// dropVariant is one build of dataplane/bpf/drops.c, loaded, attached and read the
// way its daemon did: A (the ring buffer build before the header copy) with a
// minimal loader equal to dataplane's of that time (configuration, one
// ring buffer reader), B (the current build) with drops.Open and
// Drops.Read. Both get the same configuration.
type dropVariant struct {
	prog  *ebpf.Program
	stats func() [5]uint64 // drops, notified, suppressed, ring_full, uncounted
	close func()
}

// kernelConsumedReason is SKB_CONSUMED of the running kernel, or
// 0xffffffff without one (as dataplane sets consumed_reason).
func kernelConsumedReason(b *testing.B) uint32 {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		b.Fatal(err)
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		b.Fatal(err)
	}
	for _, v := range e.Values {
		if v.Name == "SKB_CONSUMED" {
			return uint32(v.Value)
		}
	}
	return 0xffffffff
}

// DROPS_READER=poll: the reader sleeps 20 ms, then takes what is there,
// instead of waiting to be woken (the daemon's way). A notification then
// finds no reader waiting: this shows the program's work apart from
// waking the reader.
var pollReader = os.Getenv("DROPS_READER") == "poll"

const pollEvery = 20 * time.Millisecond

// loadRingVariant loads an object whose events map is a BPF ring buffer.
func loadRingVariant(b *testing.B, spec *ebpf.CollectionSpec, netns, limit, consumed uint32) *dropVariant {
	b.Helper()
	spec = spec.Copy()
	if err := spec.Variables["consumed_reason"].Set(consumed); err != nil {
		b.Fatal(err)
	}
	if spec.Maps["events"].Type != ebpf.RingBuf {
		b.Fatalf("DROPS_A: events map of type %v, want a ring buffer", spec.Maps["events"].Type)
	}
	spec.Maps["events"].MaxEntries = 256 << 10
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatalf("loading: %v", err)
	}
	cfg := [4]uint32{netns, limit, drops.DefaultHeaderBytes, 0}
	if err := coll.Maps["config"].Put(uint32(0), cfg); err != nil {
		b.Fatal(err)
	}
	rd, err := ringbuf.NewReader(coll.Maps["events"])
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var rec ringbuf.Record
		for {
			if pollReader {
				time.Sleep(pollEvery)
				rd.SetDeadline(time.Now())
			}
			for {
				err := rd.ReadInto(&rec)
				if err == nil {
					continue
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				return // closed
			}
		}
	}()
	prog := coll.Programs["kfree_skb_drops"]
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		b.Fatal(err)
	}
	stats := coll.Maps["stats"]
	return &dropVariant{
		prog: prog,
		stats: func() [5]uint64 {
			var per [][5]uint64
			if err := stats.Lookup(uint32(0), &per); err != nil {
				b.Fatal(err)
			}
			var s [5]uint64
			for _, c := range per {
				for i := range s {
					s[i] += c[i]
				}
			}
			return s
		},
		close: func() { l.Close(); rd.Close(); <-done; coll.Close() },
	}
}

// openDaemonVariant opens the current build as the daemon does.
func openDaemonVariant(b *testing.B, netns, limit uint32) *dropVariant {
	b.Helper()
	d, err := drops.Open(drops.Config{Netns: uint64(netns), Limit: limit, HeaderBytes: drops.DefaultHeaderBytes})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ev drops.Event
		nop := func(*drops.Event) {}
		for {
			if pollReader {
				time.Sleep(pollEvery)
				d.SetDeadline(time.Now())
			}
			_, err := d.Read(&ev, nop)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return // closed
			}
		}
	}()
	return &dropVariant{
		prog: d.Program(),
		stats: func() [5]uint64 {
			st, err := d.Stats()
			if err != nil {
				b.Fatal(err)
			}
			return [5]uint64{st.Drops, st.Notified, st.Suppressed, st.RingFull, st.Uncounted}
		},
		close: func() { d.Close(); <-done },
	}
}

// spread returns the median, min and max of xs.
func spread(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s), s[0], s[len(s)-1]
}

// BenchmarkDropCost: the kernel's cost per drop of the kfree_skb program,
// before and after the header copy of paged bytes, A/B alternating. A is the
// object given by DROPS_A (the build before: `git show
// 1f795a9:dataplane/bpf/drops_bpfel.o`, a BPF ring buffer and a copy of the linear
// area), loaded as dataplane loaded it then; B the current build (perf
// buffers filled by bpf_skb_output, woken through the doorbell ring),
// opened by drops.Open and read with Drops.Read, as the daemon
// does. Same configuration (header 128).
// trafgen in host 1 sends a frame whose drop once lost its UDP header (from a transmit ring, so
// the skb is paged): 60 bytes of UDP to port 7778, dropped by the bridge
// forward chain's rule; as fast as it can, or in the notified mode one per
// DROPS_GAP (default 20us, trafgen -t). Three modes, each a pair of 2 s
// windows (A then B, or B then A) per iteration:
//
//   - notified: limit 2^30, every drop of ours is notified (the header copy);
//   - over budget: limit 100 (the default), almost every drop is counted
//     and suppressed (the path of a drop flood);
//   - filtered: the program watches another namespace (the collector's,
//     which drops nothing), so every run is filtered out by namespace (the
//     cost of drops elsewhere on the machine).
//
// The cost is the program's run time from BPF statistics (which time the
// program, not the trampoline around it). Runs for other namespaces'
// drops (other jobs on the machine) are in every window: a drop of ours
// costs the window's run time less those runs at the filtered cost of the
// same build (median of its filtered windows), per drop of ours; the share
// of runs that were ours is reported. A notified drop's time includes
// waking the reader when it waits (both builds wake it only then: a ring
// buffer's rule); DROPS_READER=poll shows the cost without a waiting
// reader.
func BenchmarkDropCost(b *testing.B) {
	pathA := os.Getenv("DROPS_A")
	if pathA == "" {
		b.Fatal("DROPS_A must name the object to compare with (e.g. git show 1f795a9:dataplane/bpf/drops_bpfel.o > /tmp/drops_a.o)")
	}
	specA, err := ebpf.LoadCollectionSpec(pathA)
	if err != nil {
		b.Fatal(err)
	}
	gap := os.Getenv("DROPS_GAP")
	if gap == "" {
		gap = "20us"
	}
	lab := netlab.New(b, 3)
	dl := lab.SetupDrops(b)
	sw, err := drops.NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		b.Fatal(err)
	}
	col, err := drops.NetnsInode("/run/netns/" + lab.Collector)
	if err != nil {
		b.Fatal(err)
	}
	consumed := kernelConsumedReason(b)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	frame := dl.ForwardFrames(1, 40100, make([]byte, 18))[0]
	// The notified mode is paced, so that the reader keeps up and every
	// drop takes the notified path; the others flood, so that our drops
	// outnumber the other namespaces' in the counted mode.
	type mode struct {
		name    string
		netns   uint32
		limit   uint32
		trafgen []string
	}
	modes := []mode{
		{"notified", uint32(sw), 1 << 30, []string{"-t", gap}},
		{"over budget", uint32(sw), drops.DefaultLimit, nil},
		{"filtered", uint32(col), drops.DefaultLimit, nil},
	}
	// One window's BPF statistics and the program's own counts.
	type win struct{ runtime, runs, own, notified float64 }
	res := map[string]*[2][]win{}
	for _, m := range modes {
		res[m.name] = &[2][]win{}
	}
	window := func(m mode, which int) {
		var v *dropVariant
		if which == 0 {
			v = loadRingVariant(b, specA, m.netns, m.limit, consumed)
		} else {
			v = openDaemonVariant(b, m.netns, m.limit)
		}
		defer v.close()
		time.Sleep(300 * time.Millisecond)
		s0, d0 := mustStats(b, v.prog), v.stats()
		time.Sleep(2 * time.Second)
		s1, d1 := mustStats(b, v.prog), v.stats()
		w := win{runtime: float64(s1.Runtime - s0.Runtime), runs: float64(s1.RunCount - s0.RunCount),
			own: float64(d1[0] - d0[0]), notified: float64(d1[1] - d0[1])}
		if w.runs == 0 {
			b.Fatalf("%s: the program did not run", m.name)
		}
		res[m.name][which] = append(res[m.name][which], w)
		b.Logf("%-11s %s (load %s): %.0f runs/s, %.1f ns/run, ours %.3f, notified %.0f/s, ring_full %d",
			m.name, "AB"[which:which+1], loadavg(), w.runs/2, w.runtime/w.runs, w.own/w.runs, w.notified/2, d1[3]-d0[3])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range modes {
			tg := startTrafgen(b, lab.Hosts[0], frame, m.trafgen...)
			time.Sleep(500 * time.Millisecond)
			if i%2 == 0 {
				window(m, 0)
				window(m, 1)
			} else {
				window(m, 1)
				window(m, 0)
			}
			tg.stop()
		}
	}
	b.StopTimer()
	// A drop of ours costs its window's run time less the other
	// namespaces' runs at the variant's filtered cost (median of its
	// filtered windows), divided by our drops.
	filtered := [2]float64{}
	for which := range filtered {
		var ns []float64
		for _, w := range res["filtered"][which] {
			ns = append(ns, w.runtime/w.runs)
		}
		filtered[which], _, _ = spread(ns)
	}
	for _, m := range modes {
		r := res[m.name]
		var per [2][]float64
		for which := range per {
			for _, w := range r[which] {
				if m.name == "filtered" {
					per[which] = append(per[which], w.runtime/w.runs)
				} else {
					per[which] = append(per[which], (w.runtime-(w.runs-w.own)*filtered[which])/w.own)
				}
			}
		}
		var ratios []float64
		for i := range per[0] {
			ratios = append(ratios, per[1][i]/per[0][i])
		}
		aMed, aLo, aHi := spread(per[0])
		bMed, bLo, bHi := spread(per[1])
		rMed, rLo, rHi := spread(ratios)
		var own []float64
		for _, w := range r[1] {
			own = append(own, w.own/w.runs)
		}
		oMed, oLo, oHi := spread(own)
		b.Logf("%-11s ns per drop: A %.1f [%.1f–%.1f], B %.1f [%.1f–%.1f]; B/A per pair %.3f [%.3f–%.3f]; our share of B's runs %.2f [%.2f–%.2f]",
			m.name, aMed, aLo, aHi, bMed, bLo, bHi, rMed, rLo, rHi, oMed, oLo, oHi)
		key := map[string]string{"notified": "notified", "over budget": "overbudget", "filtered": "filtered"}[m.name]
		b.ReportMetric(aMed, "ns/drop_A_"+key)
		b.ReportMetric(bMed, "ns/drop_B_"+key)
		if !math.IsNaN(rMed) {
			b.ReportMetric(rMed, "B/A_"+key)
		}
	}
}
