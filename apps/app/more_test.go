package app

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRejectLogRateLimited checks that a flood of bad messages logs at
// most one line per second per reason while every one is counted.
func TestRejectLogRateLimited(t *testing.T) {
	var buf syncBuffer
	e := New(Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	start := time.Now()
	for i := 0; i < 1000; i++ {
		_ = e.SubmitJSON([]byte("garbage"))
		_ = e.SubmitJSON([]byte(`{"flow_sample":{"app_name":"a","service_port":0,"app_operation":{}}}`))
	}
	elapsed := time.Since(start)
	lines := strings.Count(buf.String(), "\n")
	notJSON := strings.Count(buf.String(), "reason=not_json")
	// One line per reason per started second of the flood.
	maxPerReason := int(elapsed/time.Second) + 1
	if notJSON < 1 || notJSON > maxPerReason || lines > 2*maxPerReason {
		t.Errorf("%d log lines (%d not_json) in %v:\n%s", lines, notJSON, elapsed, buf.String())
	}
	if e.Stats().Rejected(ReasonNotJSON) != 1000 || e.Stats().Rejected(ReasonOutOfRange) != 1000 {
		t.Errorf("counted not_json %d, out_of_range %d", e.Stats().Rejected(ReasonNotJSON), e.Stats().Rejected(ReasonOutOfRange))
	}
}

// TestReceiverChangeKeepsSequence checks that changing the receivers of
// running data sources continues their datagram sequence numbers.
func TestReceiverChangeKeepsSequence(t *testing.T) {
	col1, col2 := newCollector(t), newCollector(t)
	e := New(Config{FlushInterval: 50 * time.Millisecond})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col1.receiver()))
	stop := startEngine(t, e)
	submit := func() {
		t.Helper()
		if err := e.SubmitFlow(&FlowSample{AppName: "a", ServicePort: 5, SamplingRate: 1, Operation: &sflow.AppOperation{}}); err != nil {
			t.Fatal(err)
		}
	}
	submit()
	d1 := decodeAll(t, col1.read(t, 300*time.Millisecond))
	e.SetReceivers(append(e.receivers[:0:0], col2.receiver())) // same index 1, new address
	submit()
	stop()
	d2 := decodeAll(t, col2.read(t, 300*time.Millisecond))
	if len(d1) != 1 || len(d2) != 1 || d1[0].SequenceNumber != 1 || d2[0].SequenceNumber != 2 {
		t.Fatalf("datagrams before %+v after %+v: want sequence 1 then 2", d1, d2)
	}
	if s := d2[0].Samples[0].(*sflow.FlowSample); s.SequenceNumber != 2 || s.SamplePool != 2 {
		t.Errorf("sample after the change %+v: want sequence 2, pool 2", s)
	}
}

// TestTooManySources checks the bound on data sources.
func TestTooManySources(t *testing.T) {
	col := newCollector(t)
	e := New(Config{MaxSources: 2})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	stop := startEngine(t, e)
	for _, port := range []uint16{1, 2, 3, 1} {
		if err := e.SubmitFlow(&FlowSample{AppName: "a", ServicePort: port, SamplingRate: 1, Operation: &sflow.AppOperation{}}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	var n int
	for _, d := range decodeAll(t, col.read(t, 200*time.Millisecond)) {
		if d.SubAgentID == 3 {
			t.Errorf("third source sent datagrams")
		}
		n += len(d.Samples)
	}
	if n != 3 || e.Stats().Rejected(ReasonTooManySources) != 1 {
		t.Errorf("%d samples sent, %d refused", n, e.Stats().Rejected(ReasonTooManySources))
	}
	// The refused sample was queued but is not counted accepted: accepted
	// plus rejected is what was submitted.
	if q, a := e.Stats().Queued.Load(), e.Stats().Accepted.Load(); q != 4 || a != 3 {
		t.Errorf("queued %d accepted %d, want 4 and 3", q, a)
	}
}

// TestSourceSlotsReclaimed: one process that used
// every data source slot cannot lock other applications out until the
// idle timeout: once its sources have been idle for ReclaimIdle, a new
// application takes the least recently active one's slot (counted).
func TestSourceSlotsReclaimed(t *testing.T) {
	col := newCollector(t)
	e := New(Config{MaxSources: 2, ReclaimIdle: 200 * time.Millisecond})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	stop := startEngine(t, e)
	submit := func(port uint16) {
		t.Helper()
		if err := e.SubmitFlow(&FlowSample{AppName: "a", ServicePort: port, SamplingRate: 1, Operation: &sflow.AppOperation{}}); err != nil {
			t.Fatal(err)
		}
	}
	submit(1) // the greedy process fills every slot
	submit(2)
	time.Sleep(50 * time.Millisecond)
	submit(3) // refused: both slots active within ReclaimIdle
	time.Sleep(300 * time.Millisecond)
	submit(2) // port 2 active again: port 1 is now the least recent
	time.Sleep(20 * time.Millisecond)
	submit(4) // takes port 1's slot
	stop()
	bySource := map[uint32]int{}
	for _, d := range decodeAll(t, col.read(t, 200*time.Millisecond)) {
		bySource[d.SubAgentID] += len(d.Samples)
	}
	if bySource[3] != 0 || bySource[4] != 1 || bySource[1] != 1 || bySource[2] != 2 {
		t.Errorf("samples by source %v, want port 1: 1, 2: 2, 3: 0, 4: 1", bySource)
	}
	if r, c := e.Stats().Rejected(ReasonTooManySources), e.Stats().SourcesReclaimed.Load(); r != 1 || c != 1 {
		t.Errorf("rejected %d, reclaimed %d; want 1 and 1", r, c)
	}
}
