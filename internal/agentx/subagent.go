package agentx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"
)

// Defaults for Config fields left zero.
const (
	DefaultUnixAddress  = "/var/agentx/master" // net-snmp's default agentXSocket
	DefaultTCPAddress   = "127.0.0.1:705"      // RFC 2741 section 8.1: port 705
	DefaultTimeout      = 5 * time.Second
	DefaultPingInterval = 10 * time.Second
	DefaultPriority     = 127 // RFC 2741 section 6.2.3: r.priority default
)

// Reconnect backoff bounds: the delay doubles from minBackoff up to
// maxBackoff, with jitter, and is reset once a session is registered.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Config configures a Subagent.
type Config struct {
	// Network is "unix" (default) or "tcp".
	Network string
	// Address is the master's socket: a path for unix (default
	// /var/agentx/master), host:port for tcp (default 127.0.0.1:705).
	Address string
	// Subtree is the OID registered with the master, e.g.
	// 1.3.6.1.4.1.14706 for the SFLOW-MIB. Required.
	Subtree OID
	// ID is o.id of the Open PDU (identifies the subagent, e.g. its
	// sysObjectID); optional.
	ID OID
	// Description is o.descr of the Open PDU (shown by the master).
	Description string
	// Handler serves the subtree. Required.
	Handler Handler
	// Timeout bounds dialing, each write and the wait for the master's
	// response to Open, Register and Ping. It is also sent as o.timeout,
	// the time the master waits for our responses (rounded to seconds).
	// Default 5 s.
	Timeout time.Duration
	// PingInterval is how often a Ping checks that the master is alive.
	// Default 10 s.
	PingInterval time.Duration
	// Priority is r.priority of the registration (lower wins; RFC 2741
	// section 7.1.5.1). 0 means the RFC default 127.
	Priority uint8
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
}

// Subagent is an AgentX subagent session to a master agent that keeps
// itself registered: it reconnects and registers again whenever the
// connection is lost. Create it with New, start it with Run.
type Subagent struct {
	cfg        Config
	log        *slog.Logger
	connected  atomic.Bool
	sessions   atomic.Uint64
	reconnects atomic.Uint64
	packetID   atomic.Uint32
	// changed holds one token after Connected changed: watchers wait on
	// it instead of polling, so an idle daemon stays asleep.
	changed chan struct{}
}

// New checks cfg, fills in defaults and returns a Subagent ready to Run.
func New(cfg Config) (*Subagent, error) {
	if cfg.Handler == nil {
		return nil, errors.New("agentx: Config.Handler is nil")
	}
	if len(cfg.Subtree) == 0 {
		return nil, errors.New("agentx: Config.Subtree is empty")
	}
	if len(cfg.Subtree) > maxSubIDs {
		return nil, fmt.Errorf("agentx: Config.Subtree has %d sub-identifiers, at most %d", len(cfg.Subtree), maxSubIDs)
	}
	switch cfg.Network {
	case "", "unix":
		cfg.Network = "unix"
		if cfg.Address == "" {
			cfg.Address = DefaultUnixAddress
		}
	case "tcp":
		if cfg.Address == "" {
			cfg.Address = DefaultTCPAddress
		}
	default:
		return nil, fmt.Errorf("agentx: Config.Network %q, want unix or tcp", cfg.Network)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.Priority == 0 {
		cfg.Priority = DefaultPriority
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Subagent{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}, 1)}, nil
}

// Connected reports whether a session is open and the subtree registered.
func (s *Subagent) Connected() bool { return s.connected.Load() }

// Changed returns a channel that receives after Connected changed. It
// holds at most one pending token: a receiver that was away sees one
// token for several changes and reads Connected for the state now.
func (s *Subagent) Changed() <-chan struct{} { return s.changed }

