package app

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
)

// APM application indexes. apmAppDirAppLocalIndex values must not reuse
// the protocolDirLocalIndex values of ip and ipv6 (1 and 2 by default,
// apm.Config), so applications are numbered from firstAPMApp in the
// order they first report.
const (
	firstAPMApp = 1000
	maxAPMApps  = 1024
)

// DefaultAPMBoundaries are the responsiveness bucket boundaries (ms) of
// the applications the engine adds to the APM directory:
// B1 < 10 ms <= B2 < 50 ms ... B7 >= 5 s.
var DefaultAPMBoundaries = [6]uint32{10, 50, 100, 500, 1000, 5000}

// DefaultAPMReportSize is the rows requested per APM report.
const DefaultAPMReportSize = 1000

// NewAPM returns an APM engine with one report control per aggregation
// type (control 1 flows, 2 clients, 3 servers, 4 applications), each
// closing a report every interval (whole seconds) and keeping the last
// reports reports.
func NewAPM(interval time.Duration, reports uint32, start time.Time) (*apm.Engine, error) {
	e := apm.NewEngine(apm.Config{})
	for i, agg := range []apm.Aggregation{apm.Flows, apm.Clients, apm.Servers, apm.Applications} {
		_, err := e.AddControl(apm.ReportControl{
			Index:            uint32(i + 1),
			Aggregation:      agg,
			Interval:         interval,
			RequestedSize:    DefaultAPMReportSize,
			RequestedReports: reports,
			Owner:            "sflowswitchd",
		}, start)
		if err != nil {
			return nil, fmt.Errorf("apm report control %v: %w", agg, err)
		}
	}
	return e, nil
}

// apmApp returns the APM application index of name, adding it to the
// directory on first use; 0 when the directory is full.
func (e *Engine) apmApp(name string) uint32 {
	if idx, ok := e.apmApps[name]; ok {
		return idx
	}
	if len(e.apmApps) >= maxAPMApps {
		return 0
	}
	idx := uint32(firstAPMApp + len(e.apmApps))
	err := e.cfg.APM.SetAppDir(apm.AppDirEntry{App: idx, Type: apm.TransactionOriented, Name: name, On: true, Boundaries: DefaultAPMBoundaries})
	if err != nil {
		e.log.Error("apm: adding application", "app", name, "err", err)
		return 0
	}
	e.apmApps[name] = idx
	return idx
}

// feedAPM adds the sampled transaction f to the APM reports, weighted by
// its sampling rate. The server is the local end of a server-side
// transaction and the remote end of a client-side one. Availability
// (RFC 3729 section 2): an app_operation succeeded when its status is
// SUCCESS; an HTTP request when a response was given and it is not a
// server error (status 1..499).
func (e *Engine) feedAPM(f *FlowSample, now time.Time) {
	if e.cfg.APM == nil {
		return
	}
	var local, remote netip.Addr
	switch {
	case f.Socket4 != nil:
		local, remote = f.Socket4.LocalIP, f.Socket4.RemoteIP
	case f.Socket6 != nil:
		local, remote = f.Socket6.LocalIP, f.Socket6.RemoteIP
	}
	client, server := remote, local
	if f.Client {
		client, server = local, remote
	}
	var us uint32
	var ok bool
	if f.Operation != nil {
		us, ok = f.Operation.DurationUS, f.Operation.Status == 0
	} else {
		us, ok = f.HTTP.DurationUS, f.HTTP.Status > 0 && f.HTTP.Status < 500
	}
	app := e.apmApp(f.AppName)
	if app == 0 {
		e.stats.APMSkipped.Add(1)
		return
	}
	d := time.Duration(us) * time.Microsecond
	err := e.cfg.APM.Add(apm.Transaction{
		App: app, Type: apm.TransactionOriented,
		Client: client, Server: server,
		Start:          now.Add(-d),
		Responsiveness: apm.Milliseconds(d),
		Success:        ok,
		Weight:         uint64(f.SamplingRate),
	})
	if err != nil {
		e.stats.APMSkipped.Add(1)
		return
	}
	e.stats.APMAdded.Add(1)
}
