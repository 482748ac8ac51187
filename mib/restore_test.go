package mib

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestHostileRestoredRows: a snapshot file another process wrote (the
// state directory's snmp.json) is restored only as far as SETs of its
// rows would be accepted. Rows a SET refuses (a collector at this host's
// SNMP port, an address of 5 octets, a negative rate, an instance or
// receiver out of range) are dropped and returned; a header size of 5 is
// adjusted as a SET adjusts it; the rest is installed, and the static
// receiver's samplers keep running. Before, the rows were installed
// unchecked: 127.0.0.1:161 received datagrams, and a header size the
// agent refuses made this and every later configuration fail whole.
func TestHostileRestoredRows(t *testing.T) {
	m := newTestMIB(t, 0, 1)
	eth := func(i uint32) sflow.DataSource { return sflow.DataSource{Index: i} }
	snap := Snapshot{
		Receivers: []SnapshotReceiver{
			{Index: 2, Owner: "manager", Remaining: time.Minute, MaxDatagramSize: 1400, AddressType: 1, Address: []byte{198, 18, 0, 2}, Port: 6343, Version: 5},
			{Index: 3, Owner: "snmpd", Remaining: time.Minute, MaxDatagramSize: 1400, AddressType: 1, Address: []byte{127, 0, 0, 1}, Port: 161, Version: 5},
			{Index: 4, Owner: "short", Remaining: time.Minute, MaxDatagramSize: 1400, AddressType: 1, Address: []byte{198, 18, 0, 4, 0}, Port: 6343, Version: 5},
			{Index: 5, Owner: "huge", Remaining: time.Minute, MaxDatagramSize: 1 << 20, AddressType: 1, Address: []byte{198, 18, 0, 5}, Port: 6343, Version: 5},
			{Index: 99, Owner: "far", Remaining: time.Minute, MaxDatagramSize: 1400, AddressType: 1, Address: []byte{198, 18, 0, 9}, Port: 6343, Version: 5},
		},
		Samplers: []SnapshotRow{
			{Source: eth(1), Instance: 2, Receiver: 2, Value: 256, Header: 5},
			{Source: eth(2), Instance: 2, Receiver: 2, Value: -1, Header: 128},
			{Source: eth(3), Instance: 2, Receiver: 3, Value: 256, Header: 128}, // its receiver is refused
			{Source: eth(4), Instance: 2, Receiver: 77, Value: 256, Header: 128},
		},
		Pollers: []SnapshotRow{
			{Source: eth(1), Instance: 3, Receiver: 2, Value: 10},
			{Source: eth(2), Instance: 3, Receiver: 2, Value: -5},
		},
	}
	refused, err := m.Import(snap)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	got := map[string]bool{}
	for _, r := range refused {
		got[r.Table+" "+r.Row] = true
		t.Logf("refused: %v", r)
	}
	for _, want := range []string{"receiver 3", "receiver 4", "receiver 5", "receiver 99", "sampler 0:2.2", "sampler 0:4.2", "poller 0:2.3"} {
		if !got[want] {
			t.Errorf("%s not refused (refused: %v)", want, refused)
		}
	}
	if len(refused) != 7 {
		t.Errorf("%d rows refused, want 7", len(refused))
	}
	ports := []Port{{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000}, {IfIndex: 3, StaticRate: 1000}, {IfIndex: 4, StaticRate: 1000}}
	if err := m.SetPorts(ports); err != nil {
		t.Fatalf("SetPorts after the restore: %v", err)
	}
	cfg := m.rec.last(t)
	for _, r := range cfg.Receivers {
		if r.Address.Addr() == netip.MustParseAddr("127.0.0.1") || r.Index != 1 && r.Index != 2 {
			t.Errorf("receiver %d at %s applied", r.Index, r.Address)
		}
	}
	var restored, static int
	for _, s := range cfg.Samplers {
		switch {
		case s.Receiver == 1:
			static++
		case s.IfIndex == 1 && s.Instance == 2 && s.Receiver == 2 && s.Rate == 256 && s.HeaderBytes == minHeaderSize:
			restored++
		default:
			t.Errorf("sampler applied: %+v", s)
		}
	}
	if restored != 1 || static != 4 {
		t.Errorf("%d restored samplers (want 1: port 1, header 5 adjusted to %d), %d static (want 4): %+v", restored, minHeaderSize, static, cfg.Samplers)
	}
	if !strings.Contains(m.getString(rcvrOID(colRcvrOwner, 2)), "manager") || m.getString(rcvrOID(colRcvrOwner, 3)) != "" {
		t.Errorf("owners after restore: 2 %q, 3 %q", m.getString(rcvrOID(colRcvrOwner, 2)), m.getString(rcvrOID(colRcvrOwner, 3)))
	}
	// Later changes apply.
	if err := m.SetPorts(ports[:2]); err != nil {
		t.Errorf("a later change: %v", err)
	}
}

// TestRefusedConfigurationNotInstalled: a state the agent refuses as a
// whole does not become the MIB's current state (it would make every
// later change fail as well): the MIB keeps reading, and applying, what
// the agent runs.
func TestRefusedConfigurationNotInstalled(t *testing.T) {
	m := newTestMIB(t, 2, 1)
	before := m.rec.count()
	m.rec.mu.Lock()
	m.rec.fail = errors.New("refused whole")
	m.rec.mu.Unlock()
	if err := m.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}}); err == nil {
		t.Fatal("SetPorts with the agent refusing: no error")
	}
	m.rec.mu.Lock()
	m.rec.fail = nil
	m.rec.mu.Unlock()
	if got := len(m.AgentConfig().Samplers); got != 2 {
		t.Errorf("after a refused change the MIB stands for %d samplers, want the 2 the agent runs", got)
	}
	if err := m.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}}); err != nil {
		t.Fatalf("the same change once the agent takes it: %v", err)
	}
	if got := len(m.rec.last(t).Samplers); got != 1 || m.rec.count() != before+1 {
		t.Errorf("applied %d samplers after %d applies, want 1 after %d", got, m.rec.count(), before+1)
	}
}
