package mib

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// fakeClock is the injectable clock of the receiver timeouts.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder stands in for agent.Apply: it validates every configuration as
// the agent does and records it.
type recorder struct {
	mu   sync.Mutex
	cfgs []agent.Config
	fail error
}

func (r *recorder) Apply(c agent.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if err := c.Validate(); err != nil {
		return err
	}
	r.cfgs = append(r.cfgs, c)
	return nil
}

func (r *recorder) last(t *testing.T) agent.Config {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cfgs) == 0 {
		t.Fatal("no configuration applied")
	}
	return r.cfgs[len(r.cfgs)-1]
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.cfgs) }

type testMIB struct {
	*MIB
	t     *testing.T
	clock *fakeClock
	rec   *recorder
}

// newTestMIB builds a MIB with ports ifIndex 1..nports (static rate 1000
// each) and nstatic static receivers at 198.18.0.(100+r):6343.
func newTestMIB(t *testing.T, nports, nstatic int) *testMIB {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	m, err := New(Config{Revision: "test", Apply: rec.Apply, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMIB{MIB: m, t: t, clock: clock, rec: rec}
	var st Static
	for r := range nstatic {
		st.Receivers = append(st.Receivers, StaticReceiver{Address: netip.MustParseAddrPort(fmt.Sprintf("198.18.0.%d:6343", 100+r))})
	}
	st.HeaderBytes, st.PollInterval = 128, 20*time.Second
	if err := m.SetStatic(st); err != nil {
		t.Fatal(err)
	}
	var ports []Port
	for i := 1; i <= nports; i++ {
		ports = append(ports, Port{IfIndex: uint32(i), StaticRate: 1000})
	}
	if err := m.SetPorts(ports); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAgentAddress(netip.MustParseAddr("198.19.255.1")); err != nil {
		t.Fatal(err)
	}
	return tm
}

// OIDs written out from the MIB text, independent of the package's own
// tables: sFlowAgent = 1.3.6.1.4.1.14706.1.1.
const agentPrefix = "1.3.6.1.4.1.14706.1.1"

func rcvrOID(col, r int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.4.1.%d.%d", agentPrefix, col, r))
}

// ifIndex.N as a length-prefixed OID index: 11 sub-identifiers.
func fsOID(col int, ifIndex uint32, inst int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.5.1.%d.11.1.3.6.1.2.1.2.2.1.1.%d.%d", agentPrefix, col, ifIndex, inst))
}

func cpOID(col int, ifIndex uint32, inst int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.6.1.%d.11.1.3.6.1.2.1.2.2.1.1.%d.%d", agentPrefix, col, ifIndex, inst))
}

// entPhysicalEntry.1 = 1.3.6.1.2.1.47.1.1.1.1.1: 12 sub-identifiers.
func hostCpOID(col, inst int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.6.1.%d.12.1.3.6.1.2.1.47.1.1.1.1.1.%d", agentPrefix, col, inst))
}

func integer(o agentx.OID, n int32) agentx.Variable {
	return agentx.Variable{Name: o, Type: agentx.Integer, Value: n}
}

func octets(o agentx.OID, s string) agentx.Variable {
	return agentx.Variable{Name: o, Type: agentx.OctetString, Value: []byte(s)}
}

var txSeq uint32

// set runs one whole set transaction as the master does.
func (m *testMIB) set(vbs ...agentx.Variable) (agentx.ErrorStatus, int) {
	txSeq++
	tx := txSeq
	defer m.CleanupSet(tx)
	if st, i := m.TestSet(tx, vbs); st != agentx.NoError {
		return st, i
	}
	return m.CommitSet(tx)
}

func (m *testMIB) mustSet(vbs ...agentx.Variable) {
	m.t.Helper()
	if st, i := m.set(vbs...); st != agentx.NoError {
		m.t.Fatalf("set %v: %s at %d", vbs, st, i)
	}
}

func (m *testMIB) getInt(o agentx.OID) int32 {
	m.t.Helper()
	v, err := m.Get(o)
	if err != nil {
		m.t.Fatal(err)
	}
	n, ok := v.Value.(int32)
	if v.Type != agentx.Integer || !ok {
		m.t.Fatalf("get %s: %s %v, want Integer", o, v.Type, v.Value)
	}
	return n
}

func (m *testMIB) getString(o agentx.OID) string {
	m.t.Helper()
	v, err := m.Get(o)
	if err != nil {
		m.t.Fatal(err)
	}
	b, ok := v.Value.([]byte)
	if v.Type != agentx.OctetString || !ok {
		m.t.Fatalf("get %s: %s %v, want OctetString", o, v.Type, v.Value)
	}
	return string(b)
}

// walk returns every variable of the MIB by GetNext, checking that names
// strictly increase.
func (m *testMIB) walk() []agentx.Variable {
	m.t.Helper()
	var out []agentx.Variable
	from := Subtree
	for {
		v, err := m.GetNext(from, false, nil)
		if err != nil {
			m.t.Fatal(err)
		}
		if v.Type == agentx.EndOfMibView {
			return out
		}
		if v.Name.Compare(from) <= 0 {
			m.t.Fatalf("GetNext(%s) = %s: not increasing", from, v.Name)
		}
		out = append(out, v)
		from = v.Name
	}
}

func dump(vs []agentx.Variable) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s=%v\n", v.Name, v.Value)
	}
	return b.String()
}

