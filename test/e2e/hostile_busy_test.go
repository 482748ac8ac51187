package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/gosnmp/gosnmp"
)

// TestHostilePortBusy ("a port refused for a transient reason
// is retried with backoff ... visible in the metrics, and in the MIB"):
// another XDP program holds p2 (a BPF link of the test process, which the
// daemon cannot and must not remove), so the daemon's XDP sampler is
// refused there with EBUSY. Only p2 is affected: it is listed in
// sflowswitchd_port_sampling_failed with reason "busy", its SFLOW-MIB row
// (read through snmpd) reads sFlowFsPacketSamplingRate 0, and p1 is
// sampled. Once the other program is gone the retries attach p2 within
// the backoff (no SIGHUP), the metric no longer lists it and its row reads
// its rate.
func TestHostilePortBusy(t *testing.T) {
	lab := newLab(t, 2)
	snmp := startSnmpd(t)
	col := listenCounting(t, lab, collectorPort)
	p1, p2 := lab.LinkIndex(lab.Switch, "p1"), lab.LinkIndex(lab.Switch, "p2")
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "hs_foreign", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		t.Fatalf("loading the other XDP program: %v", err)
	}
	defer prog.Close()
	var other link.Link
	if err := lab.Do(lab.Switch, func() error {
		var err error
		other, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: p2, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		t.Fatalf("attaching the other XDP program to p2: %v", err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if err := other.Close(); err != nil {
				t.Errorf("detaching the other XDP program from p2: %v", err)
			}
		}
	}
	defer release()

	const rate = 7
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", fmt.Sprint(rate), "-ports", "p1,p2", "-hook", "xdp", "-polling", "0", "-agentx", "unix:"+snmp.SocketPath)
	d.waitReady(t, lab, "p1")
	busy := func(m metrics) bool {
		v, ok := m.get("sflowswitchd_port_sampling_failed", fmt.Sprintf(`ifindex="%d",port="p2",reason="busy"`, p2))
		return ok && v == 1
	}
	m := waitMetricFor(t, d, `p2 failing with reason="busy"`, 20*time.Second, func() (metrics, error) { return fetchMetrics(lab) }, busy)
	if _, ok := m.get("sflowswitchd_port_sampling_failed", `port="p1"`); ok {
		t.Errorf("p1 listed as failing:\n%s", strings.Join(m, "\n"))
	}
	g := snmp.Client(t, "private")
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	waitUntil(t, 15*time.Second, "SFLOW-MIB through snmpd", func() bool { return mibAnswers(g) })
	g.Timeout, g.Retries = 2*time.Second, 1
	fsRate := func(ifindex int) int {
		t.Helper()
		oid := fmt.Sprintf("%s4.11.1.3.6.1.2.1.2.2.1.1.%d.1", fsColumn, ifindex)
		r, err := g.Get([]string{oid})
		if err != nil {
			t.Fatalf("GET %s: %v", oid, err)
		}
		v := r.Variables[0]
		if v.Type != gosnmp.Integer {
			t.Fatalf("GET %s: %v, want an Integer", oid, v.Type)
		}
		return v.Value.(int)
	}
	if r1, r2 := fsRate(p1), fsRate(p2); r1 != rate || r2 != 0 {
		t.Errorf("sFlowFsPacketSamplingRate p1 %d, p2 %d while p2 is busy; want %d and 0", r1, r2, rate)
	}
	samplesFlow(t, lab, col, "p1 while p2 is busy")
	if !strings.Contains(d.log(), "reason=busy") {
		t.Errorf("p2's refusal not logged with its reason:\n%s", tail(d.log(), 3000))
	}

	release()
	freed := time.Now()
	deadline := freed.Add(70 * time.Second)
	for samplerAttachment(t, lab, "p2") == "" {
		if time.Now().After(deadline) || !d.alive() {
			t.Fatalf("p2 not sampled 70 s after the other program went:\n%s", tail(d.log(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(freed)
	waitMetricFor(t, d, "p2 no longer failing", 10*time.Second, func() (metrics, error) { return fetchMetrics(lab) }, func(m metrics) bool {
		_, failing := m.get("sflowswitchd_port_sampling_failed", `port="p2"`)
		v, ok := m.get("sflowswitchd_port_sampling_rate", `port="p2"`)
		return !failing && ok && v == rate
	})
	if r := fsRate(p2); r != rate {
		t.Errorf("sFlowFsPacketSamplingRate p2 %d once attached, want %d", r, rate)
	}
	if took > 65*time.Second {
		t.Errorf("p2 attached %v after the other program went, bound 65 s (the backoff's longest wait)", took)
	}
	t.Logf("p2 busy: metric reason=busy, MIB rate 0, p1 sampled; attached %v after the other program went", took)
	recordHostile(t, hostileRow{
		Case:  "another XDP program holds p2 (EBUSY), then goes",
		Bound: `only p2 affected: port_sampling_failed{reason="busy"}, MIB rate 0, p1 sampled; p2 attached within the backoff (≤ 65 s), no SIGHUP`,
		Peak:  fmt.Sprintf("reason busy, MIB 0 → %d; attached %.1f s after", rate, took.Seconds()),
	})
}
