// Package appsubagent runs the application sub-agent (apps/app): the
// local JSON API (hsflowd's mod_json messages) feeding the app engine,
// which sends to the daemon's receivers and computes the RFC 3729 APM
// reports, served as JSON on GET /apm.
package appsubagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/config"
)

// Defaults of the APM reports computed from application transactions.
const (
	defaultAPMInterval = 60 * time.Second
	defaultAPMReports  = 60
)

// Config is the application sub-agent's part of the settings.
type Config struct {
	// API is the UDP address of the local JSON API (loopback only, e.g.
	// app.DefaultAPIAddress); empty = off.
	API string
	// AllowRemote lets API be a non-loopback address (warned).
	AllowRemote bool
	// APMInterval is the APM report interval (whole seconds;
	// 0 = defaultAPMInterval); APMReports the reports kept per report
	// control (0 = defaultAPMReports).
	APMInterval time.Duration
	APMReports  int
	// StateFile keeps the data source indexes of applications without a
	// service port across restarts ("" = memory only).
	StateFile string
}

// Subagent is the running application sub-agent (apps/app): the local
// JSON API feeding the app engine, which sends to the daemon's receivers
// and computes the APM reports. A nil *Subagent (API off) accepts every
// call and does nothing, so the daemon can call it unconditionally.
type Subagent struct {
	engine *app.Engine
	apm    *apm.Engine
	api    netip.AddrPort
	// conn is the API socket, for its kernel drop counter; conn6 the
	// IPv6 loopback twin (see Start), nil when absent.
	conn  *net.UDPConn
	conn6 *net.UDPConn
}

// Start starts the application sub-agent when c.API is set; it stops
// with ctx. It returns nil, nil when the API is off.
func Start(ctx context.Context, c Config, log *slog.Logger) (*Subagent, error) {
	if c.API == "" {
		return nil, nil
	}
	if c.APMInterval == 0 {
		c.APMInterval = defaultAPMInterval
	}
	if c.APMReports == 0 {
		c.APMReports = defaultAPMReports
	}
	if c.APMReports < 0 || c.APMReports > 65535 {
		return nil, fmt.Errorf("apm reports %d: must be 1..65535", c.APMReports)
	}
	ae, err := app.NewAPM(c.APMInterval, uint32(c.APMReports), time.Now())
	if err != nil {
		return nil, err
	}
	listen := app.ListenJSON
	if c.AllowRemote {
		listen = app.ListenJSONExposed
		config.WarnExposed(log, "app_api", c.API)
	}
	conn, err := listen(c.API)
	if err != nil {
		return nil, err
	}
	// Room for a burst of messages while the engine catches up; beyond
	// it the kernel drops (a flood must not grow our memory).
	if err := conn.SetReadBuffer(1 << 20); err != nil {
		conn.Close()
		return nil, fmt.Errorf("app API: receive buffer: %w", err)
	}
	a := &Subagent{
		engine: app.New(app.Config{APM: ae, Logger: log, StateFile: c.StateFile}),
		apm:    ae,
		conn:   conn,
		api:    conn.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort(),
	}
	// hsflowd listens on 127.0.0.1 and ::1 (mod_json.c): its example
	// sender and modules address "localhost", which resolves to ::1
	// first on most systems. Listen on both, as it does, when the API is
	// on 127.0.0.1; a host without IPv6 just has the one socket.
	if a.api.Addr() == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && !c.AllowRemote {
		six := netip.AddrPortFrom(netip.IPv6Loopback(), a.api.Port()).String()
		if a.conn6, err = app.ListenJSON(six); err != nil {
			log.Info("application API: no IPv6 loopback socket", "addr", six, "err", err)
			a.conn6 = nil
		} else if err := a.conn6.SetReadBuffer(1 << 20); err != nil {
			conn.Close()
			a.conn6.Close()
			return nil, fmt.Errorf("app API: receive buffer: %w", err)
		}
	}
	go a.engine.Run(ctx)
	for _, c := range a.Conns() {
		go func() {
			if err := a.engine.ServeJSON(ctx, c.(*net.UDPConn)); err != nil {
				log.Error("application API stopped", "err", err)
			}
		}()
	}
	log.Info("application API listening", "addr", a.api.String(), "ipv6_loopback", a.conn6 != nil)
	return a, nil
}