// claim makes owner the owner of receiver r, sending to 198.19.255.2:port.
func (m *testMIB) claim(r int, owner string, port int32) {
	m.t.Helper()
	m.mustSet(octets(rcvrOID(colRcvrOwner, r), owner), integer(rcvrOID(colRcvrTimeout, r), 60),
		octets(rcvrOID(colRcvrAddress, r), "\xc6\x13\xff\x02"), integer(rcvrOID(colRcvrPort, r), port))
}

func TestIndexEncoding(t *testing.T) {
	// RFC 2578 section 7.7: a non-IMPLIED OBJECT IDENTIFIER index is its
	// length followed by its sub-identifiers.
	m := newTestMIB(t, 5, 0)
	want := "1.3.6.1.4.1.14706.1.1.5.1.4.11.1.3.6.1.2.1.2.2.1.1.5.2"
	if got := fsOID(colFsRate, 5, 2).String(); got != want {
		t.Fatalf("helper %s, want %s", got, want)
	}
	if v, _ := m.Get(fsOID(colFsRate, 5, 2)); v.Type != agentx.Integer {
		t.Fatalf("Get %s: %s", want, v.Type)
	}
	if v, _ := m.Get(hostCpOID(colCpInterval, 3)); v.Type != agentx.Integer {
		t.Fatalf("Get host poller: %s", v.Type)
	}
	for _, c := range []struct {
		oid  string
		want agentx.VarType
	}{
		{agentPrefix + ".1.0", agentx.OctetString},
		{agentPrefix + ".1.1", agentx.NoSuchInstance},
		{agentPrefix + ".4.1.2.11", agentx.NoSuchInstance},                         // receiver 11 of 10
		{agentPrefix + ".5.1.4.11.1.3.6.1.2.1.2.2.1.1.6.1", agentx.NoSuchInstance}, // no port 6
		{agentPrefix + ".4.1.1.1", agentx.NoSuchObject},                            // index column: not-accessible
		{agentPrefix + ".7.0", agentx.NoSuchObject},
	} {
		v, err := m.Get(agentx.MustParseOID(c.oid))
		if err != nil || v.Type != c.want {
			t.Errorf("Get %s = %s, %v; want %s", c.oid, v.Type, err, c.want)
		}
	}
	if got := m.getString(agentx.MustParseOID(agentPrefix + ".1.0")); got != "1.3;sflowswitchd;test" {
		t.Errorf("sFlowVersion %q", got)
	}
	if got := m.getInt(agentx.MustParseOID(agentPrefix + ".2.0")); got != 1 {
		t.Errorf("sFlowAgentAddressType %d, want ipv4(1)", got)
	}
	if got := m.getString(agentx.MustParseOID(agentPrefix + ".3.0")); got != "\xc6\x13\xff\x01" {
		t.Errorf("sFlowAgentAddress % x", got)
	}
}

// badSet is a SET that must fail with want, in the state badSetSetup
// builds: receiver 1 static, 2 owned by mgr-a, 4 by mgr-c, 3 and 5..10
// free; ports 1..4; sampler 1.2 bound to receiver 2.
type badSet struct {
	name string
	vb   agentx.Variable
	want agentx.ErrorStatus
}

// badSetSetup is the SETs that build the state of badSets on a MIB with
// one static receiver.
func badSetSetup() [][]agentx.Variable {
	claim := func(r int, owner string) []agentx.Variable {
		return []agentx.Variable{octets(rcvrOID(colRcvrOwner, r), owner), integer(rcvrOID(colRcvrTimeout, r), 600),
			octets(rcvrOID(colRcvrAddress, r), "\xc6\x13\xff\x02"), integer(rcvrOID(colRcvrPort, r), 6343)}
	}
	return [][]agentx.Variable{claim(2, "mgr-a"), claim(4, "mgr-c"),
		{integer(fsOID(colFsReceiver, 1, 2), 2), integer(fsOID(colFsRate, 1, 2), 100)}}
}

