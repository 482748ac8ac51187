package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// agentxPDU builds a little-endian AgentX PDU (RFC 2741 section 6.1) with
// any header fields and payload, valid or not.
func agentxPDU(version uint8, typ agentx.PDUType, flags uint8, session, packet uint32, length uint32, payload []byte) []byte {
	le := binary.LittleEndian
	b := []byte{version, byte(typ), flags, 0}
	b = le.AppendUint32(b, session)
	b = le.AppendUint32(b, 7)
	b = le.AppendUint32(b, packet)
	b = le.AppendUint32(b, length)
	return append(b, payload...)
}

// oidPayload is an AgentX OID: n_subid, prefix, include, reserved, then
// the sub-identifiers.
func oidPayload(subids ...uint32) []byte {
	b := []byte{byte(len(subids)), 0, 0, 0}
	for _, s := range subids {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return b
}

// fakeMaster is an AgentX master on a unix socket that accepts the
// daemon's sessions and answers Open and Register.
type fakeMaster struct {
	ln      net.Listener
	session uint32
}

// accept waits for the daemon's next session and answers its Open and
// Register.
func (m *fakeMaster) accept(t *testing.T, timeout time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	m.ln.(*net.UnixListener).SetDeadline(time.Now().Add(timeout))
	c, err := m.ln.Accept()
	if err != nil {
		t.Fatalf("no AgentX session from the daemon within %v: %v", timeout, err)
	}
	m.session++
	r := bufio.NewReader(c)
	for _, want := range []agentx.PDUType{agentx.PDUOpen, agentx.PDURegister} {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		p, err := agentx.ReadPDU(r)
		if err != nil || p.Header.Type != want {
			t.Fatalf("master: got %v, %v; want %s", p, err, want)
		}
		resp := &agentx.PDU{Header: agentx.Header{Version: 1, Type: agentx.PDUResponse, SessionID: m.session,
			TransactionID: p.Header.TransactionID, PacketID: p.Header.PacketID}}
		b, err := resp.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatalf("master: %v", err)
		}
	}
	return c, r
}

