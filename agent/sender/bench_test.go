package sender

import (
	"net"
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// BenchmarkSend measures sending 1400-byte datagrams of flow samples with
// 128-byte headers (7 per datagram, as the agent sends at sampling rate 1)
// to a loopback collector, one op per datagram: batch=1 is one write(2) per
// datagram (the senders before batching), larger batches one sendmmsg(2)
// per batch. Encoding is the same in every variant. The collector reads
// nothing: its receive queue overflows and the kernel drops the datagrams
// there, after the whole send path (UDP, IP, loopback, UDP receive) ran,
// so the figures are the sender's cost without a reader competing for the
// CPU. Compare variants with benchstat:
//
//	go test -run XXX -bench Send -count 10 ./agent/sender/ > send.txt
//	benchstat -col /mode send.txt
func BenchmarkSend(b *testing.B) {
	for _, v := range []struct {
		mode  string
		batch int
		noGSO bool
	}{{"write", 1, true}, {"sendmmsg", defaultBatch, true}, {"gso", defaultBatch, false}} {
		b.Run("mode="+v.mode, func(b *testing.B) {
			col, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer col.Close()
			var st stats
			s, err := New(Config{
				Collector: col.LocalAddr().(*net.UDPAddr).AddrPort(),
				Agent:     netip.MustParseAddr("198.18.0.1"),
				Batch:     v.batch,
				NoGSO:     v.noGSO,
				Uptime:    func() uint32 { return 1 },
				Counters:  []Counters{st.counters()},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			hdr := &sflow.SampledHeader{Protocol: sflow.HeaderProtocolEthernet, FrameLength: 1504, Stripped: 4, Header: make([]byte, 128)}
			fs := &sflow.FlowSample{
				Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: 4}, SamplingRate: 1,
				Input: sflow.IfIndex(4), Records: []sflow.Record{hdr},
			}
			w, err := sflow.NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, sflow.DefaultMaxDatagramSize)
			if err != nil {
				b.Fatal(err)
			}
			w.Begin(1, 1)
			per := 0
			for w.Add(fs) == nil {
				per++
			}
			calls0, dg0 := s.calls, st.datagrams.Load()
			b.SetBytes(int64(per * 200))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < per; j++ {
					fs.SequenceNumber++
					s.Add(fs)
				}
			}
			s.Flush()
			b.StopTimer()
			dg := st.datagrams.Load() - dg0
			b.ReportMetric(float64(dg)/float64(s.calls-calls0), "datagrams/syscall")
			b.ReportMetric(float64(per), "samples/datagram")
			if e := st.sendErrors.Load(); e != 0 {
				b.Fatalf("%d send errors", e)
			}
		})
	}
}
