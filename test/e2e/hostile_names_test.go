package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// startWithHosts runs the daemon in a mount namespace of its own where a
// private file is bind-mounted over /etc/hosts (the machine's is never
// touched): unshare(1) and sh exec, so the PID is the daemon's.
func startWithHosts(t *testing.T, lab *netlab.Lab, hosts string, args ...string) *daemon {
	t.Helper()
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	argv := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, file, daemonBin, "-metrics", metricsAddr}, hermetic(t, -1, args)...)
	cmd := lab.Start(t, lab.Switch, "unshare", argv...)
	return &daemon{cmd: cmd, out: cmd.Stdout.(fmt.Stringer)}
}

// TestHostileCollectorNames: a collector given as a
// host name is checked at the address it resolves to and its own port,
// whatever its source: flags, the config file, hsflowd.conf (each a
// subtest; SNMP receivers are addresses, checked on the address and port
// a SET leaves: TestHostileSNMPSets). A name that resolves only to this
// host's loopback, configured at the SNMP port 161 or the AgentX port
// 705, gets nothing (a UDP socket on 127.0.0.1:161 and :705 in the
// daemon's namespace receives no datagram); it is logged once and in
// sflowswitchd_collector_address_refused; a name with another address too
// is sent to that one; the other collectors receive as usual, and the
// refused ones' collector_* series name them as configured. Before, the
// resolver checked the address with port 6343, and localhost:161 sent
// sFlow into snmpd.
func TestHostileCollectorNames(t *testing.T) {
	for _, source := range []string{"flags", "config file", "hsflowd.conf"} {
		t.Run(source, func(t *testing.T) { testCollectorNames(t, source) })
	}
}

// collectorNameArgs gives the daemon the collectors of
// TestHostileCollectorNames from source: the literal collector and three
// names (snmp.hhos.test at 161 and 705, mixed.hhos.test at 705).
func collectorNameArgs(t *testing.T, source, literal string) []string {
	t.Helper()
	names := []string{literal, "snmp.hhos.test:161", "snmp.hhos.test:705", "mixed.hhos.test:705"}
	var args []string
	switch source {
	case "flags":
		for _, n := range names {
			args = append(args, "-collector", n)
		}
	case "config file":
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "[[collector]]\naddress = %q\n", n)
		}
		file := filepath.Join(t.TempDir(), "sflowswitchd.toml")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{"-config", file}
	case "hsflowd.conf":
		var b strings.Builder
		b.WriteString("sflow {\n")
		for _, n := range names {
			host, port, err := net.SplitHostPort(n)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  collector { ip = %s udpport = %s }\n", host, port)
		}
		b.WriteString("}\n")
		file := filepath.Join(t.TempDir(), "hsflowd.conf")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{"-hsflowd-conf", file}
	default:
		t.Fatalf("unknown source %q", source)
	}
	return args
}

func testCollectorNames(t *testing.T, source string) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	// The reserved ports, listened on in the switch namespace.
	var snmpSocks []*net.UDPConn
	for _, port := range []uint16{161, 705} {
		err := lab.Do(lab.Switch, func() error {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)))
			if err == nil {
				snmpSocks = append(snmpSocks, c)
			}
			return err
		})
		if err != nil {
			t.Fatalf("listening on 127.0.0.1:%d in the switch namespace: %v", port, err)
		}
	}
	defer func() {
		for _, c := range snmpSocks {
			c.Close()
		}
	}()
	other := listenCounting(t, lab, 705) // mixed.hhos.test's usable address, at port 705
	hosts := fmt.Sprintf("127.0.0.1 localhost\n127.0.0.1 snmp.hhos.test\n127.0.0.1 mixed.hhos.test\n%s mixed.hhos.test\n", lab.CollectorAddr)
	args := append(collectorNameArgs(t, source, fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort)),
		"-sampling", "1", "-ports", "p1", "-polling", "1")
	d := startWithHosts(t, lab, hosts, args...)
	d.waitReady(t, lab, "p1")
	samplesFlow(t, lab, col, "to the literal collector")
	time.Sleep(1500 * time.Millisecond) // a counter poll too
	received := 0
	for _, c := range snmpSocks {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 2048)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
			received++
		}
	}
	if received > 0 {
		t.Errorf("%d datagrams reached this host's SNMP/AgentX ports", received)
	}
	samplesFlow(t, lab, other, "to mixed.hhos.test's other address at 705")
	if n := strings.Count(d.log(), "collector name resolves to an address that cannot be a collector"); n != 2 {
		t.Errorf("%d refusals logged, want 2 (snmp.hhos.test at 161 and at 705, once each):\n%s", n, tail(d.log(), 3000))
	}
	m := mustFetchMetrics(t, lab)
	refused, _ := m.get("sflowswitchd_collector_address_refused", `collector="snmp.hhos.test"`)
	mixed, _ := m.get("sflowswitchd_collector_address_refused", `collector="mixed.hhos.test"`)
	if refused != 1 || mixed != 0 {
		t.Errorf("collector_address_refused: snmp.hhos.test %d (want 1), mixed.hhos.test %d (want 0)", refused, mixed)
	}
	// The refused collectors' own series are labelled with the name as
	// configured (they used to read collector="invalid AddrPort", both
	// the same).
	for _, name := range []string{"snmp.hhos.test:161", "snmp.hhos.test:705"} {
		if _, ok := m.get("sflowswitchd_collector_datagrams_sent_total", `collector="`+name+`"`); !ok {
			t.Errorf("no sflowswitchd_collector_datagrams_sent_total series for collector %q", name)
		}
	}
	for _, line := range m {
		if strings.HasPrefix(line, "sflowswitchd_collector_") && strings.Contains(line, "invalid AddrPort") {
			t.Errorf("metric labelled with no collector: %s", line)
		}
	}
	recordHostile(t, hostileRow{
		Case:  "collector names (" + source + ") resolving to 127.0.0.1 at ports 161 and 705 (private /etc/hosts), one with another address too",
		Bound: "nothing sent to 161/705, logged once each and counted; the other address and collectors receive",
		Peak:  fmt.Sprintf("%d datagrams at 161/705; refused %d", received, refused),
	})
}