// TestHostileAgentXMaster (the 14 kinds of malformed AgentX PDU that
// already held, kept as bounds): a master (anyone who can take the
// AgentX socket's place) sending malformed PDUs gets a parseError or
// loses the session, which the daemon opens again; the daemon's
// goroutines, descriptors and memory stay flat and it goes on sampling.
func TestHostileAgentXMaster(t *testing.T) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	sock := filepath.Join(t.TempDir(), "master")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m := &fakeMaster{ln: ln}
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p1", "-polling", "0",
		"-sampling", "10", "-agentx", "unix:"+sock)
	d.waitReady(t, lab, "p1")
	c, r := m.accept(t, 10*time.Second)
	pid := d.cmd.Process.Pid
	base := mustFetchMetrics(t, lab)
	g0, _ := base.value("go_goroutines")
	fds0, _, _ := fdsThreads(pid)
	hwm0 := usage(t, pid).HWM
	sflow := []uint32{1, 3, 6, 1, 4, 1, 14706}
	cases := []struct {
		name string
		pdu  func(session uint32) []byte
	}{
		{"version 2", func(s uint32) []byte { return agentxPDU(2, agentx.PDUGet, 0, s, 1, 0, nil) }},
		{"unknown type 99", func(s uint32) []byte { return agentxPDU(1, 99, 0, s, 2, 0, nil) }},
		{"payload length 2^32-1", func(s uint32) []byte { return agentxPDU(1, agentx.PDUGet, 0, s, 3, 0xFFFFFFFF, nil) }},
		{"payload length 1 MiB + 4", func(s uint32) []byte { return agentxPDU(1, agentx.PDUGet, 0, s, 4, 1<<20+4, nil) }},
		{"OID of 200 sub-identifiers", func(s uint32) []byte {
			p := append(oidPayload(make([]uint32, 200)...), 0, 0, 0, 0)
			return agentxPDU(1, agentx.PDUGet, 0, s, 5, uint32(len(p)), p)
		}},
		{"OID longer than the payload", func(s uint32) []byte {
			p := []byte{10, 0, 0, 0, 1, 0, 0, 0}
			return agentxPDU(1, agentx.PDUGet, 0, s, 6, uint32(len(p)), p)
		}},
		{"GetBulk of 65535 repetitions over the whole MIB", func(s uint32) []byte {
			p := []byte{0, 0, 0xff, 0xff}
			p = append(p, oidPayload(sflow...)...)
			p = append(p, 0, 0, 0, 0)
			return agentxPDU(1, agentx.PDUGetBulk, 0, s, 7, uint32(len(p)), p)
		}},
		{"varbind of type 99", func(s uint32) []byte {
			p := []byte{99, 0, 0, 0}
			p = append(p, oidPayload(append(sflow, 1, 2, 1, 3, 1)...)...)
			return agentxPDU(1, agentx.PDUTestSet, 0, s, 8, uint32(len(p)), p)
		}},
		{"octet string announcing 2^31 bytes", func(s uint32) []byte {
			p := []byte{4, 0, 0, 0}
			p = append(p, oidPayload(append(sflow, 1, 2, 1, 3, 1)...)...)
			p = binary.LittleEndian.AppendUint32(p, 1<<31)
			return agentxPDU(1, agentx.PDUTestSet, 0, s, 9, uint32(len(p)), p)
		}},
		{"context of 2^32-16 bytes", func(s uint32) []byte {
			p := binary.LittleEndian.AppendUint32(nil, 0xFFFFFFF0)
			return agentxPDU(1, agentx.PDUGet, 0x08, s, 10, uint32(len(p)), p)
		}},
		{"Response with an unknown packet id", func(s uint32) []byte {
			p := make([]byte, 8)
			return agentxPDU(1, agentx.PDUResponse, 0, s, 999999, uint32(len(p)), p)
		}},
		{"Notify from the master", func(s uint32) []byte { return agentxPDU(1, agentx.PDUNotify, 0, s, 12, 0, nil) }},
		{"CommitSet without a TestSet", func(s uint32) []byte { return agentxPDU(1, agentx.PDUCommitSet, 0, s, 13, 0, nil) }},
		{"Get with 10000 search ranges", func(s uint32) []byte {
			var p []byte
			for i := 0; i < 10000; i++ {
				p = append(p, oidPayload(sflow...)...)
				p = append(p, 0, 0, 0, 0)
			}
			return agentxPDU(1, agentx.PDUGet, 0, s, 14, uint32(len(p)), p)
		}},
	}
	answered, closed := 0, 0
	var slowest time.Duration
	for _, tc := range cases {
		start := time.Now()
		if _, err := c.Write(tc.pdu(m.session)); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		// The daemon answers (parseError, or an answer) or closes the
		// session; either within 2 s.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := agentx.ReadPDU(r)
		var ne net.Error
		switch {
		case err == nil || errors.Is(err, agentx.ErrPayload):
			answered++
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || !errors.As(err, &ne):
			closed++
			c.Close()
			c, r = m.accept(t, 10*time.Second) // the daemon opens a new session
		default: // timeout: neither answered nor closed
			if tc.name == "Response with an unknown packet id" || tc.name == "Notify from the master" {
				answered++ // ignored, as RFC 2741 allows; the session goes on
				break
			}
			t.Errorf("%s: neither answered nor closed within 2 s: %v", tc.name, err)
		}
		slowest = max(slowest, time.Since(start))
		// Drain what else the daemon sent for it.
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		for {
			if _, err := agentx.ReadPDU(r); err != nil {
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				c.Close()
				c, r = m.accept(t, 10*time.Second)
				break
			}
		}
	}
	c.Close()
	samplesFlow(t, lab, col, "after the malformed PDUs")
	time.Sleep(time.Second)
	mm := mustFetchMetrics(t, lab)
	g1, _ := mm.value("go_goroutines")
	fds1, _, _ := fdsThreads(pid)
	hwm1 := usage(t, pid).HWM
	t.Logf("%d malformed PDUs: %d answered, %d closed the session; slowest %v; goroutines %d → %d, descriptors %d → %d, peak RSS %s → %s",
		len(cases), answered, closed, slowest, g0, g1, fds0, fds1, mib(hwm0), mib(hwm1))
	if g1 > g0+10 {
		t.Errorf("goroutines %d → %d", g0, g1)
	}
	if fds1 > fds0+5 {
		t.Errorf("descriptors %d → %d", fds0, fds1)
	}
	if hwm1 > hwm0+32<<20 {
		t.Errorf("peak RSS %s → %s, bound +32 MiB", mib(hwm0), mib(hwm1))
	}
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("AgentX master sending %d kinds of malformed PDU", len(cases)),
		Bound: "each answered or the session closed (and reopened) within 2 s; goroutines +10, descriptors +5, RSS +32 MiB; sampling goes on",
		Peak:  fmt.Sprintf("%d answered, %d closed, slowest %.0f ms; goroutines %d → %d, fds %d → %d, RSS %s → %s", answered, closed, slowest.Seconds()*1000, g0, g1, fds0, fds1, mib(hwm0), mib(hwm1)),
	})
}
