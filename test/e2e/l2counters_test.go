package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// kernelVLANRx is the per-VLAN received bytes and packets of VLAN vid as
// iproute2 shows them (`bridge -s -j vlan show`) on port (with
// vlan_stats_per_port off, every port's line shows the VLAN's one set of
// counters).
func kernelVLANRx(t *testing.T, lab *netlab.Lab, port string, vid int) (bytes, packets uint64) {
	t.Helper()
	out, err := lab.Run(lab.Switch, "bridge", "-s", "-j", "vlan", "show")
	if err != nil {
		t.Fatalf("bridge -s -j vlan show: %v\n%s", err, out)
	}
	var ports []struct {
		IfName string `json:"ifname"`
		VLANs  []struct {
			VLAN      int    `json:"vid"`
			RxBytes   uint64 `json:"rx_bytes"`
			RxPackets uint64 `json:"rx_packets"`
		} `json:"vlans"`
	}
	if err := json.Unmarshal(out, &ports); err != nil {
		t.Fatalf("bridge -s -j vlan show: %v\n%s", err, out)
	}
	for _, p := range ports {
		if p.IfName != port {
			continue
		}
		for _, v := range p.VLANs {
			if v.VLAN == vid {
				return v.RxBytes, v.RxPackets
			}
		}
	}
	t.Fatalf("bridge -s -j vlan show: no %s entry of VLAN %d\n%s", port, vid, out)
	return 0, 0
}

func lagOfRecs(recs []sflow.Record) *sflow.LAGPortStats {
	for _, r := range recs {
		if l, ok := r.(*sflow.LAGPortStats); ok {
			return l
		}
	}
	return nil
}

