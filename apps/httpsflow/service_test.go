package httpsflow

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestServiceGenericAPI reports server and client operations and the
// app counters through the generic API into an engine.
func TestServiceGenericAPI(t *testing.T) {
	col := listenCollector(t)
	eng := app.New(app.Config{})
	eng.SetAgentAddress(netip.MustParseAddr("198.18.0.1"))
	eng.SetReceivers([]agent.ReceiverConfig{{Index: 1, Address: col.LocalAddr().(*net.UDPAddr).AddrPort()}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()

	svc, err := NewService("payment", 8443, 1, EngineReporter{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.Sample(false) {
		t.Fatal("rate 1 must sample everything")
	}
	svc.Count(sflow.AppStatusSuccess)
	if err := svc.Report(Operation{Name: "charge", Attributes: "cc=visa", Duration: 2 * time.Millisecond, Initiator: "c-1", Target: "m-2",
		Local: netip.MustParseAddrPort("198.18.0.1:8443"), Remote: netip.MustParseAddrPort("198.18.0.2:40000")}); err != nil {
		t.Fatal(err)
	}
	svc.Sample(true)
	if err := svc.Report(Operation{Name: "lookup", Client: true, Status: sflow.AppStatusTimeout,
		Parent: &sflow.AppContext{Application: "payment", Operation: "charge"},
		Local:  netip.MustParseAddrPort("[2001:db8::1]:5000"), Remote: netip.MustParseAddrPort("[2001:db8::2]:6379")}); err != nil {
		t.Fatal(err)
	}
	svc.Count(sflow.AppStatusNotFound)
	svc.Count(99) // unknown status counts as OTHER
	if err := svc.SendCounters(&sflow.AppResources{FDOpen: 4}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := NewService("", 1, 1, EngineReporter{Engine: eng}); err == nil {
		t.Error("empty name accepted")
	}
	cancel()
	<-done
	flows, counters := collect(t, col, 200*time.Millisecond)
	if len(flows) != 2 || len(counters) != 1 {
		t.Fatalf("%d flows %d counters", len(flows), len(counters))
	}
	srv, cli := flows[0], flows[1]
	if srv.Source.Index != 8443 || len(srv.Records) != 4 || srv.Records[3].(*sflow.ExtendedSocketIPv4).RemotePort != 40000 ||
		srv.Records[0].(*sflow.AppOperation).DurationUS != 2000 || srv.Records[1].(*sflow.AppInitiator).Actor != "c-1" {
		t.Errorf("server sample %+v", srv)
	}
	if cli.Source.Index != 208443 || cli.Input.Value != sflow.IfIndexInternal || len(cli.Records) != 3 ||
		cli.Records[1].(*sflow.AppParentContext).Context.Operation != "charge" || cli.Records[2].(*sflow.ExtendedSocketIPv6).RemotePort != 6379 {
		t.Errorf("client sample %+v", cli)
	}
	ops := counters[0].Records[0].(*sflow.AppOperations)
	if ops.Success != 1 || ops.NotFound != 1 || ops.Other != 1 || counters[0].Records[1].(*sflow.AppResources).FDOpen != 4 {
		t.Errorf("counters %+v", counters[0].Records)
	}
}

// seenReporter records the Seen of every reported sample.
type seenReporter struct{ seen []uint32 }

func (r *seenReporter) ReportFlow(f *app.FlowSample) error {
	r.seen = append(r.seen, f.Seen)
	return nil
}

func (r *seenReporter) ReportCounters(*app.CounterSample) error { return nil }

// TestServiceSeenCountsEveryOperationOnce checks the sample_pool input:
// two operations sampled before either reports (concurrent operations)
// each report Seen >= 1, and the Seen values plus the operations not yet
// reported add up to every operation exactly once.
func TestServiceSeenCountsEveryOperationOnce(t *testing.T) {
	r := &seenReporter{}
	svc, err := NewService("svc", 9000, 3, r)
	if err != nil {
		t.Fatal(err)
	}
	const ops = 3000
	pending := 0
	for i := 0; i < ops; i++ {
		if svc.Sample(false) {
			pending++
			if pending == 2 { // two sampled operations in flight
				for ; pending > 0; pending-- {
					if err := svc.Report(Operation{Name: "op"}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for ; pending > 0; pending-- {
		if err := svc.Report(Operation{Name: "op"}); err != nil {
			t.Fatal(err)
		}
	}
	total := uint64(svc.seen[0].Load())
	for i, s := range r.seen {
		if s == 0 {
			t.Fatalf("report %d has Seen 0", i)
		}
		total += uint64(s)
	}
	if total != ops {
		t.Fatalf("Seen values add up to %d, want %d operations", total, ops)
	}
}