// setConnected records the session state and, when it changed, leaves a
// token on the changed channel (without blocking).
func (s *Subagent) setConnected(v bool) {
	if s.connected.Swap(v) == v {
		return
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Reconnects counts the sessions established after the first one, i.e.
// how often the subagent had to reconnect and register again.
func (s *Subagent) Reconnects() uint64 { return s.reconnects.Load() }

// Run connects to the master, opens a session, registers the subtree and
// serves requests. When the connection is lost (master restart, failed
// Ping, Close from the master) it reconnects with exponential backoff and
// registers again. It returns only when ctx is cancelled, after closing
// the session with a Close PDU (reason shutdown); the result is then nil.
// Call Run once per Subagent.
func (s *Subagent) Run(ctx context.Context) error {
	backoff := minBackoff
	for {
		registered, err := s.session(ctx)
		s.setConnected(false)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			backoff = minBackoff
		}
		// Jitter in [d/2, d) so restarts of many subagents spread out
		// and the delay never exceeds maxBackoff.
		d := backoff/2 + rand.N(backoff/2)
		s.log.Warn("agentx: session lost, reconnecting", "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// readResult is one PDU (or read error) from the connection's reader.
type readResult struct {
	pdu *PDU
	err error
}

// conn is one AgentX session on one connection. Only the goroutine running
// Subagent.session uses it; a second goroutine only reads.
type conn struct {
	s         *Subagent
	c         net.Conn
	in        <-chan readResult
	sessionID uint32
	disp      *dispatcher
	wbuf      []byte
}

// session runs one connection from dial to loss. registered tells whether
// the subtree got registered (so the backoff restarts from its minimum).
func (s *Subagent) session(ctx context.Context) (registered bool, err error) {
	d := net.Dialer{Timeout: s.cfg.Timeout}
	c, err := d.DialContext(ctx, s.cfg.Network, s.cfg.Address)
	if err != nil {
		return false, fmt.Errorf("agentx: dial %s %s: %w", s.cfg.Network, s.cfg.Address, err)
	}
	in := make(chan readResult, 16)
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go readLoop(c, in, done, readerDone)
	cn := &conn{s: s, c: c, in: in, disp: &dispatcher{h: s.cfg.Handler, log: s.log}}
	defer func() {
		close(done)
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("agentx: close: %w", cerr)
		}
		<-readerDone
		cn.disp.reset()
	}()

	if err := cn.open(ctx); err != nil {
		return false, err
	}
	if err := cn.register(ctx); err != nil {
		cn.close(ReasonOther)
		return false, err
	}
	if s.sessions.Add(1) > 1 {
		s.reconnects.Add(1)
	}
	s.setConnected(true)
	s.log.Info("agentx: registered", "address", s.cfg.Address, "subtree", s.cfg.Subtree, "session", cn.sessionID)
	return true, cn.serve(ctx)
}

// readLoop reads PDUs until the connection fails, handing them to in.
// A malformed payload does not stop it (the stream is still in sync).
func readLoop(c net.Conn, in chan<- readResult, done <-chan struct{}, readerDone chan<- struct{}) {
	defer close(readerDone)
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		p, err := ReadPDU(br)
		select {
		case in <- readResult{p, err}:
		case <-done:
			return
		}
		if err != nil && !errors.Is(err, ErrPayload) {
			return
		}
	}
}

func (cn *conn) send(p *PDU) error {
	b, err := p.AppendEncode(cn.wbuf[:0])
	if err != nil {
		return err
	}
	cn.wbuf = b
	if err := cn.c.SetWriteDeadline(time.Now().Add(cn.s.cfg.Timeout)); err != nil {
		return fmt.Errorf("agentx: set write deadline: %w", err)
	}
	if _, err := cn.c.Write(b); err != nil {
		return fmt.Errorf("agentx: write %s: %w", p.Header.Type, err)
	}
	return nil
}

// request sends p (an administrative PDU of ours) and waits for the
// master's Response with the same packetID, serving any requests that
// arrive meanwhile in order.
func (cn *conn) request(ctx context.Context, p *PDU) (*PDU, error) {
	p.Header.Version = 1
	p.Header.SessionID = cn.sessionID
	p.Header.PacketID = cn.s.packetID.Add(1)
	if err := cn.send(p); err != nil {
		return nil, err
	}
	t := time.NewTimer(cn.s.cfg.Timeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, fmt.Errorf("agentx: no response to %s within %v", p.Header.Type, cn.s.cfg.Timeout)
		case r := <-cn.in:
			if r.err == nil && r.pdu.Header.Type == PDUResponse && r.pdu.Header.PacketID == p.Header.PacketID {
				return r.pdu, nil
			}
			if err := cn.handle(r); err != nil {
				return nil, err
			}
		}
	}
}

// open sends agentx-Open (RFC 2741 section 6.2.1) and takes the session
// ID from the response header (section 7.1.1).
func (cn *conn) open(ctx context.Context) error {
	timeout := min((cn.s.cfg.Timeout+time.Second-1)/time.Second, 255)
	resp, err := cn.request(ctx, &PDU{
		Header:  Header{Type: PDUOpen},
		Timeout: uint8(timeout),
		ID:      cn.s.cfg.ID,
		Descr:   cn.s.cfg.Description,
	})
	if err != nil {
		return fmt.Errorf("agentx: open: %w", err)
	}
	if resp.Error != NoError {
		return fmt.Errorf("agentx: open refused: %s", resp.Error)
	}
	cn.sessionID = resp.Header.SessionID
	return nil
}

// register sends agentx-Register for the subtree (RFC 2741 section 6.2.3).
func (cn *conn) register(ctx context.Context) error {
	resp, err := cn.request(ctx, &PDU{
		Header:   Header{Type: PDURegister},
		Priority: cn.s.cfg.Priority,
		Subtree:  cn.s.cfg.Subtree,
	})
	if err != nil {
		return fmt.Errorf("agentx: register %s: %w", cn.s.cfg.Subtree, err)
	}
	if resp.Error != NoError {
		return fmt.Errorf("agentx: register %s refused: %s", cn.s.cfg.Subtree, resp.Error)
	}
	return nil
}

// close sends agentx-Close and waits briefly for its response (RFC 2741
// section 7.1.8); errors only get logged, the connection is dropped anyway.
func (cn *conn) close(reason CloseReason) {
	ctx, cancel := context.WithTimeout(context.Background(), min(cn.s.cfg.Timeout, time.Second))
	defer cancel()
	if _, err := cn.request(ctx, &PDU{Header: Header{Type: PDUClose}, Reason: reason}); err != nil {
		cn.s.log.Debug("agentx: close", "err", err)
	}
}

// serve answers requests until the connection fails or ctx is cancelled,
// pinging the master every PingInterval.
func (cn *conn) serve(ctx context.Context) error {
	ping := time.NewTicker(cn.s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			cn.close(ReasonShutdown)
			return ctx.Err()
		case <-ping.C:
			resp, err := cn.request(ctx, &PDU{Header: Header{Type: PDUPing}})
			if err != nil {
				if ctx.Err() != nil {
					cn.close(ReasonShutdown)
					return ctx.Err()
				}
				return fmt.Errorf("agentx: ping: %w", err)
			}
			if resp.Error != NoError {
				return fmt.Errorf("agentx: ping answered %s", resp.Error)
			}
		case r := <-cn.in:
			if err := cn.handle(r); err != nil {
				return err
			}
		}
	}
}