// TestL2Counters runs the daemon on a switch whose p1 and p2 are the
// members of an active-backup bond, bond0, itself a port of VLAN 100 on a
// VLAN-filtering bridge with per-VLAN statistics (vlan_stats_enabled 1),
// with p3 an access port of VLAN 100, and selects only p1, p2 and p3:
//   - bond0 is a counter data source (if_counters, no lag_port_stats, no
//     flow sampler);
//   - p1 and p2 send lag_port_stats with the bond's ifIndex as their
//     aggregator, the active member in sync, collecting and distributing,
//     the backup only aggregatable; p1 failing (link down) swaps them;
//   - VLAN 100 is a data source smonVlanDataSource.100 whose vlan_counters
//     equal the bridge's per-VLAN statistics (`bridge -s vlan show`)
//     once the traffic has stopped, read the same by goflow2 (raw record,
//     decoded by the spec's layout) and tshark.
func TestL2Counters(t *testing.T) {
	testskip.Root(t)
	fs := features.ProbeL2Features()
	testskip.Feature(t, fs, features.FeatureBridgeVLANFiltering)
	testskip.Feature(t, fs, features.FeatureBonding)
	lab := newLab(t, 3)
	sw := lab.Switch
	for _, c := range [][]string{
		{"ip", "link", "set", "br0", "type", "bridge", "vlan_filtering", "1", "vlan_stats_enabled", "1"},
		{"ip", "link", "set", "p1", "nomaster"},
		{"ip", "link", "set", "p2", "nomaster"},
		{"ip", "link", "add", "bond0", "type", "bond", "mode", "active-backup", "miimon", "50"},
		{"ip", "link", "set", "p1", "down"},
		{"ip", "link", "set", "p2", "down"},
		{"ip", "link", "set", "p1", "master", "bond0"},
		{"ip", "link", "set", "p2", "master", "bond0"},
		{"ip", "link", "set", "bond0", "type", "bond", "primary", "p1"},
		{"ip", "link", "set", "bond0", "master", "br0"},
		{"ip", "link", "set", "bond0", "up"},
		{"bridge", "vlan", "del", "dev", "bond0", "vid", "1"},
		{"bridge", "vlan", "add", "dev", "bond0", "vid", "100", "pvid", "untagged"},
		{"bridge", "vlan", "del", "dev", "p3", "vid", "1"},
		{"bridge", "vlan", "add", "dev", "p3", "vid", "100", "pvid", "untagged"},
	} {
		if out, err := lab.Run(sw, c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	idx := func(name string) uint32 { return uint32(lab.LinkIndex(sw, name)) }
	bond, p1, p2 := idx("bond0"), idx("p1"), idx("p2")
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1,p2,p3", "-polling", "1")
	d.waitReady(t, lab, "p1", "p2", "p3")

	vlanDS := sflow.DataSource{Type: sflow.SourceSmonVlan, Index: 100}
	bondDS := sflow.DataSource{Type: sflow.SourceIfIndex, Index: bond}
	// Frames from host 3 into VLAN 100 (flooded to bond0's active member).
	const n = 200
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = netlab.UDPFrame(lab.HostMACs[2], netlab.HostMAC(40),
			netip.AddrPortFrom(lab.HostAddrs[2], 4000), netip.AddrPortFrom(netip.MustParseAddr("198.18.0.40"), 4000), []byte(fmt.Sprintf("l2c-%04d", i)))
	}
	lab.SendFrames(t, 2, frames)
	sent := time.Now()
	var kb, kp uint64
	dgs := col.waitFor(t, testutil.Scaled(20*time.Second), "a vlan_counters sample equal to the kernel's after the traffic", func(dgs []datagram) bool {
		cs := counterSamplesOf(dgs, vlanDS)
		if len(cs) == 0 || !cs[len(cs)-1].at.After(sent) {
			return false
		}
		kb, kp = kernelVLANRx(t, lab, "p3", 100)
		if b, p := kernelVLANRx(t, lab, "bond0", 100); b != kb || p != kp {
			t.Fatalf("bridge -s vlan show: p3 and bond0 show VLAN 100 apart (%d/%d, %d/%d): per-port statistics?", kb, kp, b, p)
		}
		for _, r := range cs[len(cs)-1].records {
			if v, ok := r.(*sflow.VLANCounters); ok && v.Octets == kb && uint64(v.UcastPkts) == kp && kp >= n {
				return true
			}
		}
		return false
	})
	cs := counterSamplesOf(dgs, vlanDS)
	last := cs[len(cs)-1]
	v := last.records[0].(*sflow.VLANCounters)
	t.Logf("VLAN 100: vlan_counters %+v; bridge -s vlan show (p3 and bond0, the VLAN's shared entry) vlan 100: rx_bytes %d rx_packets %d (%d frames sent)", *v, kb, kp, n)
	if v.VLANID != 100 || v.MulticastPkts != sflow.CounterUnavailable32 || v.BroadcastPkts != sflow.CounterUnavailable32 || v.Discards != sflow.CounterUnavailable32 {
		t.Errorf("vlan_counters %+v", *v)
	}
	for _, s := range flowSamplesOf(dgs, 0) {
		if s.source.Index == bond || s.source.Type == sflow.SourceSmonVlan {
			t.Fatalf("flow sample of a counters-only data source: %+v", s.source)
		}
	}

	// bond0: if_counters, no lag_port_stats.
	bs := counterSamplesOf(dgs, bondDS)
	if len(bs) == 0 {
		t.Fatalf("no counter sample of bond0 (ifIndex %d)", bond)
	}
	var bondIf *sflow.IfCounters
	for _, r := range bs[len(bs)-1].records {
		switch r := r.(type) {
		case *sflow.IfCounters:
			bondIf = r
		case *sflow.LAGPortStats:
			t.Errorf("bond0 sends lag_port_stats %+v: only members do (hsflowd, sflow_lag.txt)", *r)
		}
	}
	if bondIf == nil || bondIf.IfIndex != bond {
		t.Errorf("bond0: if_counters %+v", bondIf)
	} else {
		t.Logf("bond0 (ifIndex %d): if_counters in octets %d, out octets %d", bond, bondIf.IfInOctets, bondIf.IfOutOctets)
	}

	// Members: p1 active, p2 backup; then p1 fails.
	memberState := func(dgs []datagram, m uint32) *sflow.LAGPortStats {
		c := counterSamplesOf(dgs, sflow.DataSource{Index: m})
		if len(c) == 0 {
			return nil
		}
		return lagOfRecs(c[len(c)-1].records)
	}
	active := sflow.LACPStateAggregation | sflow.LACPStateSynchronization | sflow.LACPStateCollecting | sflow.LACPStateDistributing
	check := func(what string, wantActive, wantBackup uint32) {
		t.Helper()
		var a, b *sflow.LAGPortStats
		col.waitFor(t, testutil.Scaled(20*time.Second), what, func(dgs []datagram) bool {
			a, b = memberState(dgs, wantActive), memberState(dgs, wantBackup)
			return a != nil && b != nil && a.ActorOperState == active && b.ActorOperState == sflow.LACPStateAggregation
		})
		for _, l := range []*sflow.LAGPortStats{a, b} {
			if l.AttachedAggID != bond || l.ActorSystemID != ([6]byte{}) || l.LACPDUsRx != sflow.CounterUnavailable32 {
				t.Errorf("%s: %+v", what, *l)
			}
		}
		bonding, _ := lab.Run(sw, "cat", "/proc/net/bonding/bond0")
		t.Logf("%s: active %d %+v, backup %d %+v\n%s", what, wantActive, *a, wantBackup, *b, bonding)
	}
	check("p1 active, p2 backup", p1, p2)
	if out, err := lab.Run(sw, "ip", "link", "set", "p1", "down"); err != nil {
		t.Fatalf("p1 down: %v\n%s", err, out)
	}
	check("p1 failed: p2 active", p2, p1)

	// The independent decoders read the last VLAN sample's record alike.
	dgs = col.snapshot(t)
	var raw []byte
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			c, ok := s.(goflow.CounterSample)
			if !ok || c.Header.SourceIdType != sflow.SourceSmonVlan || c.Header.SourceIdValue != 100 {
				continue
			}
			for _, r := range c.Records {
				if r.Header.DataFormat == 5 {
					raw = r.Data.(goflow.RawRecord).Data
				}
			}
		}
	}
	cs = counterSamplesOf(dgs, vlanDS)
	v = cs[len(cs)-1].records[0].(*sflow.VLANCounters)
	be := binary.BigEndian
	if len(raw) != 28 || be.Uint32(raw[0:4]) != 100 || be.Uint64(raw[4:12]) != v.Octets || be.Uint32(raw[12:16]) != v.UcastPkts ||
		!bytes.Equal(raw[16:28], bytes.Repeat([]byte{0xff}, 12)) {
		t.Errorf("goflow2's raw vlan_counters % x, ours %+v", raw, *v)
	}
	var tsOctets, tsVID string
	for _, row := range tsharkFields(t, dgs, collectorPort, "sflow_245.vlan_id", "sflow_245.octets") {
		if n := len(row["sflow_245.vlan_id"]); n > 0 {
			tsVID, tsOctets = row["sflow_245.vlan_id"][n-1], strings.Join(row["sflow_245.octets"][len(row["sflow_245.octets"])-1:], "")
		}
	}
	if tsVID != "100" || tsOctets != strconv.FormatUint(v.Octets, 10) {
		t.Errorf("tshark: last vlan_counters VLAN %q octets %q, ours 100 %d", tsVID, tsOctets, v.Octets)
	}
}
