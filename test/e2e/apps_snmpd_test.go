package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// sharedMIBs is the shared MIB directory (APM-MIB and its imports) for
// net-snmp's tools, relative to this package.
var sharedMIBs = testutil.MIBDir()

// apmReportTransactionCount is the apmReportTransactionCount column of
// apmReportTable (APM-MIB, rmon 23 = 1.3.6.1.2.1.16.23; table apm.1.10,
// entry .1, column 3).
const apmReportTransactionCount = "1.3.6.1.2.1.16.23.1.10.1.3"

// apmReportControlAggregationType is column 3 of apmReportControlTable
// (apm.1.9.1.3).
const apmReportControlAggregationType = "1.3.6.1.2.1.16.23.1.9.1.3"

// startSnmpd starts the project's real-snmpd harness (internal/testkit/snmptest)
// for the applications test: read-only community "public" and the shared
// MIB directory (APM-MIB) as MIBDIRS for net-snmp's tools. snmpd runs on
// the host, answering SNMP on the host loopback; the daemon in the lab's
// switch namespace reaches it through the unix AgentX socket in the temp
// dir (a file-system socket is reachable from every network namespace).
// Unlike snmptest.Start alone, a missing snmpd fails the test instead of
// skipping it: the end-to-end suite requires it.
func startSnmpd(t *testing.T) *snmptest.Snmpd {
	t.Helper()
	if _, err := os.Stat(snmptest.SnmpdPath); err != nil {
		t.Fatalf("net-snmp snmpd not installed (Debian package snmpd): %v", err)
	}
	return snmptest.Start(t, snmptest.Options{ROCommunity: "public", MIBDirs: sharedMIBs})
}

// waitAPMMIB waits until the daemon's APM-MIB session answers through
// snmpd: apmReportControlAggregationType.4 is applications(4).
func waitAPMMIB(t *testing.T, s *snmptest.Snmpd, d *daemon) {
	t.Helper()
	g := s.Client(t, "public")
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	deadline := time.Now().Add(testutil.Scaled(15 * time.Second))
	for {
		res, err := g.Get([]string{"." + apmReportControlAggregationType + ".4"})
		if err == nil && res.Variables[0].Type == gosnmp.Integer && gosnmp.ToBigInt(res.Variables[0].Value).Int64() == 4 {
			return
		}
		if !d.alive() || time.Now().After(deadline) {
			t.Fatalf("the daemon's APM-MIB is not reachable through snmpd (last: %v %+v); snmpd log:\n%s\ndaemon log:\n%s", err, res, s.Log(), d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apmCountsGoSNMP walks apmReportTransactionCount of report control
// control with gosnmp (GETBULK through snmpd) and sums the values by
// application index (apmAppDirAppLocalIndex, the third index).
func apmCountsGoSNMP(t *testing.T, s *snmptest.Snmpd, control uint32) map[uint32]uint64 {
	t.Helper()
	g := s.Client(t, "public")
	base := fmt.Sprintf("%s.%d", apmReportTransactionCount, control)
	pdus, err := g.BulkWalkAll("." + base)
	if err != nil {
		t.Fatalf("gosnmp walk of %s: %v", base, err)
	}
	sums := map[uint32]uint64{}
	for _, p := range pdus {
		if p.Type != gosnmp.Gauge32 {
			t.Errorf("%s: type %v, want Gauge32", p.Name, p.Type)
			continue
		}
		app, err := apmRowApp(strings.TrimPrefix(p.Name, "."), base)
		if err != nil {
			t.Error(err)
			continue
		}
		sums[app] += gosnmp.ToBigInt(p.Value).Uint64()
	}
	return sums
}

// apmCountsSnmpwalk does what apmCountsGoSNMP does with net-snmp's
// snmpwalk and the APM-MIB loaded (the object named, numeric output).
func apmCountsSnmpwalk(t *testing.T, s *snmptest.Snmpd, control uint32) map[uint32]uint64 {
	t.Helper()
	out, err := s.Tool("snmpwalk", "-v2c", "-c", "public", "-t", "3", "-r", "1", "-On", "-Oq",
		"-M", sharedMIBs, "-m", "APM-MIB", s.UDPAddr,
		fmt.Sprintf("APM-MIB::apmReportTransactionCount.%d", control))
	if err != nil {
		t.Fatalf("snmpwalk: %v\n%s", err, out)
	}
	base := fmt.Sprintf("%s.%d", apmReportTransactionCount, control)
	sums := map[uint32]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Errorf("snmpwalk line %q", line)
			continue
		}
		app, err := apmRowApp(strings.TrimPrefix(f[0], "."), base)
		if err != nil {
			t.Error(err)
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			t.Errorf("snmpwalk line %q: %v", line, err)
			continue
		}
		sums[app] += v
	}
	return sums
}

// apmRowApp returns the application index of an apmReportTable object
// under base (column.control): the index continues with apmReportIndex,
// then apmAppDirAppLocalIndex.
func apmRowApp(name, base string) (uint32, error) {
	rest, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return 0, fmt.Errorf("object %s not under %s", name, base)
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 3 {
		return 0, fmt.Errorf("object %s: short index", name)
	}
	v, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("object %s: %w", name, err)
	}
	return uint32(v), nil
}
