package app

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

var testAgent = netip.MustParseAddr("198.18.0.1")

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEncodingRulesGolden checks the bytes of an application datagram,
// assembled by hand from sflow_version_5.txt, sflow_host.txt and
// sflow_application.txt: sub_agent_id = service port, data source
// entLogicalEntry(3).port, a server-side sample with input 0 (unknown
// interface) and output 0x3FFFFFFF (the local server), sample_pool grown
// by the sampling rate, and a counters sample carrying host_parent
// entPhysicalEntry(2).1.
func TestEncodingRulesGolden(t *testing.T) {
	col := newCollector(t)
	e := New(Config{})
	e.SetAgentAddress(netip.MustParseAddr("198.18.0.1"))
	e.SetReceivers(nil)
	stop := startEngine(t, e)
	// Receivers are set after the engine started: a change applies to
	// the sources created afterwards too.
	e.SetReceivers(append(e.receivers[:0:0], col.receiver()))

	flow := &FlowSample{AppName: "pay", ServicePort: 8080, SamplingRate: 10,
		Operation: &sflow.AppOperation{Context: sflow.AppContext{Operation: "get"}, ReqBytes: 1, RespBytes: 2, DurationUS: 3},
		Socket4: &sflow.ExtendedSocketIPv4{Protocol: 6, LocalIP: netip.MustParseAddr("198.18.0.1"),
			RemoteIP: netip.MustParseAddr("198.18.0.2"), LocalPort: 8080, RemotePort: 40000}}
	if err := e.SubmitFlow(flow); err != nil {
		t.Fatal(err)
	}
	cnt := &CounterSample{AppName: "pay", ServicePort: 8080,
		Workers: &sflow.AppWorkers{WorkersActive: 1, WorkersIdle: 2, WorkersMax: 3, ReqDelayed: 4, ReqDropped: 5}}
	if err := e.SubmitCounters(cnt); err != nil {
		t.Fatal(err)
	}
	stop()
	dgs := col.read(t, 200*time.Millisecond)
	if len(dgs) != 1 {
		t.Fatalf("got %d datagrams, want 1", len(dgs))
	}
	want := mustHexStrip(t, `
		00000005 00000001 c6120001  # version 5, IPv4 agent 198.18.0.1
		00001f90                    # sub_agent_id = service port 8080
		00000001 UPTIME 00000002    # sequence 1, uptime, 2 samples
		00000001 00000074           # flow_sample, 116 bytes
		  00000001 03001f90         # sequence 1, source entLogicalEntry.8080
		  0000000a 0000000a 00000000 # rate 10, pool 10, drops 0
		  00000000 3fffffff         # input unknown (0), output internal
		  00000002
		  0000089a 00000030         # app_operation (2202)
		    00000003 70617900 00000003 67657400 00000000 # pay, get, ""
		    00000000 0000000000000001 0000000000000002 00000003 00000000
		  00000834 00000014         # extended_socket_ipv4 (2100)
		    00000006 c6120001 c6120002 00001f90 00009c40
		00000002 00000038           # counters_sample, 56 bytes
		  00000001 03001f90 00000002
		  0000089e 00000014 00000001 00000002 00000003 00000004 00000005 # app_workers (2206)
		  000007d2 00000008 00000002 00000001 # host_parent (2002): entPhysicalEntry.1
	`)
	got := dgs[0]
	if len(got) != len(want) {
		t.Fatalf("datagram is %d bytes, want %d:\n%x", len(got), len(want), got)
	}
	copy(want[20:24], got[20:24]) // uptime
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("byte %d: got %02x want %02x\ngot  %x\nwant %x", i, got[i], want[i], got, want)
		}
	}
	decodeAll(t, dgs)
}

func mustHexStrip(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
	}
	return mustHex(t, strings.ReplaceAll(b.String(), "UPTIME", "00000000"))
}

// TestClientSideRules checks a client-side transaction: data source
// 3:(200000+port) of sub-agent port, input 0x3FFFFFFF, output the
// interface it was sent on, its own sequence numbers and sample pool, and
// the app_parent_context carried through.
func TestClientSideRules(t *testing.T) {
	col := newCollector(t)
	e := New(Config{})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	stop := startEngine(t, e)
	mk := func(client bool, seen uint32) *FlowSample {
		f := &FlowSample{AppName: "shop", ServicePort: 1234, Client: client, IfIndex: 7, SamplingRate: 100, Seen: seen,
			Operation: &sflow.AppOperation{Context: sflow.AppContext{Operation: "charge"}, Status: sflow.AppStatusTimeout}}
		if client {
			f.ParentContext = &sflow.AppParentContext{Context: sflow.AppContext{Application: "shop", Operation: "checkout"}}
		}
		return f
	}
	for _, f := range []*FlowSample{mk(false, 0), mk(true, 120), mk(true, 0), mk(false, 90)} {
		if err := e.SubmitFlow(f); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	ds := decodeAll(t, col.read(t, 200*time.Millisecond))
	if len(ds) != 1 || ds[0].SubAgentID != 1234 || len(ds[0].Samples) != 4 {
		t.Fatalf("datagrams %+v", ds)
	}
	type want struct {
		index, seq, pool uint32
		in, out          uint32
	}
	wants := []want{
		{1234, 1, 100, 7, sflow.IfIndexInternal},
		{201234, 1, 120, sflow.IfIndexInternal, 7},
		{201234, 2, 220, sflow.IfIndexInternal, 7},
		{1234, 2, 190, 7, sflow.IfIndexInternal},
	}
	for i, w := range wants {
		s := ds[0].Samples[i].(*sflow.FlowSample)
		if s.Source != (sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: w.index}) || s.SequenceNumber != w.seq ||
			s.SamplePool != w.pool || s.SamplingRate != 100 || s.Input != sflow.IfIndex(w.in) || s.Output != sflow.IfIndex(w.out) {
			t.Errorf("sample %d: %+v, want %+v", i, s, w)
		}
		op := s.Records[0].(*sflow.AppOperation)
		if op.Context.Application != "shop" || op.Status != sflow.AppStatusTimeout {
			t.Errorf("sample %d: app_operation %+v", i, op)
		}
		client := w.index > 200000
		if client != (len(s.Records) == 2) {
			t.Fatalf("sample %d: records %v", i, s.Records)
		}
		if client {
			if p := s.Records[1].(*sflow.AppParentContext); p.Context.Operation != "checkout" {
				t.Errorf("sample %d: parent %+v", i, p)
			}
		}
	}
}

