package agentx

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// leResponse builds an agentx-Response in little endian (NETWORK_BYTE_ORDER
// clear), the way a master on a little-endian host may send it.
func leResponse(sessionID uint32, req Header, status ErrorStatus) []byte {
	le := binary.LittleEndian
	b := []byte{1, byte(PDUResponse), 0, 0}
	b = le.AppendUint32(b, sessionID)
	b = le.AppendUint32(b, req.TransactionID)
	b = le.AppendUint32(b, req.PacketID)
	b = le.AppendUint32(b, 8)
	b = le.AppendUint32(b, 0) // sysUpTime
	b = le.AppendUint16(b, uint16(status))
	return le.AppendUint16(b, 0)
}

// leGetNext builds an agentx-GetNext in little endian with one SearchRange
// from start (exclusive, no end).
func leGetNext(sessionID, packetID uint32, start OID) []byte {
	le := binary.LittleEndian
	prefix, subs := compressOID(start)
	payload := []byte{byte(len(subs)), prefix, 0, 0}
	for _, s := range subs {
		payload = le.AppendUint32(payload, s)
	}
	payload = append(payload, 0, 0, 0, 0)
	b := []byte{1, byte(PDUGetNext), 0, 0}
	b = le.AppendUint32(b, sessionID)
	b = le.AppendUint32(b, 77)
	b = le.AppendUint32(b, packetID)
	b = le.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// scriptedMaster plays the master side of one connection: it answers Open
// and Register in little endian, sends one little-endian GetNext and
// checks the answer, then answers Pings only if answerPings.
func scriptedMaster(t *testing.T, c net.Conn, sessionID uint32, answerPings bool, closed chan<- *PDU) {
	defer func() { _ = c.Close() }()
	for _, want := range []PDUType{PDUOpen, PDURegister} {
		p, err := ReadPDU(c)
		if err != nil || p.Header.Type != want {
			t.Errorf("master: got %v, %v; want %s", p, err, want)
			return
		}
		if want == PDURegister && (p.Header.SessionID != sessionID || !p.Subtree.Equal(testBase) || p.Priority != DefaultPriority) {
			t.Errorf("master: register = %+v", p)
		}
		if _, err := c.Write(leResponse(sessionID, p.Header, NoError)); err != nil {
			t.Errorf("master: %v", err)
			return
		}
	}
	// A Get whose SearchRange lacks its end: the header is fine, the
	// payload is not, so the subagent must answer parseError (RFC 2741
	// section 7.1.1) and keep the session.
	badGet := []byte{1, byte(PDUGet), 0, 0}
	badGet = binary.LittleEndian.AppendUint32(badGet, sessionID)
	badGet = binary.LittleEndian.AppendUint32(badGet, 78)
	badGet = binary.LittleEndian.AppendUint32(badGet, 501)
	badGet = binary.LittleEndian.AppendUint32(badGet, 4)
	badGet = append(badGet, 0, 0, 0, 0)
	if _, err := c.Write(append(badGet, leGetNext(sessionID, 500, oidCount)...)); err != nil {
		t.Errorf("master: %v", err)
		return
	}
	answered, parseErr := false, false
	defer func() {
		if !answered || !parseErr {
			t.Errorf("master %d: GetNext answered %v, bad Get answered parseError %v", sessionID, answered, parseErr)
		}
	}()
	for {
		p, err := ReadPDU(c)
		if err != nil {
			return // subagent closed the connection
		}
		switch p.Header.Type {
		case PDUResponse:
			if p.Header.PacketID == 501 {
				parseErr = p.Error == ParseError && p.Header.TransactionID == 78
				continue
			}
			answered = true
			if p.Header.PacketID != 500 || p.Header.TransactionID != 77 || len(p.VarBinds) != 1 ||
				!p.VarBinds[0].Name.Equal(oidOctets) || p.Header.Flags&FlagNetworkByteOrder == 0 {
				t.Errorf("master: getnext response = %+v", p)
			}
		case PDUPing:
			if answerPings {
				if _, err := c.Write(leResponse(sessionID, p.Header, NoError)); err != nil {
					return
				}
			}
		case PDUClose:
			closed <- p
			_, _ = c.Write(leResponse(sessionID, p.Header, NoError))
			return
		default:
			t.Errorf("master: unexpected %s", p.Header.Type)
		}
	}
}

// TestSessionPingTimeoutAndClose: a master that stops answering Pings is
// dropped and the subagent reconnects and registers again; cancelling
// Run sends Close(shutdown).
func TestSessionPingTimeoutAndClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "master")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	closed := make(chan *PDU, 1)
	var masters sync.WaitGroup
	masters.Go(func() {
		for i := uint32(1); ; i++ {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("accept: %v", err)
				}
				return
			}
			// The first master hangs on Ping; the second is healthy.
			masters.Go(func() { scriptedMaster(t, c, 40+i, i > 1, closed) })
		}
	})

	sa, err := New(Config{Address: sock, Subtree: testBase, Handler: newMemHandler(),
		Timeout: 300 * time.Millisecond, PingInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- sa.Run(ctx) }()

	deadline := time.Now().Add(5 * time.Second)
	for sa.Reconnects() < 1 || !sa.Connected() {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no reconnect after ping timeout (reconnects %d)", sa.Reconnects())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // healthy master: pings answered, no further reconnect
	if n := sa.Reconnects(); n != 1 {
		t.Errorf("reconnects = %d with a healthy master, want 1", n)
	}
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case p := <-closed:
		if p.Reason != ReasonShutdown || p.Header.SessionID != 42 {
			t.Errorf("close = %+v", p)
		}
	default:
		t.Error("no Close PDU on shutdown")
	}
	if sa.Connected() {
		t.Error("still connected after Run returned")
	}
	_ = ln.Close()
	masters.Wait()
}

func TestNewConfig(t *testing.T) {
	h := newMemHandler()
	for name, cfg := range map[string]Config{
		"no handler":  {Subtree: testBase},
		"no subtree":  {Handler: h},
		"bad network": {Handler: h, Subtree: testBase, Network: "udp"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	sa, err := New(Config{Handler: h, Subtree: testBase})
	if err != nil {
		t.Fatal(err)
	}
	if sa.cfg.Network != "unix" || sa.cfg.Address != DefaultUnixAddress || sa.cfg.Priority != DefaultPriority {
		t.Errorf("defaults = %+v", sa.cfg)
	}
	sa, err = New(Config{Handler: h, Subtree: testBase, Network: "tcp"})
	if err != nil || sa.cfg.Address != DefaultTCPAddress {
		t.Errorf("tcp default = %v, %v", sa, err)
	}
}
