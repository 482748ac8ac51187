// Package apmtest holds the worked example of RFC 3729 (APM-MIB) section
// 2.1 as test data: nine transactions in a 5 minute period and the four
// tables (flows, clients, servers, applications) the RFC aggregates them
// into. The tests of apps/apm and apps/apmmib feed the transactions to an
// engine and check its reports against the tables.
//
// The RFC names hosts and applications; here hosts get addresses from
// 198.18.0.0/15 and applications directory indexes. Responsiveness is in
// seconds, as in the RFC (the MIB unit is milliseconds).
//
// The package holds plain data only and does not import apps/apm, so that
// package apm's internal tests can use it without an import cycle.
package apmtest

import "net/netip"

// Application directory indexes (apmAppDirAppLocalIndex) of the RFC's
// applications.
const (
	AppHTTP  = 10
	AppEmail = 11
	AppSAP   = 12
)

// Apps maps the RFC's application names to their directory indexes.
var Apps = map[string]uint32{"HTTP": AppHTTP, "Email": AppEmail, "SAP/R3": AppSAP}

// Hosts maps the RFC's host names to the addresses we give them: clients
// in 198.18.1.0/24, servers in 198.18.0.0/24.
var Hosts = map[string]netip.Addr{
	"Jim":     netip.MustParseAddr("198.18.1.1"),
	"Jane":    netip.MustParseAddr("198.18.1.2"),
	"Joe":     netip.MustParseAddr("198.18.1.3"),
	"CallCtr": netip.MustParseAddr("198.18.0.10"),
	"HR":      netip.MustParseAddr("198.18.0.11"),
	"Sales":   netip.MustParseAddr("198.18.0.12"),
	"Pop3":    netip.MustParseAddr("198.18.0.13"),
	"Finance": netip.MustParseAddr("198.18.0.14"),
}

// Boundaries are the responsiveness bucket boundaries (milliseconds) of
// every application: they put 3, 5 and 7 s in B1 and 12..19 s in B2, as
// the RFC's RspB1/RspB2 columns imply.
var Boundaries = [6]uint32{10000, 20000, 30000, 40000, 50000, 60000}

// Transaction is one line of the RFC's transaction list.
type Transaction struct {
	App, Client, Server string // keys of Apps and Hosts
	Successful          bool
	Seconds             uint32 // responsiveness
}

// Transactions are the RFC's nine transactions, in its order.
var Transactions = []Transaction{
	// #1 failed: the RFC shows "-". A large value checks that it does not
	// reach mean, min, max or the buckets.
	{"HTTP", "Jim", "CallCtr", false, 99},
	{"HTTP", "Jim", "HR", true, 12},
	{"HTTP", "Jim", "Sales", true, 7},
	{"HTTP", "Jim", "CallCtr", true, 5},
	{"Email", "Jim", "Pop3", true, 12},
	{"HTTP", "Jane", "CallCtr", true, 3},
	{"SAP/R3", "Jane", "Finance", true, 19},
	{"Email", "Jane", "Pop3", true, 16},
	{"HTTP", "Joe", "HR", true, 18},
}

// Row is one line of an RFC table: App Client Server Count Successful
// RspMean RspMin RspMax RspB1 RspB2 (seconds); B3..B7 are zero. Client or
// Server is empty where the aggregation drops it.
type Row struct {
	App, Client, Server               string
	Count, Successful, Mean, Min, Max uint32
	B1, B2                            uint32
}

// Key names the row as "App/Client/Server".
func (r Row) Key() string { return r.App + "/" + r.Client + "/" + r.Server }

// The tables of RFC 3729 section 2.1, one per aggregation type.
var (
	Flows = []Row{
		{"HTTP", "Jim", "CallCtr", 2, 1, 5, 5, 5, 1, 0},
		{"HTTP", "Jim", "HR", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jim", "Sales", 1, 1, 7, 7, 7, 1, 0},
		{"Email", "Jim", "Pop3", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jane", "CallCtr", 1, 1, 3, 3, 3, 1, 0},
		{"SAP/R3", "Jane", "Finance", 1, 1, 19, 19, 19, 0, 1},
		{"Email", "Jane", "Pop3", 1, 1, 16, 16, 16, 0, 1},
		{"HTTP", "Joe", "HR", 1, 1, 18, 18, 18, 0, 1},
	}
	Clients = []Row{
		{"HTTP", "Jim", "", 4, 3, 8, 5, 12, 2, 1},
		{"Email", "Jim", "", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jane", "", 1, 1, 3, 3, 3, 1, 0},
		{"SAP/R3", "Jane", "", 1, 1, 19, 19, 19, 0, 1},
		{"Email", "Jane", "", 1, 1, 16, 16, 16, 0, 1},
		{"HTTP", "Joe", "", 1, 1, 18, 18, 18, 0, 1},
	}
	Servers = []Row{
		{"HTTP", "", "CallCtr", 3, 2, 4, 3, 5, 2, 0},
		{"HTTP", "", "HR", 2, 2, 15, 12, 18, 0, 2},
		{"HTTP", "", "Sales", 1, 1, 7, 7, 7, 1, 0},
		{"Email", "", "Pop3", 2, 2, 14, 12, 16, 0, 2},
		{"SAP/R3", "", "Finance", 1, 1, 19, 19, 19, 0, 1},
	}
	Applications = []Row{
		{"HTTP", "", "", 6, 5, 9, 3, 18, 3, 2},
		{"Email", "", "", 2, 2, 14, 12, 16, 0, 2},
		{"SAP/R3", "", "", 1, 1, 19, 19, 19, 0, 1},
	}
)

// ClientID is the apmNameClientID the engine gives an IPv4 client: its
// address as a number.
func ClientID(host string) uint32 {
	a := Hosts[host].As4()
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}
