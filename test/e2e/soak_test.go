package e2e

// The soak and flood tests of the fault suite. `make test`
// runs them for seconds; `make soak` for SOAK_DURATION (default 30m) and
// FLOOD_DURATION (default 3m), writing their rows to FAULT_REPORT.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/apps/appsubagent"
)

// SFLOW-MIB columns the soak sets (sFlowRcvrTable 1.3.6.1.4.1.14706.1.1.4,
// sFlowFsTable .5).
const (
	rcvrColumn = ".1.3.6.1.4.1.14706.1.1.4.1."
	fsColumn   = ".1.3.6.1.4.1.14706.1.1.5.1."
)

// soakSample is one reading of the daemon's resources.
type soakSample struct {
	at         time.Duration
	goroutines uint64
	u          procUsage
}

// TestSoak runs the daemon for SOAK_DURATION (20 s in make test) under
// mixed traffic on every port, an SNMP SET every 2 s (a manager claims
// receiver 2, points a second sampler of p1 at it at alternating rates,
// and releases it) and a SIGHUP reload every 3 s (alternating rates).
// Every 10 s (2 s in the short run) it reads goroutines, open fds, RSS and
// the entries of the daemon's BPF maps, and at the end asserts none grew:
// the lowest reading of the last third stays within the first third's
// maximum plus a small allowance.
func TestSoak(t *testing.T) {
	dur := durationEnv(t, "SOAK_DURATION", 20*time.Second)
	every := 10 * time.Second
	if dur < 2*time.Minute {
		every = 2 * time.Second
	}
	lab := newLab(t, 3)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	snmp := startSnmpd(t)
	col := listenCounting(t, lab, collectorPort)
	col2 := listenCounting(t, lab, collectorPort+1)
	conf := filepath.Join(t.TempDir(), "soak.conf")
	writeConf := func(rate int) {
		body := fmt.Sprintf("sampling = %d\npolling = 2\nports = [\"p*\"]\n[[collector]]\naddress = \"%s:%d\"\n", rate, lab.CollectorAddr, collectorPort)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConf(10)
	d := startDaemon(t, lab, "-config", conf, "-agentx", "unix:"+snmp.SocketPath)
	d.waitReady(t, lab, "p1", "p2", "p3")
	g := snmp.Client(t, "private")
	g.Timeout, g.Retries = time.Second, 1
	waitUntil(t, 15*time.Second, "SFLOW-MIB through snmpd", func() bool { return mibAnswers(g) })

	var trs []*traffic
	for h := range lab.Hosts {
		trs = append(trs, startTraffic(lab, h, 100, 10*time.Millisecond))
	}
	ds := fmt.Sprintf("11.1.3.6.1.2.1.2.2.1.1.%d.2", p1)
	collector := lab.CollectorAddr.As4()
	var sets, setErrs, reloads int
	set := func(pdus ...gosnmp.SnmpPDU) {
		sets++
		if r, err := g.Set(pdus); err != nil || r.Error != gosnmp.NoError {
			setErrs++
			if setErrs < 5 {
				t.Logf("SET %v: %v %v", pdus[0].Name, err, r)
			}
		}
	}
	var samples []soakSample
	read := func(at time.Duration) {
		m := mustFetchMetrics(t, lab)
		var gr uint64
		if v, ok := m.value("go_goroutines"); ok {
			gr = v
		}
		samples = append(samples, soakSample{at: at, goroutines: gr, u: usage(t, d.cmd.Process.Pid)})
	}
	start := time.Now()
	read(0)
	nextRead, nextSet, nextReload := every, 2*time.Second, 3*time.Second
	for i := 0; time.Since(start) < dur; i++ {
		time.Sleep(200 * time.Millisecond)
		el := time.Since(start)
		if el >= nextSet {
			nextSet += 2 * time.Second
			if sets%2 == 0 {
				rate := 50 + 50*(sets/2%2)
				set(gosnmp.SnmpPDU{Name: rcvrColumn + "2.2", Type: gosnmp.OctetString, Value: "soak"},
					gosnmp.SnmpPDU{Name: rcvrColumn + "3.2", Type: gosnmp.Integer, Value: 60})
				set(gosnmp.SnmpPDU{Name: rcvrColumn + "6.2", Type: gosnmp.OctetString, Value: string(collector[:])},
					gosnmp.SnmpPDU{Name: rcvrColumn + "7.2", Type: gosnmp.Integer, Value: int(collectorPort + 1)})
				set(gosnmp.SnmpPDU{Name: fsColumn + "3." + ds, Type: gosnmp.Integer, Value: 2},
					gosnmp.SnmpPDU{Name: fsColumn + "4." + ds, Type: gosnmp.Integer, Value: rate})
			} else {
				// Releasing the receiver frees its samplers.
				set(gosnmp.SnmpPDU{Name: rcvrColumn + "2.2", Type: gosnmp.OctetString, Value: ""})
			}
		}
		if el >= nextReload {
			nextReload += 3 * time.Second
			reloads++
			writeConf(10 + 10*(reloads%2))
			d.signal(t, syscall.SIGHUP)
		}
		if el >= nextRead {
			nextRead += every
			read(el)
		}
		if !d.alive() {
			t.Fatalf("daemon died after %v\n%s", el, d.log())
		}
	}
	var sent uint64
	for _, tr := range trs {
		sent += tr.stop()
	}
	read(time.Since(start))
	if setErrs > sets/10 {
		t.Errorf("%d of %d SNMP SETs failed", setErrs, sets)
	}
	if col.totalFlows() == 0 || col2.totalFlows() == 0 {
		t.Errorf("flow samples: static collector %d, SNMP-configured collector %d; want both", col.totalFlows(), col2.totalFlows())
	}

	// No growth: the lowest reading of the last third is not above the
	// highest of the first third plus an allowance. Readings oscillate
	// (sockets open while receiver 2 is claimed, the heap breathes with
	// the GC); a leak lifts the floor.
	n := len(samples)
	if n < 6 {
		t.Fatalf("only %d readings", n)
	}
	head, tail := samples[1:1+n/3], samples[n-n/3:]
	type series struct {
		name  string
		get   func(soakSample) float64
		slack func(float64) float64
	}
	var report string
	for _, s := range []series{
		{"goroutines", func(x soakSample) float64 { return float64(x.goroutines) }, func(b float64) float64 { return b + 5 }},
		{"open fds", func(x soakSample) float64 { return float64(x.u.FDs) }, func(b float64) float64 { return b + 3 }},
		{"RSS MiB", func(x soakSample) float64 { return float64(x.u.RSS) / (1 << 20) }, func(b float64) float64 { return b*1.2 + 4 }},
		{"BPF map entries", func(x soakSample) float64 { return float64(x.u.MapEntries) }, func(b float64) float64 { return b + 8 }},
	} {
		hmax, tmin := 0.0, s.get(tail[0])
		for _, x := range head {
			hmax = max(hmax, s.get(x))
		}
		for _, x := range tail {
			tmin = min(tmin, s.get(x))
		}
		all := make([]float64, 0, n)
		for _, x := range samples {
			all = append(all, s.get(x))
		}
		t.Logf("%s: %v", s.name, all)
		if tmin > s.slack(hmax) {
			t.Errorf("%s grew: first third max %.1f, last third min %.1f (allowed %.1f)", s.name, hmax, tmin, s.slack(hmax))
		}
		report += fmt.Sprintf("%s %.0f→%.0f; ", s.name, s.get(samples[1]), s.get(samples[n-1]))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].u.HWM > samples[j].u.HWM })
	recordFault(t, faultRow{
		Fault: "soak: mixed traffic, SNMP SETs, reloads", Done: fmt.Sprintf("%v: traffic on 3 ports (%d frames), %d SETs (%d failed), %d SIGHUP reloads, readings every %v", dur.Round(time.Second), sent, sets, setErrs, reloads, every),
		Observed: "no growth: " + report, PeakRSS: samples[0].u.HWM,
	})
}