// TestSequencesAndFlush checks that each application is its own
// sub-agent with its own datagram sequence, that datagrams are flushed
// within the flush interval without waiting to be full, and that full
// datagrams are split (never above the receiver's maximum size).
func TestSequencesAndFlush(t *testing.T) {
	col := newCollector(t)
	e := New(Config{FlushInterval: 100 * time.Millisecond})
	e.SetAgentAddress(testAgent)
	rc := col.receiver()
	rc.MaxDatagramSize = 600
	e.SetReceivers(append(e.receivers, rc))
	startEngine(t, e)
	for i := 0; i < 30; i++ {
		for _, port := range []uint16{80, 443} {
			f := &FlowSample{AppName: "http", ServicePort: port, SamplingRate: 1,
				HTTP: &sflow.HTTPRequest{Method: sflow.HTTPMethodGet, URI: "/x", Status: 200}}
			if err := e.SubmitFlow(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	// No stop: the periodic flush must deliver everything.
	dgs := col.read(t, time.Second)
	ds := decodeAll(t, dgs)
	next := map[uint32]uint32{80: 1, 443: 1}
	samples := map[uint32]int{}
	for i, d := range ds {
		if len(dgs[i]) > 600 {
			t.Errorf("datagram of %d bytes above the maximum 600", len(dgs[i]))
		}
		if d.SequenceNumber != next[d.SubAgentID] {
			t.Errorf("sub-agent %d: datagram sequence %d, want %d", d.SubAgentID, d.SequenceNumber, next[d.SubAgentID])
		}
		next[d.SubAgentID]++
		for _, s := range d.Samples {
			fs := s.(*sflow.FlowSample)
			if fs.Source.Index != d.SubAgentID {
				t.Errorf("sub-agent %d carries data source %v", d.SubAgentID, fs.Source)
			}
			samples[d.SubAgentID]++
			if fs.SequenceNumber != uint32(samples[d.SubAgentID]) {
				t.Errorf("sub-agent %d: sample sequence %d, want %d", d.SubAgentID, fs.SequenceNumber, samples[d.SubAgentID])
			}
		}
	}
	if samples[80] != 30 || samples[443] != 30 || next[80] < 3 {
		t.Errorf("samples %v, datagrams %v: want 30 each, split over several datagrams", samples, next)
	}
	if st := e.Stats(); st.FlowSamples.Load() != 60 || st.Datagrams.Load() != uint64(len(dgs)) || st.SendErrors.Load() != 0 {
		t.Errorf("stats flow %d datagrams %d (received %d) send errors %d", st.FlowSamples.Load(), st.Datagrams.Load(), len(dgs), st.SendErrors.Load())
	}
}

// TestQueueFullCountsDrops checks that a flood beyond the queue is
// dropped without blocking, counted, and reported in the data source's
// drops field.
func TestQueueFullCountsDrops(t *testing.T) {
	col := newCollector(t)
	e := New(Config{QueueLen: 4})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	var full int
	for i := 0; i < 10; i++ { // the engine is not running: the queue fills
		f := &FlowSample{AppName: "a", ServicePort: 9, SamplingRate: 1, Operation: &sflow.AppOperation{}}
		if err := e.SubmitFlow(f); err == ErrQueueFull {
			full++
		}
	}
	if full != 6 || e.Stats().Rejected(ReasonQueueFull) != 6 || e.Stats().Queued.Load() != 4 || e.Stats().Accepted.Load() != 0 {
		t.Fatalf("queue full %d, rejected %d, queued %d, accepted %d (before the engine runs)",
			full, e.Stats().Rejected(ReasonQueueFull), e.Stats().Queued.Load(), e.Stats().Accepted.Load())
	}
	stop := startEngine(t, e)
	stop()
	if a := e.Stats().Accepted.Load(); a != 4 {
		t.Errorf("accepted %d after the engine ran, want 4", a)
	}
	ds := decodeAll(t, col.read(t, 200*time.Millisecond))
	if len(ds) != 1 || len(ds[0].Samples) != 4 {
		t.Fatalf("datagrams %+v", ds)
	}
	if d := ds[0].Samples[0].(*sflow.FlowSample).Drops; d != 6 {
		t.Errorf("drops = %d, want 6", d)
	}
}
