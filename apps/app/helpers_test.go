package app

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// collector is a UDP sFlow collector on loopback.
type collector struct {
	conn *net.UDPConn
}

func newCollector(t testing.TB) *collector {
	t.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &collector{conn: conn}
}

func (c *collector) receiver() agent.ReceiverConfig {
	return agent.ReceiverConfig{Index: 1, Address: c.conn.LocalAddr().(*net.UDPAddr).AddrPort()}
}

// read returns the datagrams that arrive until no datagram came for quiet.
func (c *collector) read(t testing.TB, quiet time.Duration) [][]byte {
	t.Helper()
	var out [][]byte
	buf := make([]byte, 65536)
	for {
		if err := c.conn.SetReadDeadline(time.Now().Add(quiet)); err != nil {
			t.Fatal(err)
		}
		n, err := c.conn.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, bytes.Clone(buf[:n]))
	}
}

// startEngine runs e until the test ends; stop ends it early and waits.
func startEngine(t testing.TB, e *Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		e.Run(ctx)
		close(done)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// decodeAll decodes every datagram with our decoder and checks goflow2
// (an independent decoder) frames it the same way: same header, same
// samples with the same data sources and records (unknown records
// skipped by their length).
func decodeAll(t testing.TB, dgs [][]byte) []*sflow.Datagram {
	t.Helper()
	var out []*sflow.Datagram
	for _, b := range dgs {
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatalf("our decoder: %v", err)
		}
		var p goflow.Packet
		if err := goflow.DecodeMessageVersion(bytes.NewBuffer(b), &p); err != nil {
			t.Fatalf("goflow2 rejects the datagram: %v", err)
		}
		if p.SubAgentId != d.SubAgentID || p.SequenceNumber != d.SequenceNumber || len(p.Samples) != len(d.Samples) {
			t.Fatalf("goflow2 header sub-agent %d seq %d samples %d, ours %d %d %d",
				p.SubAgentId, p.SequenceNumber, len(p.Samples), d.SubAgentID, d.SequenceNumber, len(d.Samples))
		}
		for i, s := range d.Samples {
			switch s := s.(type) {
			case *sflow.FlowSample:
				g, ok := p.Samples[i].(goflow.FlowSample)
				if !ok || g.Header.SourceIdType != s.Source.Type || g.Header.SourceIdValue != s.Source.Index ||
					g.SamplingRate != s.SamplingRate || g.SamplePool != s.SamplePool || g.Drops != s.Drops ||
					g.Input != s.Input.Value || g.Output != s.Output.Value || len(g.Records) != len(s.Records) {
					t.Fatalf("goflow2 flow sample %+v, ours %+v", p.Samples[i], s)
				}
				for k, r := range g.Records {
					if r.Header.DataFormat != uint32(s.Records[k].Format()) || int(r.Header.Length) != len(s.Records[k].AppendXDR(nil)) {
						t.Fatalf("goflow2 record %d: format %d length %d, ours %v", k, r.Header.DataFormat, r.Header.Length, s.Records[k].Name())
					}
				}
			case *sflow.CounterSample:
				g, ok := p.Samples[i].(goflow.CounterSample)
				if !ok || g.Header.SourceIdType != s.Source.Type || g.Header.SourceIdValue != s.Source.Index || len(g.Records) != len(s.Records) {
					t.Fatalf("goflow2 counters sample %+v, ours %+v", p.Samples[i], s)
				}
				for k, r := range g.Records {
					if r.Header.DataFormat != uint32(s.Records[k].Format()) || int(r.Header.Length) != len(s.Records[k].AppendXDR(nil)) {
						t.Fatalf("goflow2 counter record %d: format %d length %d, ours %v", k, r.Header.DataFormat, r.Header.Length, s.Records[k].Name())
					}
				}
			default:
				t.Fatalf("unexpected sample %T", s)
			}
		}
		out = append(out, d)
	}
	return out
}