func badSets() []badSet {
	long := strings.Repeat("x", 128)
	return []badSet{
		// wrongType
		{"owner integer", integer(rcvrOID(colRcvrOwner, 2), 1), agentx.WrongType},
		{"timeout string", octets(rcvrOID(colRcvrTimeout, 2), "30"), agentx.WrongType},
		{"address integer", integer(rcvrOID(colRcvrAddress, 2), 1), agentx.WrongType},
		{"rate gauge", agentx.Variable{Name: fsOID(colFsRate, 1, 2), Type: agentx.Gauge32, Value: uint32(10)}, agentx.WrongType},
		{"interval string", octets(cpOID(colCpInterval, 1, 2), "10"), agentx.WrongType},
		{"cp receiver ipaddress", agentx.Variable{Name: cpOID(colCpReceiver, 1, 2), Type: agentx.IPAddress, Value: []byte{1, 2, 3, 4}}, agentx.WrongType},
		// wrongLength
		{"owner 128 octets", octets(rcvrOID(colRcvrOwner, 3), long), agentx.WrongLength},
		{"address 5 octets", octets(rcvrOID(colRcvrAddress, 2), "\x01\x02\x03\x04\x05"), agentx.WrongLength},
		{"address empty", octets(rcvrOID(colRcvrAddress, 2), ""), agentx.WrongLength},
		// wrongValue
		{"owner not utf-8", octets(rcvrOID(colRcvrOwner, 3), "\xff\xfe"), agentx.WrongValue},
		{"timeout negative", integer(rcvrOID(colRcvrTimeout, 2), -1), agentx.WrongValue},
		{"datagram size 199", integer(rcvrOID(colRcvrMaxSize, 2), 199), agentx.WrongValue},
		{"datagram size 65508", integer(rcvrOID(colRcvrMaxSize, 2), 65508), agentx.WrongValue},
		{"address type dns", integer(rcvrOID(colRcvrAddrTyp, 2), 16), agentx.WrongValue},
		{"address type unknown", integer(rcvrOID(colRcvrAddrTyp, 2), 0), agentx.WrongValue},
		{"port 0", integer(rcvrOID(colRcvrPort, 2), 0), agentx.WrongValue},
		{"port 65536", integer(rcvrOID(colRcvrPort, 2), 65536), agentx.WrongValue},
		{"datagram version 4", integer(rcvrOID(colRcvrVersion, 2), 4), agentx.WrongValue},
		{"fs receiver 11", integer(fsOID(colFsReceiver, 1, 3), 11), agentx.WrongValue},
		{"fs receiver -1", integer(fsOID(colFsReceiver, 1, 3), -1), agentx.WrongValue},
		{"rate negative", integer(fsOID(colFsRate, 1, 2), -5), agentx.WrongValue},
		{"header negative", integer(fsOID(colFsHeader, 1, 2), -1), agentx.WrongValue},
		{"interval negative", integer(cpOID(colCpInterval, 1, 2), -1), agentx.WrongValue},
		// inconsistentValue
		{"claim without timeout", octets(rcvrOID(colRcvrOwner, 3), "mgr-b"), agentx.InconsistentValue},
		{"claim held receiver", octets(rcvrOID(colRcvrOwner, 2), "mgr-b"), agentx.InconsistentValue},
		{"port of free receiver", integer(rcvrOID(colRcvrPort, 3), 7000), agentx.InconsistentValue},
		{"timeout of free receiver", integer(rcvrOID(colRcvrTimeout, 3), 30), agentx.InconsistentValue},
		{"bind to free receiver", integer(fsOID(colFsReceiver, 2, 3), 3), agentx.InconsistentValue},
		{"bind to static receiver", integer(fsOID(colFsReceiver, 2, 3), 1), agentx.InconsistentValue},
		{"rebind held sampler", integer(fsOID(colFsReceiver, 1, 2), 4), agentx.InconsistentValue},
		{"rate of free sampler", integer(fsOID(colFsRate, 2, 3), 100), agentx.InconsistentValue},
		{"interval of free poller", integer(hostCpOID(colCpInterval, 2), 10), agentx.InconsistentValue},
		{"ipv6 address on ipv4 type", octets(rcvrOID(colRcvrAddress, 2), strings.Repeat("\x20", 16)), agentx.InconsistentValue},
		{"ipv6 type on ipv4 address", integer(rcvrOID(colRcvrAddrTyp, 2), 2), agentx.InconsistentValue},
		// notWritable
		{"sFlowVersion", octets(agentx.MustParseOID(agentPrefix+".1.0"), "x"), agentx.NotWritable},
		{"sFlowAgentAddress", octets(agentx.MustParseOID(agentPrefix+".3.0"), "\x01\x02\x03\x04"), agentx.NotWritable},
		{"receiver index column", integer(agentx.MustParseOID(agentPrefix+".4.1.1.2"), 2), agentx.NotWritable},
		{"static receiver owner", octets(rcvrOID(colRcvrOwner, 1), ""), agentx.NotWritable},
		{"static receiver port", integer(rcvrOID(colRcvrPort, 1), 7000), agentx.NotWritable},
		{"static sampler rate", integer(fsOID(colFsRate, 1, 1), 10), agentx.NotWritable},
		{"static poller receiver", integer(hostCpOID(colCpReceiver, 1), 0), agentx.NotWritable},
		{"unknown object", integer(agentx.MustParseOID(agentPrefix+".7.0"), 1), agentx.NotWritable},
		{"outside the MIB", integer(agentx.MustParseOID("1.3.6.1.4.1.14706.2.1.0"), 1), agentx.NotWritable},
		// noCreation
		{"receiver 11", octets(rcvrOID(colRcvrOwner, 11), "x"), agentx.NoCreation},
		{"sampler of absent port", integer(fsOID(colFsRate, 99, 2), 10), agentx.NoCreation},
		{"sampler instance 4", integer(fsOID(colFsReceiver, 1, 4), 2), agentx.NoCreation},
		{"host poller instance 4", integer(hostCpOID(colCpReceiver, 4), 2), agentx.NoCreation},
		{"host has no sampler", integer(agentx.MustParseOID(agentPrefix+".5.1.3.12.1.3.6.1.2.1.47.1.1.1.1.1.2"), 2), agentx.NoCreation},
	}
}

