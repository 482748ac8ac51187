package sender

import (
	"strings"
	"testing"
)

// TestDevice: a sender bound to a device sends through it (loopback
// reaches the collector on 127.0.0.1), and a device that does not exist
// leaves it without a socket, the reason in DialErr, its datagrams
// counted as send errors.
func TestDevice(t *testing.T) {
	c := newCollector(t)
	var st stats
	var clk clock
	s := newSender(t, Config{Collector: c.addr(), Uptime: clk.uptime, Counters: []Counters{st.counters()}, Device: "lo"})
	if err := s.DialErr(); err != nil {
		t.Fatalf("bound to lo: %v", err)
	}
	if err := s.Add(counterSample(1)); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	if d := c.read(); len(d.Samples) != 1 {
		t.Fatalf("%d samples", len(d.Samples))
	}
	bad := newSender(t, Config{Collector: c.addr(), Uptime: clk.uptime, Counters: []Counters{st.counters()}, Device: "so-nodev0"})
	if err := bad.DialErr(); err == nil || !strings.Contains(err.Error(), "binding to device so-nodev0") {
		t.Fatalf("a device that does not exist: %v", err)
	}
	if err := bad.Add(counterSample(1)); err != nil {
		t.Fatal(err)
	}
	bad.Flush()
	c.none()
	if st.sendErrors.Load() == 0 {
		t.Error("datagrams of an unbound sender not counted as send errors")
	}
}
