package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// BenchmarkRingRead: reading kernel samples from a worker's ring, per
// record (40-byte metadata + 128-byte header class). The ring is filled by
// running p1's sampler at rate 1 with BPF_PROG_TEST_RUN (timer stopped),
// then drained by the worker's Source.Read in batches (timed).
func BenchmarkRingRead(b *testing.B) {
	lab := netlab.New(b, 1)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: 16 << 20})
	p1 := lab.LinkIndex(lab.Switch, "p1")
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 128}); err != nil {
		b.Fatal(err)
	}
	r, err := d.Source(0)
	if err != nil {
		b.Fatal(err)
	}
	prog := portProg(b, d, p1)
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 100)[0]
	ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(p1)}
	const batch = 16384 // records per fill: 16384 x 176 bytes < 16 MiB
	var hdrBytes int
	fn := func(s *reader.RawSample) { hdrBytes += len(s.Header) }
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		b.StopTimer()
		if err := lab.Do(lab.Switch, func() error {
			_, _, err := testRun(prog, frame, &ctx, uint32(n))
			return err
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for got := 0; got < n; {
			k, err := r.Read(time.Now().Add(time.Second), fn)
			if err != nil {
				b.Fatal(err)
			}
			got += k
		}
		done += n
	}
	b.StopTimer()
	if pc, err := d.Stats().Ingress(p1); err != nil || pc.Drops != 0 {
		b.Fatalf("counters %+v (%v): ring drops would skew the figure", pc, err)
	}
}

// BenchmarkXDPSamplerUnsampledHighIfIndex: the unsampled path of a port
// whose ifindex (2^24+7) puts its config in the hash map: the per-packet
// path reads no config, so it costs what BenchmarkXDPSamplerUnsampled
// costs; the hash lookup happens per sample only.
func BenchmarkXDPSamplerUnsampledHighIfIndex(b *testing.B) {
	lab := netlab.New(b, 1)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 2})
	idx := addVethAt(b, lab, "big0", 1<<24+7)
	if err := d.AttachPort(idx, PortConfig{Rate: 1 << 31, HeaderBytes: 128}); err != nil {
		b.Fatal(err)
	}
	prog := portProg(b, d, idx)
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0]
	ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(idx)}
	var ns uint32
	b.ResetTimer()
	err := lab.Do(lab.Switch, func() error {
		ret, dur, err := testRun(prog, frame, &ctx, uint32(b.N))
		if err == nil && ret != 2 {
			err = fmt.Errorf("returned %d, want XDP_PASS", ret)
		}
		ns = dur
		return err
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ns), "kernel-ns/pkt")
}