func TestBadSets(t *testing.T) {
	for _, c := range badSets() {
		t.Run(c.name, func(t *testing.T) {
			m := newTestMIB(t, 4, 1)
			for _, vbs := range badSetSetup() {
				m.mustSet(vbs...)
			}
			before, applied := m.walk(), m.rec.count()
			// A valid varbind first: the bad one must be reported at
			// index 2 and the valid one must not take effect either.
			st, idx := m.set(integer(rcvrOID(colRcvrPort, 2), 7777), c.vb)
			if st != c.want || idx != 2 {
				t.Fatalf("set: %s at %d, want %s at 2", st, idx, c.want)
			}
			if after := m.walk(); dump(after) != dump(before) {
				t.Fatalf("failed set changed the MIB:\nbefore\n%s\nafter\n%s", dump(before), dump(after))
			}
			if m.rec.count() != applied {
				t.Fatal("failed set applied a configuration")
			}
		})
	}
}

func TestOwnershipAndTimeout(t *testing.T) {
	m := newTestMIB(t, 2, 0)
	// Claim: owner and timeout in one request.
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr-a"), integer(rcvrOID(colRcvrTimeout, 1), 30))
	if got := m.getInt(rcvrOID(colRcvrTimeout, 1)); got != 30 {
		t.Fatalf("timeout reads %d, want 30", got)
	}
	// Owned but address 0.0.0.0: nothing is sent yet.
	if c := m.rec.last(t); len(c.Receivers) != 0 {
		t.Fatalf("receiver with address 0.0.0.0 applied: %+v", c.Receivers)
	}
	m.mustSet(octets(rcvrOID(colRcvrAddress, 1), "\xc6\x13\xff\x02"), integer(rcvrOID(colRcvrPort, 1), 7343),
		integer(rcvrOID(colRcvrMaxSize, 1), 1200),
		integer(fsOID(colFsReceiver, 2, 1), 1), integer(fsOID(colFsRate, 2, 1), 256), integer(fsOID(colFsHeader, 2, 1), 64),
		integer(cpOID(colCpReceiver, 2, 1), 1), integer(cpOID(colCpInterval, 2, 1), 5),
		integer(hostCpOID(colCpReceiver, 3), 1), integer(hostCpOID(colCpInterval, 3), 7))
	c := m.rec.last(t)
	wantRcv := []agent.ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("198.19.255.2:7343"), MaxDatagramSize: 1200}}
	wantFs := []agent.SamplerConfig{{IfIndex: 2, Instance: 1, Receiver: 1, Rate: 256, HeaderBytes: 64}}
	wantCp := []agent.PollerConfig{
		{Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: 2}, Instance: 1, Receiver: 1, Interval: 5 * time.Second},
		{Source: HostSource, Instance: 3, Receiver: 1, Interval: 7 * time.Second},
	}
	if !slices.Equal(c.Receivers, wantRcv) || !slices.Equal(c.Samplers, wantFs) || !slices.Equal(c.Pollers, wantCp) {
		t.Fatalf("applied %+v\nwant receivers %+v samplers %+v pollers %+v", c, wantRcv, wantFs, wantCp)
	}
	// A second manager cannot take it, nor rebind its sampler.
	if st, _ := m.set(octets(rcvrOID(colRcvrOwner, 1), "mgr-b"), integer(rcvrOID(colRcvrTimeout, 1), 100)); st != agentx.InconsistentValue {
		t.Fatalf("second manager claim: %s", st)
	}
	m.mustSet(octets(rcvrOID(colRcvrOwner, 2), "mgr-b"), integer(rcvrOID(colRcvrTimeout, 2), 100))
	if st, _ := m.set(integer(fsOID(colFsReceiver, 2, 1), 2)); st != agentx.InconsistentValue {
		t.Fatalf("rebinding a held sampler: %s", st)
	}
	// The countdown.
	m.clock.Advance(10 * time.Second)
	m.Tick()
	if got := m.getInt(rcvrOID(colRcvrTimeout, 1)); got != 20 {
		t.Fatalf("timeout after 10 s reads %d, want 20", got)
	}
	m.clock.Advance(19500 * time.Millisecond)
	m.Tick()
	if got := m.getInt(rcvrOID(colRcvrTimeout, 1)); got != 1 {
		t.Fatalf("timeout 0.5 s before expiry reads %d, want 1", got)
	}
	if m.getString(rcvrOID(colRcvrOwner, 1)) != "mgr-a" {
		t.Fatal("released before the timeout")
	}
	m.clock.Advance(500 * time.Millisecond)
	m.Tick()
	// Expired: receiver and everything bound to it back to defaults.
	checks := []struct {
		oid  agentx.OID
		want int32
	}{
		{rcvrOID(colRcvrTimeout, 1), 0}, {rcvrOID(colRcvrPort, 1), 6343}, {rcvrOID(colRcvrMaxSize, 1), 1400},
		{rcvrOID(colRcvrAddrTyp, 1), 1}, {rcvrOID(colRcvrVersion, 1), 5},
		{fsOID(colFsReceiver, 2, 1), 0}, {fsOID(colFsRate, 2, 1), 0}, {fsOID(colFsHeader, 2, 1), 128},
		{cpOID(colCpReceiver, 2, 1), 0}, {cpOID(colCpInterval, 2, 1), 0},
		{hostCpOID(colCpReceiver, 3), 0}, {hostCpOID(colCpInterval, 3), 0},
		{rcvrOID(colRcvrTimeout, 2), 70}, // the other receiver is untouched
	}
	for _, c := range checks {
		if got := m.getInt(c.oid); got != c.want {
			t.Errorf("after expiry %s = %d, want %d", c.oid, got, c.want)
		}
	}
	if m.getString(rcvrOID(colRcvrOwner, 1)) != "" || m.getString(rcvrOID(colRcvrAddress, 1)) != "\x00\x00\x00\x00" {
		t.Error("owner or address not reset")
	}
	if c := m.rec.last(t); len(c.Receivers) != 0 || len(c.Samplers) != 0 || len(c.Pollers) != 0 {
		t.Fatalf("after expiry applied %+v", c)
	}
	// Now free: mgr-b can claim it.
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr-b"), integer(rcvrOID(colRcvrTimeout, 1), 5))
	// Release by setting the owner to "" and by setting the timeout to 0.
	m.mustSet(integer(fsOID(colFsReceiver, 1, 2), 1), integer(fsOID(colFsRate, 1, 2), 10))
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), ""))
	if m.getInt(fsOID(colFsReceiver, 1, 2)) != 0 || m.getInt(fsOID(colFsRate, 1, 2)) != 0 {
		t.Fatal("owner \"\" did not release the sampler")
	}
	m.mustSet(integer(fsOID(colFsReceiver, 1, 2), 2), integer(fsOID(colFsRate, 1, 2), 10))
	m.mustSet(integer(rcvrOID(colRcvrTimeout, 2), 0))
	if m.getString(rcvrOID(colRcvrOwner, 2)) != "" || m.getInt(fsOID(colFsReceiver, 1, 2)) != 0 {
		t.Fatal("timeout 0 did not release the receiver")
	}
	// The same owner may refresh its timeout (owner unchanged).
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr-b"), integer(rcvrOID(colRcvrTimeout, 1), 5))
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr-b"), integer(rcvrOID(colRcvrTimeout, 1), 50))
	if got := m.getInt(rcvrOID(colRcvrTimeout, 1)); got != 50 {
		t.Fatalf("refreshed timeout %d", got)
	}
	// Setting a sampler's receiver to its current value is allowed.
	m.mustSet(integer(fsOID(colFsReceiver, 1, 3), 1))
	m.mustSet(integer(fsOID(colFsReceiver, 1, 3), 1))
}

