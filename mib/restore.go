package mib

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// A Snapshot is read from a file (the state directory's snmp.json) that
// another process may have written: every restored row is checked as a
// SET of its columns would be (checkValue: type, length and range of each
// value, adjusted to the closest supported value where a SET is; then the
// consistency rules of stageReceivers and stageRows), and a row a SET
// would refuse is dropped, never installed. One bad row must not make
// every later configuration fail to apply.

// RefusedRow is a row of an imported Snapshot that was dropped, and why.
type RefusedRow struct {
	// Table is "receiver", "sampler" or "poller".
	Table string
	// Row names the row: the receiver index, or data source.instance.
	Row string
	Err error
}

func (r RefusedRow) Error() string { return fmt.Sprintf("%s %s: %v", r.Table, r.Row, r.Err) }

// checkColumn checks one value as a SET of column col of table tab with
// it would be, and returns it as the SET would install it.
func checkColumn(tab table, col uint32, v agentx.Variable, receivers int) (edit, error) {
	e, st := checkValue(key{tab: tab, col: col}, v, receivers)
	if st != agentx.NoError {
		return e, fmt.Errorf("%s %v: %v", columnName(tab, col), v.Value, st)
	}
	return e, nil
}

func octetValue(b []byte) agentx.Variable { return agentx.Variable{Type: agentx.OctetString, Value: b} }

func integer32(n int64) (agentx.Variable, error) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return agentx.Variable{}, fmt.Errorf("%d outside Integer32", n)
	}
	return agentx.Variable{Type: agentx.Integer, Value: int32(n)}, nil
}

// restoredReceiver checks a restored receiver row as the SET that claims
// it with all its columns would be checked, and returns the row.
func restoredReceiver(r SnapshotReceiver, receivers int, now time.Time) (receiver, error) {
	var rc receiver
	if r.Owner == "" {
		return rc, errors.New("no owner")
	}
	e, err := checkColumn(tRcvr, colRcvrOwner, octetValue([]byte(r.Owner)), receivers)
	if err != nil {
		return rc, err
	}
	rc.owner = string(e.b)
	secs := int64((r.Remaining + time.Second - 1) / time.Second)
	tv, err := integer32(secs)
	if err != nil {
		return rc, fmt.Errorf("timeout: %w", err)
	}
	if _, err := checkColumn(tRcvr, colRcvrTimeout, tv, receivers); err != nil {
		return rc, err
	}
	rc.deadline = now.Add(r.Remaining)
	for _, c := range []struct {
		col uint32
		n   int32
		to  *int32
	}{
		{colRcvrMaxSize, r.MaxDatagramSize, &rc.maxSize},
		{colRcvrAddrTyp, r.AddressType, &rc.addrType},
		{colRcvrPort, r.Port, &rc.port},
		{colRcvrVersion, r.Version, &rc.version},
	} {
		e, err := checkColumn(tRcvr, c.col, agentx.Variable{Type: agentx.Integer, Value: c.n}, receivers)
		if err != nil {
			return rc, err
		}
		*c.to = e.n
	}
	if e, err = checkColumn(tRcvr, colRcvrAddress, octetValue(r.Address), receivers); err != nil {
		return rc, err
	}
	rc.addr = slices.Clone(e.b)
	if len(rc.addr) != addressLength(rc.addrType) {
		return rc, fmt.Errorf("address of %d octets for address type %d", len(rc.addr), rc.addrType)
	}
	// As stageReceivers: unicast, not this host's SNMP/AgentX port;
	// 0.0.0.0 and :: mean "send nothing".
	if a, _ := netip.AddrFromSlice(rc.addr); !a.IsUnspecified() {
		if err := agent.CheckCollectorAddress(netip.AddrPortFrom(a, uint16(rc.port))); err != nil {
			return rc, err
		}
	}
	return rc, nil
}

// restoredRow checks a restored sampler (sampler true) or poller row as
// the SET of its columns would be, and returns the row's values as the
// SET would install them (a header size adjusted into range).
func restoredRow(row SnapshotRow, sampler bool, receivers int) (SnapshotRow, error) {
	tab, valueCol := tCp, uint32(colCpInterval)
	if sampler {
		tab, valueCol = tFs, colFsRate
	}
	if row.Instance < 1 {
		return row, fmt.Errorf("instance %d", row.Instance)
	}
	if row.Receiver == 0 {
		return row, errors.New("bound to no receiver")
	}
	if _, err := checkColumn(tab, colFsReceiver, agentx.Variable{Type: agentx.Integer, Value: row.Receiver}, receivers); err != nil {
		return row, err
	}
	if _, err := checkColumn(tab, valueCol, agentx.Variable{Type: agentx.Integer, Value: row.Value}, receivers); err != nil {
		return row, err
	}
	if sampler {
		e, err := checkColumn(tFs, colFsHeader, agentx.Variable{Type: agentx.Integer, Value: row.Header}, receivers)
		if err != nil {
			return row, err
		}
		row.Header = e.n
	} else if row.Header != 0 {
		return row, fmt.Errorf("header size %d on a poller", row.Header)
	}
	return row, nil
}

// columnName names a writable column (SFLOW-MIB) in errors.
func columnName(tab table, col uint32) string {
	switch {
	case tab == tRcvr:
		return map[uint32]string{colRcvrOwner: "sFlowRcvrOwner", colRcvrTimeout: "sFlowRcvrTimeout",
			colRcvrMaxSize: "sFlowRcvrMaximumDatagramSize", colRcvrAddrTyp: "sFlowRcvrAddressType",
			colRcvrAddress: "sFlowRcvrAddress", colRcvrPort: "sFlowRcvrPort", colRcvrVersion: "sFlowRcvrDatagramVersion"}[col]
	case tab == tFs:
		return map[uint32]string{colFsReceiver: "sFlowFsReceiver", colFsRate: "sFlowFsPacketSamplingRate", colFsHeader: "sFlowFsMaximumHeaderSize"}[col]
	default:
		return map[uint32]string{colCpReceiver: "sFlowCpReceiver", colCpInterval: "sFlowCpInterval"}[col]
	}
}
