package httpsflow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Service is the generic API for applications that are not (only) HTTP
// servers (sflow_application.txt): sampled app_operation flow samples and
// the app_operations / app_resources / app_workers counters.
//
// Per operation: call Sample first (cheap); count every finished
// operation with Count; for a sampled one, also call Report.
type Service struct {
	name  string
	port  uint16
	rate  uint32
	r     Reporter
	seen  [2]atomic.Uint32 // server, client
	count [11]atomic.Uint32
	// ReportErrors counts samples the reporter refused.
	ReportErrors atomic.Uint64
}

// NewService returns the API for application name (at most 32 bytes)
// receiving requests on servicePort (its lowest listening port), sampling
// one operation in rate.
func NewService(name string, servicePort uint16, rate uint32, r Reporter) (*Service, error) {
	switch {
	case name == "" || len(name) > 32:
		return nil, fmt.Errorf("httpsflow: application name %q must be 1..32 bytes", name)
	case servicePort == 0:
		return nil, errors.New("httpsflow: service port 0")
	case rate == 0:
		return nil, errors.New("httpsflow: sampling rate 0")
	case r == nil:
		return nil, errors.New("httpsflow: nil Reporter")
	}
	return &Service{name: name, port: servicePort, rate: rate, r: r}, nil
}

// Sample decides, at random with probability 1/rate, whether the next
// operation (server side, or client side when client is true) is sampled.
// Call it exactly once per operation.
func (s *Service) Sample(client bool) bool {
	side := 0
	if client {
		side = 1
	}
	if s.rate == 1 || rand.Uint32N(s.rate) == 0 {
		return true
	}
	// Only unsampled operations are counted here: each Report adds its own
	// operation (Seen = unsampled since the last report + 1), so two
	// operations sampled at the same time can never leave one of them
	// reporting Seen 0 (which would mean "use the sampling rate").
	s.seen[side].Add(1)
	return false
}

// Count counts one finished server-side operation by status, sampled or
// not: the app_operations counters.
func (s *Service) Count(status sflow.AppStatus) {
	if int(status) < len(s.count) {
		s.count[status].Add(1)
	} else {
		s.count[sflow.AppStatusOther].Add(1)
	}
}

// Operation is one sampled operation.
type Operation struct {
	// Name is the operation (utf8string<32>, e.g. "get.customer.name"),
	// Attributes its name=value pairs as a query string (<255>).
	Name, Attributes string
	Status           sflow.AppStatus
	StatusDescr      string
	ReqBytes         uint64
	RespBytes        uint64
	Duration         time.Duration
	// Client marks an operation this application made as a client of
	// another service; Parent is then the server operation it serves.
	Client bool
	Parent *sflow.AppContext
	// Initiator and Target are business-level actors (<64 each).
	Initiator, Target string
	// Local and Remote are the connection's end points (optional);
	// Protocol is the IP protocol (6 = TCP when 0).
	Local, Remote netip.AddrPort
	Protocol      uint32
}

// Report sends a sampled operation. Strings longer than the spec allows
// are refused by the engine.
func (s *Service) Report(op Operation) error {
	side := 0
	if op.Client {
		side = 1
	}
	f := &app.FlowSample{
		AppName: s.name, ServicePort: s.port, Client: op.Client, SamplingRate: s.rate, Seen: s.seen[side].Swap(0) + 1,
		Operation: &sflow.AppOperation{
			Context:     sflow.AppContext{Application: s.name, Operation: op.Name, Attributes: op.Attributes},
			StatusDescr: op.StatusDescr, ReqBytes: op.ReqBytes, RespBytes: op.RespBytes,
			DurationUS: durationUS(op.Duration), Status: op.Status,
		},
	}
	if op.Parent != nil {
		f.ParentContext = &sflow.AppParentContext{Context: *op.Parent}
	}
	if op.Initiator != "" {
		f.Initiator = &sflow.AppInitiator{Actor: op.Initiator}
	}
	if op.Target != "" {
		f.Target = &sflow.AppTarget{Actor: op.Target}
	}
	if op.Local.IsValid() && op.Remote.IsValid() {
		proto := op.Protocol
		if proto == 0 {
			proto = 6
		}
		setSocket(f, proto, op.Local, op.Remote)
	}
	if err := s.r.ReportFlow(f); err != nil {
		s.ReportErrors.Add(1)
		return err
	}
	return nil
}

// SendCounters sends the app_operations counts (from Count) with the
// optional resources and workers.
func (s *Service) SendCounters(res *sflow.AppResources, workers *sflow.AppWorkers) error {
	ops := &sflow.AppOperations{Application: s.name}
	for i, p := range []*uint32{&ops.Success, &ops.Other, &ops.Timeout, &ops.InternalError, &ops.BadRequest,
		&ops.Forbidden, &ops.TooLarge, &ops.NotImplemented, &ops.NotFound, &ops.Unavailable, &ops.Unauthorized} {
		*p = s.count[i].Load()
	}
	c := &app.CounterSample{AppName: s.name, ServicePort: s.port, Operations: ops, Resources: res, Workers: workers}
	if err := s.r.ReportCounters(c); err != nil {
		s.ReportErrors.Add(1)
		return err
	}
	return nil
}
