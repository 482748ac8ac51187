package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestPortSelectionTypo: a port selection that
// matches nothing is reported loudly at start-up (log and metric), and a
// reload whose selection matches none of the ports present is refused
// whole: sampling goes on with the previous settings.
func TestPortSelectionTypo(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	write := func(ports string) {
		t.Helper()
		body := fmt.Sprintf("sampling = 1\npolling = 0\nports = [%s]\n\n[[collector]]\naddress = \"%s:%d\"\n", ports, lab.CollectorAddr, collectorPort)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`"p1", "p9"`)
	d := startDaemon(t, lab, "-config", conf)
	d.waitReady(t, lab, "p1")
	get := func() (metrics, error) { return fetchMetrics(lab) }
	waitMetric(t, d, "pattern p9 reported unmatched", get, func(m metrics) bool {
		v, ok := m.get("sflowswitchd_port_pattern_unmatched", `pattern="p9"`)
		return ok && v == 1
	})
	if !strings.Contains(d.log(), "port pattern matches no port") {
		t.Errorf("no log line for pattern p9\n%s", d.log())
	}

	// A typo that matches nothing: refused, p1 is still sampled.
	write(`"xxxx"`)
	d.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for !strings.Contains(d.log(), "config reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("reload with ports [xxxx] not refused\n%s", d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a wrongly applied reload would detach p1 by now
	if !samplerAttached(t, lab, "p1") {
		t.Fatalf("p1 no longer sampled after a refused reload\n%s", d.log())
	}
	lab.SendFrames(t, 0, testFrames(lab, 0, 1, 1, 20))
	col.waitFor(t, 5*time.Second, "samples of p1 after the refused reload", func(dgs []datagram) bool { return len(flowSamplesOf(dgs, p1)) > 0 })
}

// TestPortSelectionEmptyAtStart: -ports naming no existing port is logged
// as an error naming the selection (the daemon keeps running: the port may
// be created later, and is then sampled).
func TestPortSelectionEmptyAtStart(t *testing.T) {
	lab := newLab(t, 1)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p2", "-polling", "0")
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for !strings.Contains(d.log(), "NOTHING IS SAMPLED") {
		if time.Now().After(deadline) || !d.alive() {
			t.Fatalf("no error for a selection matching nothing\n%s", d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	lab.AddPort(t) // p2
	d.waitReady(t, lab, "p2")
}

// listenAt opens a collector on addr:port in the collector namespace.
func listenAt(t *testing.T, lab *netlab.Lab, addr netip.Addr, port uint16) *collector {
	t.Helper()
	c := &collector{port: port, done: make(chan struct{})}
	if err := lab.Do(lab.Collector, func() error {
		var err error
		c.conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	}); err != nil {
		t.Fatalf("collector on %s:%d: %v", addr, port, err)
	}
	go c.read()
	t.Cleanup(c.close)
	return c
}

// TestCollectorRouteAppears: a collector with no route
// at start-up is retried until a route appears, and the samples it missed
// meanwhile are counted (send errors, samples dropped by reason
// send_error).
func TestCollectorRouteAppears(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	far := netip.MustParseAddr("198.19.254.2") // no route to it from the switch yet
	if out, err := lab.Run(lab.Collector, "ip", "addr", "add", far.String()+"/32", "dev", "eth0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	col := listenAt(t, lab, far, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", far, collectorPort), "-sampling", "1", "-ports", "p1,p2", "-polling", "0")
	d.waitReady(t, lab, "p1", "p2")
	lab.SendFrames(t, 0, testFrames(lab, 0, 1, 1, 50))
	get := func() (metrics, error) { return fetchMetrics(lab) }
	waitMetric(t, d, "samples lost to the unreachable collector counted", get, func(m metrics) bool {
		lost := uint64(0)
		for _, line := range m {
			if strings.HasPrefix(line, "sflowswitchd_samples_dropped_total{") && strings.Contains(line, `reason="send_error"`) {
				var v uint64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
				lost += v
			}
		}
		return lost >= 50
	})
	if !strings.Contains(d.log(), "collector not reachable now") {
		t.Errorf("no log line for the unreachable collector\n%s", d.log())
	}
	if out, err := lab.Run(lab.Switch, "ip", "route", "add", far.String()+"/32", "via", lab.CollectorAddr.String(), "dev", "mgmt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Backoff is at most the sender's redialMax (1 min) but here at most 1+2+4+8 s.
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for num := uint64(1000); ; num += 10 {
		lab.SendFrames(t, 0, testFrames(lab, 0, 1, num, 10))
		if len(flowSamplesOf(col.snapshot(t), p1)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample reached the collector 20 s after its route appeared\n%s", d.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNoAgentAddress: in a namespace with no usable
// address the daemon refuses to start with a message saying why and what
// to set, instead of sampling into nothing; with -agent-address it runs.
func TestNoAgentAddress(t *testing.T) {
	lab := newLab(t, 1)
	if out, err := lab.Run(lab.Switch, "ip", "addr", "flush", "dev", "mgmt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := startDaemon(t, lab, "-collector", "127.0.0.1:6343", "-ports", "p1")
	if code := d.waitExit(t, 10*time.Second); code != 1 {
		t.Errorf("exit status %d without an agent address, want 1\n%s", code, d.log())
	}
	for _, want := range []string{"refusing to start", "no agent address", "-agent-address"} {
		if !strings.Contains(d.log(), want) {
			t.Errorf("log lacks %q\n%s", want, d.log())
		}
	}
	d = startDaemon(t, lab, "-collector", "127.0.0.1:6343", "-ports", "p1", "-agent-address", "198.18.0.1")
	d.waitReady(t, lab, "p1")
}

// TestCollectorSubnetBroadcast: a collector at the
// subnet-directed broadcast address of the management link is never sent
// to (collector sockets have no SO_BROADCAST: the kernel refuses), and
// that is logged; nothing reaches the subnet.
func TestCollectorSubnetBroadcast(t *testing.T) {
	lab := newLab(t, 2)
	var conn *net.UDPConn
	if err := lab.Do(lab.Collector, func() error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: collectorPort}) // any address: broadcasts included
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("198.19.255.3:%d", collectorPort), "-sampling", "1", "-ports", "p1,p2", "-polling", "1")
	d.waitReady(t, lab, "p1", "p2")
	lab.SendFrames(t, 0, testFrames(lab, 0, 1, 1, 20))
	if err := conn.SetReadDeadline(time.Now().Add(2500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	if n, from, err := conn.ReadFromUDPAddrPort(buf); err == nil {
		t.Fatalf("a %d-byte datagram from %s reached the subnet broadcast address\n%s", n, from, d.log())
	}
	if !strings.Contains(d.log(), "collector not reachable now") || !strings.Contains(d.log(), "permission denied") {
		t.Errorf("no log line for the refused broadcast collector\n%s", d.log())
	}
}
