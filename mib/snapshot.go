package mib

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Snapshot is what SNMP managers set in the MIB: the receivers they own
// and the sampler and poller rows bound to those receivers. The daemon
// keeps it in its state directory after every change (Config.Persist) and
// gives it back to the MIB of its next program when that program takes
// the samplers over (an upgrade in place, a restart after a crash), so a
// manager's configuration lives on with the samplers. Static receivers
// and their rows come from the configuration and are not in it.
type Snapshot struct {
	Receivers []SnapshotReceiver `json:"receivers,omitempty"`
	Samplers  []SnapshotRow      `json:"samplers,omitempty"`
	Pollers   []SnapshotRow      `json:"pollers,omitempty"`
}

// SnapshotReceiver is an SNMP-owned sFlowRcvrTable row.
type SnapshotReceiver struct {
	Index int    `json:"index"`
	Owner string `json:"owner"`
	// Remaining is the time left of sFlowRcvrTimeout when the snapshot was
	// taken.
	Remaining       time.Duration `json:"remaining"`
	MaxDatagramSize int32         `json:"max_datagram_size"`
	AddressType     int32         `json:"address_type"`
	Address         []byte        `json:"address"`
	Port            int32         `json:"port"`
	Version         int32         `json:"version"`
}

// SnapshotRow is a sampler (Value: the rate, Header: the header size) or
// poller (Value: the interval in seconds) row bound to an SNMP-owned
// receiver.
type SnapshotRow struct {
	Source   sflow.DataSource `json:"source"`
	Instance int              `json:"instance"`
	Receiver int32            `json:"receiver"`
	Value    int32            `json:"value"`
	Header   int32            `json:"header,omitempty"`
}

// Export returns the MIB's SNMP-set part now.
func (m *MIB) Export() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot(m.cur)
}

// snapshot is Export of s. Called with mu held.
func (m *MIB) snapshot(s *state) Snapshot {
	var snap Snapshot
	now := m.cfg.Now()
	owned := map[int32]bool{}
	for i, r := range s.rcv {
		if r.owner == "" || r.static {
			continue
		}
		owned[int32(i+1)] = true
		snap.Receivers = append(snap.Receivers, SnapshotReceiver{Index: i + 1, Owner: r.owner,
			Remaining: max(r.deadline.Sub(now), 0), MaxDatagramSize: r.maxSize, AddressType: r.addrType,
			Address: slices.Clone(r.addr), Port: r.port, Version: r.version})
	}
	for _, src := range s.src {
		for j, f := range src.fs {
			if owned[f.receiver] {
				snap.Samplers = append(snap.Samplers, SnapshotRow{Source: src.ds, Instance: j + 1, Receiver: f.receiver, Value: f.rate, Header: f.header})
			}
		}
		for j, p := range src.cp {
			if owned[p.receiver] {
				snap.Pollers = append(snap.Pollers, SnapshotRow{Source: src.ds, Instance: j + 1, Receiver: p.receiver, Value: p.interval})
			}
		}
	}
	return snap
}

// Import installs a Snapshot of an earlier program's MIB: its receivers at
// once (rows that are free now; a row taken by a static receiver stays
// static), and its sampler and poller rows as their data sources appear
// (SetPorts), each bound to its receiver if that receiver is still
// owned. Expired receivers and rows of instances the MIB does not have
// are ignored. Every row is checked as a SET of it would be (restore.go):
// a row a SET would refuse is dropped and returned in refused; the rest
// is installed. An error means the agent refused the restored rows as a
// whole: none is installed, the MIB stays as it was.
func (m *MIB) Import(snap Snapshot) (refused []RefusedRow, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.cur.clone()
	now := m.cfg.Now()
	for _, r := range snap.Receivers {
		if r.Index < 1 || r.Index > len(next.rcv) {
			refused = append(refused, RefusedRow{"receiver", fmt.Sprint(r.Index), fmt.Errorf("outside 1..%d", len(next.rcv))})
			continue
		}
		if next.rcv[r.Index-1].owner != "" || r.Remaining <= 0 {
			continue
		}
		rc, err := restoredReceiver(r, len(next.rcv), now)
		if err != nil {
			refused = append(refused, RefusedRow{"receiver", fmt.Sprint(r.Index), err})
			continue
		}
		next.rcv[r.Index-1] = rc
	}
	imported := map[snapshotKey]SnapshotRow{}
	for _, rows := range []struct {
		table   string
		rows    []SnapshotRow
		sampler bool
	}{{"sampler", snap.Samplers, true}, {"poller", snap.Pollers, false}} {
		for _, row := range rows.rows {
			k := snapshotKey{row.Source, row.Instance, rows.sampler}
			if _, dup := imported[k]; dup {
				refused = append(refused, RefusedRow{rows.table, fmt.Sprintf("%s.%d", row.Source, row.Instance), errors.New("given twice")})
				continue
			}
			checked, err := restoredRow(row, rows.sampler, len(next.rcv))
			if err != nil {
				refused = append(refused, RefusedRow{rows.table, fmt.Sprintf("%s.%d", row.Source, row.Instance), err})
				continue
			}
			imported[k] = checked
		}
	}
	prev := m.imported
	m.imported = imported
	for i := range next.src {
		m.restoreRows(next, &next.src[i])
	}
	if err := m.install(next, false); err != nil {
		m.imported = prev
		return refused, err
	}
	return refused, nil
}

// snapshotKey identifies an imported row: data source, instance, and
// whether it is a sampler (or a poller).
type snapshotKey struct {
	ds       sflow.DataSource
	instance int
	sampler  bool
}

// restoreRows binds the imported rows of src's data source, once, to
// their receivers if those are owned over SNMP in s. Called with mu held.
func (m *MIB) restoreRows(s *state, src *source) {
	if len(m.imported) == 0 {
		return
	}
	owned := func(r int32) bool {
		return r >= 1 && int(r) <= len(s.rcv) && s.rcv[r-1].owner != "" && !s.rcv[r-1].static
	}
	for j := range src.fs {
		k := snapshotKey{src.ds, j + 1, true}
		if row, ok := m.imported[k]; ok {
			delete(m.imported, k)
			if owned(row.Receiver) && src.fs[j].receiver == 0 {
				src.fs[j] = sampler{receiver: row.Receiver, rate: row.Value, header: row.Header}
			}
		}
	}
	for j := range src.cp {
		k := snapshotKey{src.ds, j + 1, false}
		if row, ok := m.imported[k]; ok {
			delete(m.imported, k)
			if owned(row.Receiver) && src.cp[j].receiver == 0 {
				src.cp[j] = poller{receiver: row.Receiver, interval: row.Value}
			}
		}
	}
}