// Conns returns the API sockets (for serving and their drop counters).
func (a *Subagent) Conns() []syscall.Conn {
	out := []syscall.Conn{a.conn}
	if a.conn6 != nil {
		out = append(out, a.conn6)
	}
	return out
}

// StateFile is the file keeping the data source indexes of applications
// without a service port, in the state directory dir ("" = none).
func StateFile(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "apps.json")
}

// SetReceivers gives the application data sources the daemon's
// receivers.
func (a *Subagent) SetReceivers(rs []agent.ReceiverConfig) {
	if a != nil {
		a.engine.SetReceivers(rs)
	}
}

// SetAgentAddress sets the agent address of the application datagrams.
func (a *Subagent) SetAgentAddress(addr netip.Addr) {
	if a != nil {
		a.engine.SetAgentAddress(addr)
	}
}

// APMSnapshot is the JSON document of GET /apm (and `sflowswitchd apm`).
type APMSnapshot struct {
	// Controls are the report controls (RFC 3729 apmReportControlTable).
	Controls []apm.ControlStatus `json:"controls"`
	// Applications is the application directory (apmAppDirTable).
	Applications []apm.AppDirEntry `json:"applications"`
	// Reports are the kept reports of every control (oldest first per
	// control), or only the latest one of each with ?last=1.
	Reports []apm.Report `json:"reports"`
}

// ServeAPM serves the APM reports as JSON (the /apm path of the metrics
// listener). Query: control=N restricts to one report control
// (1 flows, 2 clients, 3 servers, 4 applications); last=1 gives only the
// latest closed report of each.
func (a *Subagent) ServeAPM(w http.ResponseWriter, r *http.Request) {
	if a == nil {
		http.Error(w, "the application API is off (-app-api)", http.StatusNotFound)
		return
	}
	var only uint32
	if s := r.URL.Query().Get("control"); s != "" {
		v, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			http.Error(w, "control: "+err.Error(), http.StatusBadRequest)
			return
		}
		only = uint32(v)
	}
	last := r.URL.Query().Get("last") == "1"
	snap := APMSnapshot{Applications: a.apm.AppDir(), Controls: []apm.ControlStatus{}, Reports: []apm.Report{}}
	for _, c := range a.apm.Controls() {
		if only != 0 && c.Index != only {
			continue
		}
		snap.Controls = append(snap.Controls, c)
		reps, _ := a.apm.Reports(c.Index)
		if last && len(reps) > 1 {
			reps = reps[len(reps)-1:]
		}
		snap.Reports = append(snap.Reports, reps...)
	}
	if snap.Applications == nil {
		snap.Applications = []apm.AppDirEntry{}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&snap); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// Engine is the app engine (its statistics, for metrics and the daemon's
// per-collector figures).
func (a *Subagent) Engine() *app.Engine { return a.engine }

// APM is the APM engine (for the APM-MIB).
func (a *Subagent) APM() *apm.Engine { return a.apm }

// APMURL is the address of the /apm document served by the daemon's
// metrics listener at addr: of report control only (0 = every one), only
// the latest report of each when last.
func APMURL(addr string, control uint16, last bool) string {
	q := url.Values{}
	if control != 0 {
		q.Set("control", strconv.FormatUint(uint64(control), 10))
	}
	if last {
		q.Set("last", "1")
	}
	u := url.URL{Scheme: "http", Host: addr, Path: "/apm", RawQuery: q.Encode()}
	return u.String()
}

// FetchAPM gets the /apm document at u (APMURL) and writes it indented
// to out: the client side of ServeAPM (`sflowswitchd apm`).
func FetchAPM(ctx context.Context, u string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return fmt.Errorf("%s: not JSON: %w", u, err)
	}
	if _, err := buf.WriteTo(out); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	return nil
}