// TestFloodEveryPort samples every port at 1 in 1 while every host sends
// as fast as it can, for FLOOD_DURATION (5 s in make test): memory stays
// bounded and every sample not delivered is counted — per port, sample
// pool = frames selected, and selected = read by the agent + kernel drops
// exactly; in the agent, read = flow samples encoded + samples dropped; at
// the collector,
// flow samples received + counted send losses = flow samples encoded,
// checked again by the samples' own sequence numbers.
func TestFloodEveryPort(t *testing.T) {
	dur := durationEnv(t, "FLOOD_DURATION", 5*time.Second)
	const nports = 3
	lab := newLab(t, nports)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p*", "-polling", "0", "-agentx", "off")
	d.waitReady(t, lab, "p1", "p2", "p3")
	var trs []*traffic
	for h := 0; h < nports; h++ {
		trs = append(trs, startTraffic(lab, h, 1000, 0))
	}
	start := time.Now()
	var peak, last procUsage
	for time.Since(start) < dur {
		time.Sleep(time.Second)
		last = usage(t, d.cmd.Process.Pid)
		peak.HWM = max(peak.HWM, last.HWM)
		peak.RSS = max(peak.RSS, last.RSS)
	}
	var sent uint64
	for _, tr := range trs {
		sent += tr.stop()
	}
	// The agent has read every sample (at a worker's tick at the latest),
	// then the last datagrams are flushed. Not waitDelivered: the
	// collector's own socket may drop datagrams in a flood (counted
	// below, not the agent's loss).
	waitAccounted(t, lab, nil)
	col.waitQuiet(2 * time.Second)
	m := mustFetchMetrics(t, lab)
	var pool, ksamples, kdrops uint64
	for _, p := range []string{"p1", "p2", "p3"} {
		// At 1 in 1 the kernel selects every frame of the pool; the
		// selected frames are delivered to the agent or counted dropped
		// (port_kernel_samples_total counts every selected frame).
		pl, s, dr := portCounters(m, p)
		if pl != s || dr > s {
			t.Errorf("%s: pool %d, kernel selected %d, kernel drops %d: want pool = selected at 1 in 1", p, pl, s, dr)
		}
		pool, ksamples, kdrops = pool+pl, ksamples+s, kdrops+dr
	}
	agentKernel := m.sum("sflowswitchd_kernel_samples_total")
	encoded := m.sum("sflowswitchd_flow_samples_total")
	dropped := m.sum("sflowswitchd_samples_dropped_total")
	away := m.sum("sflowswitchd_subsampled_away_total")
	// Flow samples lost in sending, as the workers count them (the
	// per-collector figures also hold drop notifications).
	lost := m.sumWith("sflowswitchd_samples_dropped_total", `reason="send_error"`, "")
	received := col.totalFlows()
	col.mu.Lock()
	var seqTotal uint64
	for _, s := range col.lastSeq {
		seqTotal += uint64(s)
	}
	gaps := col.dgGaps
	col.mu.Unlock()
	t.Logf("%v flood, %d frames sent: pool %d, kernel selected %d of which dropped %d; agent read %d, encoded %d, dropped %d (%d sub-sampled away); collector received %d, counted lost %d; sequence numbers say %d encoded; %d datagrams missing; peak RSS %.1f MiB",
		dur, sent, pool, ksamples, kdrops, agentKernel, encoded, dropped-lost, away, received, lost, seqTotal, gaps, float64(peak.HWM)/(1<<20))
	if agentKernel != ksamples-kdrops {
		t.Errorf("agent read %d kernel samples, the kernel selected %d and dropped %d", agentKernel, ksamples, kdrops)
	}
	// samples_dropped_total includes send_error (= lost): what the agent
	// read is either encoded or dropped before encoding.
	if agentKernel != encoded+(dropped-m.sumWith("sflowswitchd_samples_dropped_total", `reason="send_error"`, ""))+away {
		t.Errorf("agent: read %d != encoded %d + dropped before encoding + sub-sampled away %d", agentKernel, encoded, away)
	}
	// Datagrams missing at the collector are the daemon's only if the
	// collector's own socket did not drop them (a slow test machine).
	colDrops, err := appsubagent.SocketDrops(col.conn)
	if err != nil {
		t.Fatal(err)
	}
	// A datagram whose send failed keeps its sequence number: a gap the
	// daemon counted (send errors; its samples in lost).
	sendErrs := m.sum("sflowswitchd_send_errors_total")
	switch {
	case seqTotal != encoded:
		t.Errorf("sequence numbers say %d samples encoded, the agent counted %d", seqTotal, encoded)
	case colDrops == 0 && received+lost != encoded:
		t.Errorf("collector: received %d + counted lost %d != encoded %d", received, lost, encoded)
	case gaps != colDrops+sendErrs:
		t.Errorf("%d datagrams missing, the collector's socket dropped %d, the daemon counted %d send errors: the agent lost %d samples silently", gaps, colDrops, sendErrs, encoded-received-lost)
	case colDrops > 0:
		t.Logf("the collector's own socket dropped %d datagrams (%d samples): not the agent's loss", colDrops, encoded-received-lost)
	}
	if pool < sent*9/10 {
		t.Errorf("pool %d of %d frames sent", pool, sent)
	}
	if peak.HWM > 128<<20 {
		t.Errorf("peak RSS %.1f MiB, want under 128 MiB", float64(peak.HWM)/(1<<20))
	}
	recordFault(t, faultRow{
		Fault: "1-in-1 flood on every port", Done: fmt.Sprintf("%v, 3 ports at 1 in 1, every host sending at full speed (%d frames)", dur.Round(time.Second), sent),
		Observed: fmt.Sprintf("per port pool = selected = read by the agent + kernel drops; %d kernel drops (in the sFlow drops field), %d lost in sending, all counted, the rest received; RSS %.1f MiB at the end",
			kdrops, lost, float64(last.RSS)/(1<<20)),
		PeakRSS: peak.HWM, Lost: pool - received, Reported: kdrops + lost + (dropped - m.sumWith("sflowswitchd_samples_dropped_total", `reason="send_error"`, "")),
	})
}
