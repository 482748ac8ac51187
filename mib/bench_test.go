package mib

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// Benchmarks through a real snmpd (net-snmp master, AgentX over a unix
// socket) with the MIB of 64 ports served by the in-process subagent.
// Each operation is one manager request over UDP on loopback.

func BenchmarkSnmpdGet(b *testing.B) {
	s, _, _ := newSnmpdMIB(b, 64)
	g := s.Client(b, "public")
	oid := "." + fsOID(colFsRate, 3+37*40, 2).String()
	for b.Loop() {
		res, err := g.Get([]string{oid})
		if err != nil || res.Variables[0].Value == nil {
			b.Fatalf("get: %v %+v", err, res)
		}
	}
}

func BenchmarkSnmpdGetNext(b *testing.B) {
	s, _, _ := newSnmpdMIB(b, 64)
	g := s.Client(b, "public")
	oid := "." + fsOID(colFsRate, 3+37*40, 2).String()
	for b.Loop() {
		res, err := g.GetNext([]string{oid})
		if err != nil || res.Variables[0].Value == nil {
			b.Fatalf("getnext: %v %+v", err, res)
		}
	}
}

// BenchmarkSnmpdWalk64Ports is a full walk of the MIB (1039 objects with
// 64 ports) with GETBULK (max-repetitions 50), as snmpbulkwalk does.
func BenchmarkSnmpdWalk64Ports(b *testing.B) {
	s, _, _ := newSnmpdMIB(b, 64)
	g := s.Client(b, "public")
	for b.Loop() {
		res, err := g.BulkWalkAll(".1.3.6.1.4.1.14706")
		if err != nil || len(res) != 1039 {
			b.Fatalf("walk: %v, %d objects", err, len(res))
		}
	}
}

// BenchmarkSnmpdWalk64PortsGetNext is the same walk with one GETNEXT per
// object, as snmpwalk does.
func BenchmarkSnmpdWalk64PortsGetNext(b *testing.B) {
	s, _, _ := newSnmpdMIB(b, 64)
	g := s.Client(b, "public")
	for b.Loop() {
		res, err := g.WalkAll(".1.3.6.1.4.1.14706")
		if err != nil || len(res) != 1039 {
			b.Fatalf("walk: %v, %d objects", err, len(res))
		}
	}
}

// BenchmarkHandlerGetNext is the handler alone (no AgentX, no snmpd).
func BenchmarkHandlerGetNext(b *testing.B) {
	m, err := New(Config{Apply: (&recorder{}).Apply})
	if err != nil {
		b.Fatal(err)
	}
	var ports []Port
	for i := range 64 {
		ports = append(ports, Port{IfIndex: uint32(3 + 37*i)})
	}
	if err := m.SetPorts(ports); err != nil {
		b.Fatal(err)
	}
	from := fsOID(colFsRate, 3+37*40, 2)
	for b.Loop() {
		if v, err := m.GetNext(from, false, nil); err != nil || v.Type != agentx.Integer {
			b.Fatal(err, v)
		}
	}
}
