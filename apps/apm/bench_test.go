package apm

import (
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user+system) this process has used. The
// benchmarks report it per op as cpu-ns/op, because on a shared, loaded
// machine wall-clock ns/op mostly measures other tenants.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// benchEngine has one control per aggregation type and 3 applications;
// the transactions cover 256 clients x 16 servers x 3 apps, all rows
// already present (the steady state within an interval).
func benchEngine(b *testing.B) (*Engine, []Transaction) {
	e := NewEngine(Config{MaxReportSize: 100000})
	for app := uint32(10); app < 13; app++ {
		if err := e.SetAppDir(AppDirEntry{App: app, Type: TransactionOriented, On: true, Boundaries: [6]uint32{10, 20, 50, 100, 500, 1000}}); err != nil {
			b.Fatal(err)
		}
	}
	for i, agg := range []Aggregation{Flows, Clients, Servers, Applications} {
		if _, err := e.AddControl(ReportControl{Index: uint32(i + 1), Aggregation: agg, Interval: time.Hour, RequestedSize: 100000, RequestedReports: 2}, t0); err != nil {
			b.Fatal(err)
		}
	}
	txs := make([]Transaction, 0, 256*16*3)
	for c := range 256 {
		for s := range 16 {
			for app := uint32(10); app < 13; app++ {
				txs = append(txs, Transaction{
					App: app, Type: TransactionOriented,
					Client:         netip.AddrFrom4([4]byte{198, 18, 1, byte(c)}),
					Server:         netip.AddrFrom4([4]byte{198, 18, 0, byte(s)}),
					Responsiveness: uint32(c*7+s) % 1200, Success: c%10 != 0, Weight: 1 + uint64(s%4),
				})
			}
		}
	}
	for _, x := range txs {
		if err := e.Add(x); err != nil {
			b.Fatal(err)
		}
	}
	return e, txs
}

// BenchmarkAdd measures one Add feeding four report controls (flows,
// clients, servers, applications) from one goroutine.
func BenchmarkAdd(b *testing.B) {
	e, txs := benchEngine(b)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; b.Loop(); i++ {
		if err := e.Add(txs[i%len(txs)]); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkAddParallel is BenchmarkAdd from GOMAXPROCS producers.
func BenchmarkAddParallel(b *testing.B) {
	e, txs := benchEngine(b)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	defer reportCPU(b, cpu0)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := e.Add(txs[i%len(txs)]); err != nil {
				b.Error(err)
				return
			}
			i += 7
		}
	})
}

// BenchmarkTick measures closing one interval of the four controls
// (12288 flow rows in all) and producing their sorted reports.
func BenchmarkTick(b *testing.B) {
	e, txs := benchEngine(b)
	b.ReportAllocs()
	b.ResetTimer()
	now := t0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		for _, x := range txs {
			if err := e.Add(x); err != nil {
				b.Fatal(err)
			}
		}
		now = now.Add(time.Hour)
		b.StartTimer()
		c0 := cpuTime(b)
		e.Tick(now)
		cpu += cpuTime(b) - c0
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