func TestStaticReceivers(t *testing.T) {
	m := newTestMIB(t, 3, 2)
	for r := 1; r <= 2; r++ {
		if got := m.getString(rcvrOID(colRcvrOwner, r)); got != StaticOwner {
			t.Fatalf("receiver %d owner %q", r, got)
		}
		if got := m.getInt(rcvrOID(colRcvrTimeout, r)); got != 2147483647 {
			t.Fatalf("receiver %d timeout %d", r, got)
		}
	}
	if got := m.getString(rcvrOID(colRcvrAddress, 2)); got != "\xc6\x12\x00\x65" {
		t.Fatalf("receiver 2 address % x", got)
	}
	for p := uint32(1); p <= 3; p++ {
		for inst := 1; inst <= 2; inst++ {
			if m.getInt(fsOID(colFsReceiver, p, inst)) != int32(inst) || m.getInt(fsOID(colFsRate, p, inst)) != 1000 ||
				m.getInt(cpOID(colCpInterval, p, inst)) != 20 {
				t.Fatalf("port %d instance %d not bound to static receiver %d", p, inst, inst)
			}
		}
		if m.getInt(fsOID(colFsReceiver, p, 3)) != 0 {
			t.Fatalf("port %d instance 3 bound", p)
		}
	}
	c := m.rec.last(t)
	if len(c.Receivers) != 2 || len(c.Samplers) != 6 || len(c.Pollers) != 8 {
		t.Fatalf("applied %d receivers %d samplers %d pollers, want 2 6 8", len(c.Receivers), len(c.Samplers), len(c.Pollers))
	}
	if m.AgentConfig().AgentAddress != netip.MustParseAddr("198.19.255.1") {
		t.Fatal("agent address not applied")
	}
	// Never times out.
	m.clock.Advance(100 * 365 * 24 * time.Hour)
	m.Tick()
	if got := m.getString(rcvrOID(colRcvrOwner, 1)); got != StaticOwner {
		t.Fatal("static receiver expired")
	}
	// An SNMP owner of row 3 keeps it when the static set shrinks; row 2
	// returns to its defaults.
	m.claim(3, "mgr", 6343)
	if err := m.SetStatic(Static{Receivers: []StaticReceiver{{Address: netip.MustParseAddrPort("198.18.0.100:6343")}}, HeaderBytes: 128, PollInterval: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if m.getString(rcvrOID(colRcvrOwner, 2)) != "" || m.getInt(fsOID(colFsReceiver, 1, 2)) != 0 || m.getString(rcvrOID(colRcvrOwner, 3)) != "mgr" {
		t.Fatal("static receiver 2 not released, or receiver 3 lost")
	}
	// Too many static receivers for the instances.
	st := Static{HeaderBytes: 128}
	for range 4 {
		st.Receivers = append(st.Receivers, StaticReceiver{Address: netip.MustParseAddrPort("198.18.0.100:6343")})
	}
	if err := m.SetStatic(st); err == nil {
		t.Fatal("4 static receivers with 3 instances accepted")
	}
}

func TestClosestValue(t *testing.T) {
	m := newTestMIB(t, 1, 0)
	m.claim(1, "mgr", 6343)
	m.mustSet(integer(fsOID(colFsReceiver, 1, 1), 1))
	for _, c := range []struct {
		oid       agentx.OID
		set, want int32
	}{
		{fsOID(colFsHeader, 1, 1), 300, 256},
		{fsOID(colFsHeader, 1, 1), 5, 20},
		{fsOID(colFsHeader, 1, 1), 0, 20},
		{fsOID(colFsHeader, 1, 1), 77, 77},
		{fsOID(colFsRate, 1, 1), 7, 7},
		{fsOID(colFsRate, 1, 1), 1, 1},
		{fsOID(colFsRate, 1, 1), 2147483647, 2147483647},
		{fsOID(colFsRate, 1, 1), 0, 0},
		{rcvrOID(colRcvrVersion, 1), 9, 5},
		{rcvrOID(colRcvrVersion, 1), 5, 5},
	} {
		m.mustSet(integer(c.oid, c.set))
		if got := m.getInt(c.oid); got != c.want {
			t.Errorf("set %s = %d reads %d, want %d", c.oid, c.set, got, c.want)
		}
	}
	m.mustSet(integer(fsOID(colFsRate, 1, 1), 3))
	if s := m.rec.last(t).Samplers; len(s) != 1 || s[0].Rate != 3 || s[0].HeaderBytes != 77 {
		t.Fatalf("applied samplers %+v", s)
	}
}

func TestWalk64Ports(t *testing.T) {
	m := newTestMIB(t, 0, 1)
	// 64 ports with scattered ifIndexes, including ones whose decimal
	// order differs from their numeric order (9 < 10 < 100).
	var ports []Port
	want := map[string]bool{}
	for i := range 64 {
		idx := uint32(3 + i*37)
		ports = append(ports, Port{IfIndex: idx, StaticRate: 512})
	}
	if err := m.SetPorts(ports); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{".1.0", ".2.0", ".3.0"} {
		want[agentPrefix+s] = true
	}
	for c := 2; c <= 8; c++ {
		for r := 1; r <= 10; r++ {
			want[rcvrOID(c, r).String()] = true
		}
	}
	for _, p := range ports {
		for inst := 1; inst <= 3; inst++ {
			for c := 3; c <= 5; c++ {
				want[fsOID(c, p.IfIndex, inst).String()] = true
			}
			for c := 3; c <= 4; c++ {
				want[cpOID(c, p.IfIndex, inst).String()] = true
			}
		}
	}
	for inst := 1; inst <= 3; inst++ {
		for c := 3; c <= 4; c++ {
			want[hostCpOID(c, inst).String()] = true
		}
	}
	got := m.walk() // checks strictly increasing
	if len(got) != len(want) {
		t.Fatalf("walk returned %d objects, want %d", len(got), len(want))
	}
	for _, v := range got {
		if !want[v.Name.String()] {
			t.Fatalf("walk returned unexpected %s", v.Name)
		}
		g, err := m.Get(v.Name)
		if err != nil || g.Type != v.Type {
			t.Fatalf("Get(%s) = %v %v, walk saw %s", v.Name, g.Type, err, v.Type)
		}
	}
	// The walk order must be the numeric OID order of the expected set.
	names := make([]agentx.OID, 0, len(want))
	for s := range want {
		names = append(names, agentx.MustParseOID(s))
	}
	slices.SortFunc(names, agentx.OID.Compare)
	for i, v := range got {
		if !v.Name.Equal(names[i]) {
			t.Fatalf("walk position %d: %s, want %s", i, v.Name, names[i])
		}
	}
	// GetNext from a name between instances, with include, and with an end.
	mid := fsOID(colFsRate, ports[10].IfIndex, 3).Append(0)
	if v, _ := m.GetNext(mid, false, nil); !v.Name.Equal(fsOID(colFsRate, ports[11].IfIndex, 1)) {
		t.Fatalf("GetNext(%s) = %s", mid, v.Name)
	}
	if v, _ := m.GetNext(rcvrOID(2, 1), true, nil); !v.Name.Equal(rcvrOID(2, 1)) {
		t.Fatalf("GetNext include = %s", v.Name)
	}
	if v, _ := m.GetNext(rcvrOID(2, 10), false, rcvrOID(3, 1)); v.Type != agentx.EndOfMibView {
		t.Fatalf("GetNext past end = %s %s", v.Name, v.Type)
	}
}

func TestMultiVarbindAtomicity(t *testing.T) {
	m := newTestMIB(t, 2, 0)
	before, applied := m.walk(), m.rec.count()
	// Claim, address, bind and rate are all valid; the header size is of
	// the wrong type: nothing of it may happen.
	st, idx := m.set(octets(rcvrOID(colRcvrOwner, 1), "mgr"), integer(rcvrOID(colRcvrTimeout, 1), 60),
		octets(rcvrOID(colRcvrAddress, 1), "\xc6\x13\xff\x02"), integer(fsOID(colFsReceiver, 1, 1), 1),
		integer(fsOID(colFsRate, 1, 1), 10), octets(fsOID(colFsHeader, 1, 1), "128"))
	if st != agentx.WrongType || idx != 6 {
		t.Fatalf("set: %s at %d, want wrongType at 6", st, idx)
	}
	if dump(m.walk()) != dump(before) || m.rec.count() != applied {
		t.Fatal("failed set changed something")
	}
	// The same without the bad varbind succeeds at once.
	m.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr"), integer(rcvrOID(colRcvrTimeout, 1), 60),
		octets(rcvrOID(colRcvrAddress, 1), "\xc6\x13\xff\x02"), integer(fsOID(colFsReceiver, 1, 1), 1),
		integer(fsOID(colFsRate, 1, 1), 10))
	if s := m.rec.last(t).Samplers; len(s) != 1 || s[0].Rate != 10 {
		t.Fatalf("applied %+v", s)
	}

	// Apply failing in CommitSet: commitFailed and rollback.
	snap := dump(m.walk())
	m.rec.fail = errors.New("dataplane refused")
	if st, _ := m.set(integer(fsOID(colFsRate, 1, 1), 20)); st != agentx.CommitFailed {
		t.Fatalf("commit with failing Apply: %s", st)
	}
	m.rec.fail = nil
	if dump(m.walk()) != snap {
		t.Fatal("failed commit not rolled back")
	}

	// UndoSet after a successful commit restores the previous state and
	// applies it.
	if st, _ := m.TestSet(900, []agentx.Variable{integer(fsOID(colFsRate, 1, 1), 30)}); st != agentx.NoError {
		t.Fatal(st)
	}
	if st, _ := m.CommitSet(900); st != agentx.NoError {
		t.Fatal(st)
	}
	if m.getInt(fsOID(colFsRate, 1, 1)) != 30 {
		t.Fatal("commit not visible")
	}
	if st, _ := m.UndoSet(900); st != agentx.NoError {
		t.Fatal(st)
	}
	m.CleanupSet(900)
	if m.getInt(fsOID(colFsRate, 1, 1)) != 10 || m.rec.last(t).Samplers[0].Rate != 10 {
		t.Fatal("undo did not restore rate 10")
	}

	// A timeout expiring between TestSet and CommitSet: the SET is
	// checked again and fails instead of resurrecting the receiver.
	if st, _ := m.TestSet(901, []agentx.Variable{integer(fsOID(colFsRate, 1, 1), 40)}); st != agentx.NoError {
		t.Fatal(st)
	}
	m.clock.Advance(61 * time.Second)
	m.Tick()
	if st, _ := m.CommitSet(901); st != agentx.CommitFailed {
		t.Fatalf("commit after expiry: %s", st)
	}
	m.CleanupSet(901)
	if m.getString(rcvrOID(colRcvrOwner, 1)) != "" || m.getInt(fsOID(colFsRate, 1, 1)) != 0 {
		t.Fatal("expired receiver resurrected")
	}
}

func TestSetPortsKeepsRows(t *testing.T) {
	m := newTestMIB(t, 3, 0)
	m.claim(1, "mgr", 6343)
	m.mustSet(integer(fsOID(colFsReceiver, 2, 1), 1), integer(fsOID(colFsRate, 2, 1), 50))
	if err := m.SetPorts([]Port{{IfIndex: 2, StaticRate: 1000}, {IfIndex: 7, Monitor: true}}); err != nil {
		t.Fatal(err)
	}
	if m.getInt(fsOID(colFsRate, 2, 1)) != 50 {
		t.Fatal("port 2 lost its sampler settings")
	}
	if v, _ := m.Get(fsOID(colFsRate, 1, 1)); v.Type != agentx.NoSuchInstance {
		t.Fatalf("removed port 1 still has rows: %s", v.Type)
	}
	if m.getInt(fsOID(colFsHeader, 7, 3)) != 128 {
		t.Fatal("new port 7 rows not at defaults")
	}
	if c := m.rec.last(t); !c.MonitorPorts[7] || len(c.Samplers) != 1 {
		t.Fatalf("applied %+v", c)
	}
	if err := m.SetPorts([]Port{{IfIndex: 2}, {IfIndex: 2}}); err == nil {
		t.Fatal("duplicate port accepted")
	}
}