// handle processes one PDU from the master outside of a request/response
// wait. A returned error ends the session.
func (cn *conn) handle(r readResult) error {
	if r.err != nil {
		if errors.Is(r.err, ErrPayload) && r.pdu != nil && needsResponse(r.pdu.Header.Type) {
			// RFC 2741 section 7.1.1: a PDU that cannot be parsed is
			// answered with parseError; the stream itself is intact.
			cn.s.log.Warn("agentx: malformed PDU from master", "err", r.err)
			return cn.send(&PDU{Header: responseHeader(r.pdu.Header), Error: ParseError})
		}
		if errors.Is(r.err, ErrPayload) {
			return nil
		}
		return r.err
	}
	h := r.pdu.Header
	switch h.Type {
	case PDUResponse:
		// A late answer to a request that already timed out.
		cn.s.log.Debug("agentx: unexpected response", "packet", h.PacketID)
		return nil
	case PDUClose:
		return fmt.Errorf("agentx: master closed the session (reason %d)", r.pdu.Reason)
	}
	if h.SessionID != cn.sessionID {
		return cn.send(&PDU{Header: responseHeader(h), Error: NotOpen})
	}
	if resp := cn.disp.handle(r.pdu); resp != nil {
		return cn.send(resp)
	}
	return nil
}

func needsResponse(t PDUType) bool {
	return t != PDUResponse && t != PDUCleanupSet && t != PDUClose
}

func responseHeader(req Header) Header {
	return Header{
		Version:       1,
		Type:          PDUResponse,
		SessionID:     req.SessionID,
		TransactionID: req.TransactionID,
		PacketID:      req.PacketID,
	}
}
