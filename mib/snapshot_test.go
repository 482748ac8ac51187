package mib

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestSnapshotRoundTrip: what managers set (a receiver with 60 s of
// timeout, a sampler and a poller bound to it) goes through JSON into the
// MIB of the next program, which has no ports yet: the receiver is back at
// once with its remaining time, the rows as their ports appear; static
// receivers are not part of it.
func TestSnapshotRoundTrip(t *testing.T) {
	m := newTestMIB(t, 2, 1)
	m.claim(2, "manager", 6343)
	m.mustSet(integer(fsOID(colFsReceiver, 2, 2), 2), integer(fsOID(colFsRate, 2, 2), 512), integer(fsOID(colFsHeader, 2, 2), 64))
	m.mustSet(integer(cpOID(colCpReceiver, 1, 3), 2), integer(cpOID(colCpInterval, 1, 3), 5))
	var persisted Snapshot
	m.cfg.Persist = func(s Snapshot) { persisted = s }
	m.clock.Advance(10 * time.Second)
	m.mustSet(integer(fsOID(colFsRate, 2, 2), 256))
	snap := m.Export()
	if !reflect.DeepEqual(snap, persisted) {
		t.Errorf("Persist got %+v, Export %+v", persisted, snap)
	}
	if len(snap.Receivers) != 1 || snap.Receivers[0].Index != 2 || snap.Receivers[0].Remaining != 50*time.Second ||
		len(snap.Samplers) != 1 || snap.Samplers[0].Value != 256 || len(snap.Pollers) != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}

	n := newTestMIB(t, 0, 1)
	if refused, err := n.Import(back); err != nil || len(refused) > 0 {
		t.Fatal(refused, err)
	}
	if got := n.getString(rcvrOID(colRcvrOwner, 2)); got != "manager" {
		t.Errorf("receiver 2 owner %q after Import", got)
	}
	if got := n.getInt(rcvrOID(colRcvrTimeout, 2)); got != 50 {
		t.Errorf("receiver 2 timeout %d, want 50", got)
	}
	if err := n.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000}}); err != nil {
		t.Fatal(err)
	}
	if r, rate := n.getInt(fsOID(colFsReceiver, 2, 2)), n.getInt(fsOID(colFsRate, 2, 2)); r != 2 || rate != 256 {
		t.Errorf("sampler 2.2: receiver %d rate %d, want 2 and 256", r, rate)
	}
	if r, iv := n.getInt(cpOID(colCpReceiver, 1, 3)), n.getInt(cpOID(colCpInterval, 1, 3)); r != 2 || iv != 5 {
		t.Errorf("poller 1.3: receiver %d interval %d, want 2 and 5", r, iv)
	}
	cfg := n.rec.last(t)
	found := false
	for _, s := range cfg.Samplers {
		if s.IfIndex == 2 && s.Instance == 2 && s.Rate == 256 && s.Receiver == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("applied configuration lacks the imported sampler: %+v", cfg.Samplers)
	}
	if !reflect.DeepEqual(n.Export(), snap) {
		t.Errorf("export after import %+v, want %+v", n.Export(), snap)
	}
}
