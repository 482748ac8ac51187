package source

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tcFilter is one filter of `tc -j -s filter show` (the fields read).
type tcFilter struct {
	Pref    int    `json:"pref"`
	Kind    string `json:"kind"`
	Options struct {
		Handle  uint32 `json:"handle"`
		SkipSW  bool   `json:"skip_sw"`
		Actions []struct {
			Kind    string `json:"kind"`
			Rate    uint32 `json:"rate"`
			Group   uint32 `json:"group"`
			Trunc   uint32 `json:"trunc_size"`
			Control struct {
				Type string `json:"type"`
			} `json:"control_action"`
			Stats struct {
				Packets uint64 `json:"packets"`
			} `json:"stats"`
		} `json:"actions"`
	} `json:"options"`
}

// tcFilters lists a port side's filters as tc decodes them.
func tcFilters(t *testing.T, lab *pslab.Lab, port, side string) []tcFilter {
	t.Helper()
	out := lab.MustCmd(t, "tc", "-j", "-s", "filter", "show", "dev", port, side)
	var fs []tcFilter
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("tc -j filter show dev %s %s: %v\n%s", port, side, err, out)
	}
	var kept []tcFilter // tc lists a filter's chain head too, without options
	for _, f := range fs {
		if f.Kind != "" && len(f.Options.Actions) > 0 {
			kept = append(kept, f)
		}
	}
	return kept
}

// TestPsampleListenByGroup: hsflowd.conf's psample { group=5 egress=on }
// as the agent reads it: rules installed by another component with tc
// (DENT's configuration), group 5 on a port's ingress, group 6 (G+1) on
// another port's egress, and a group 7 the agent does not read. The
// direction of each sample comes from its group: group 5's are the
// ingress samples of the port they came in by, at the rate they carry;
// group 6's the egress samples of the port they leave by; group 7's are
// foreign. The rules are left alone.
func TestPsampleListenByGroup(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	in, _ := lab.Veth(t, "sfps0", "sfps1")
	out, _ := lab.Veth(t, "sfps2", "sfps3")
	lab.IP(t, "link", "add", "sfpsbr", "type", "bridge")
	lab.IP(t, "link", "set", "sfps0", "master", "sfpsbr")
	lab.IP(t, "link", "set", "sfps2", "master", "sfpsbr")
	lab.IP(t, "link", "set", "sfpsbr", "up")
	for _, args := range [][]string{
		{"qdisc", "add", "dev", "sfps0", "clsact"},
		{"filter", "add", "dev", "sfps0", "ingress", "matchall", "action", "sample", "rate", "10", "group", "5", "trunc", "128"},
		{"qdisc", "add", "dev", "sfps2", "clsact"},
		{"filter", "add", "dev", "sfps2", "egress", "matchall", "action", "sample", "rate", "1", "group", "6", "trunc", "128"},
		{"qdisc", "add", "dev", "sfps1", "clsact"},
		{"filter", "add", "dev", "sfps1", "egress", "matchall", "action", "sample", "rate", "1", "group", "7"},
	} {
		lab.MustCmd(t, "tc", args...)
	}
	var p *Psample
	lab.Do(t, func() (err error) {
		p, err = NewPsample(PsampleConfig{Workers: 1, IngressGroup: 5, EgressGroup: 6})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{in: 1, out: 1}, map[uint32]sflow.Direction{uint32(out): sflow.DirectionEgress})
	const n = 3000
	lab.Send(t, "sfps1", udpFrames(n)) // to an unknown MAC: flooded out of sfps2
	waitQuiet(t, r)
	r.haltAgent()
	got := r.col.samples(t)

	ing := got[uint32(in)]
	var drops uint32
	for j, s := range ing {
		if s.g.SamplingRate != 10 || s.g.Input != uint32(in) || s.g.Output != 0 {
			t.Fatalf("group 5 sample %d: rate %d input %d output %d, want an ingress sample of %d at 1 in 10", j, s.g.SamplingRate, s.g.Input, s.g.Output, in)
		}
		drops = s.g.Drops
	}
	ok, mean, sd := binomialOK(len(ing)+int(drops), n, 10)
	t.Logf("group 5 (ingress): %d samples + %d dropped of %d frames at 1 in 10 (%.0f ± %.1f)", len(ing), drops, n, mean, sd)
	if !ok {
		t.Errorf("group 5: %d samples + %d drops outside %.0f ± 5×%.1f", len(ing), drops, mean, sd)
	}
	eg, bridged := got[uint32(out)], 0
	for j, s := range eg {
		if s.g.Output != uint32(out) || s.g.SamplingRate != 1 {
			t.Fatalf("group 6 sample %d: output %d rate %d, want an egress sample of %d at 1 in 1", j, s.g.Output, s.g.SamplingRate, out)
		}
		if s.g.Input == uint32(in) {
			bridged++
		}
		drops = s.g.Drops
	}
	t.Logf("group 6 (egress): %d samples (%d bridged from %d) + %d dropped; foreign %d", len(eg), bridged, in, drops, p.ReaderStats(0).Foreign.Load())
	if bridged+int(drops) < n {
		t.Errorf("group 6: %d bridged samples + %d drops, want every one of the %d frames", bridged, drops, n)
	}
	if f := p.ReaderStats(0).Foreign.Load(); f < n {
		t.Errorf("group 7: %d foreign samples, want at least the %d frames sent out of sfps1", f, n)
	}
	r.stop()
	for _, c := range []struct{ port, side, want string }{
		{"sfps0", "ingress", "sample rate 1/10 group 5"},
		{"sfps2", "egress", "sample rate 1/1 group 6"},
		{"sfps1", "egress", "sample rate 1/1 group 7"},
	} {
		if s := tcShow(t, lab, c.port, c.side); !strings.Contains(s, c.want) {
			t.Errorf("listen-only mode changed %s %s's rule:\n%s", c.port, c.side, s)
		}
	}
}

// TestPsampleDentRules: hsflowd.conf's dent { sw=on } as the agent runs
// it: its own matchall + sample rule on each switch port, at the port's
// rate, to group 1 (ingress) and 2 (egress), truncated to the header
// bytes, in software (sw=on; skip_sw otherwise), classification going on
// after it ("continue", as mod_dent writes it). Beside another program's
// filter on the same port: that filter still sees every frame, and
// survives the agent's exit, with the qdisc it sits on; the qdisc the
// agent made on the other port goes with its rules. With sw=off the rule
// is refused on a port that offloads nothing (a veth), and nothing of it
// stays.
func TestPsampleDentRules(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	i2, _ := lab.Veth(t, "sfps2", "sfps3")
	// Another program's filter, on a clsact it made, after where ours goes.
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps0", "clsact")
	lab.MustCmd(t, "tc", "filter", "add", "dev", "sfps0", "ingress", "pref", "10", "matchall", "action", "pass")

	var p *Psample
	lab.Do(t, func() (err error) {
		p, err = NewPsample(PsampleConfig{Workers: 1, IngressGroup: 1, EgressGroup: 2, InstallRules: true, SoftwareRules: true})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 10, i2: 20}, map[uint32]sflow.Direction{uint32(i2): sflow.DirectionBoth})
	for _, c := range []struct {
		port, side   string
		rate, group  uint32
		foreignAfter bool
	}{
		{"sfps0", "ingress", 10, 1, true},
		{"sfps2", "ingress", 20, 1, false},
		{"sfps2", "egress", 20, 2, false},
	} {
		var ours, foreign int
		for _, f := range tcFilters(t, lab, c.port, c.side) {
			a := f.Options.Actions[0]
			switch {
			case f.Pref == 1 && f.Options.Handle == 0x73667073:
				ours++
				if f.Kind != "matchall" || a.Kind != "sample" || a.Rate != c.rate || a.Group != c.group || a.Trunc != 128 ||
					f.Options.SkipSW || a.Control.Type != "continue" {
					t.Errorf("%s %s: our rule %+v, want matchall, sample rate %d group %d trunc 128, no skip_sw, continue", c.port, c.side, f, c.rate, c.group)
				}
			case f.Pref == 10:
				foreign++
			}
		}
		if ours != 1 || (foreign == 1) != c.foreignAfter {
			t.Errorf("%s %s: %d rules of ours, %d foreign filters\n%s", c.port, c.side, ours, foreign, tcShow(t, lab, c.port, c.side))
		}
	}
	const n = 3000
	lab.Send(t, "sfps1", udpFrames(n))
	waitQuiet(t, r)
	r.haltAgent()
	ss := r.col.samples(t)[uint32(i0)]
	var drops uint32
	for j, s := range ss {
		if s.g.SamplingRate != 10 || s.g.Input != uint32(i0) {
			t.Fatalf("sample %d: rate %d input %d", j, s.g.SamplingRate, s.g.Input)
		}
		drops = s.g.Drops
	}
	ok, mean, sd := binomialOK(len(ss)+int(drops), n, 10)
	t.Logf("dent rule on sfps0: %d samples + %d dropped of %d frames at 1 in 10 (%.0f ± %.1f)", len(ss), drops, n, mean, sd)
	if !ok {
		t.Errorf("%d samples + %d drops outside %.0f ± 5×%.1f", len(ss), drops, mean, sd)
	}
	for _, f := range tcFilters(t, lab, "sfps0", "ingress") {
		if f.Pref == 10 && f.Options.Actions[0].Stats.Packets < n {
			t.Errorf("the foreign filter after ours saw %d packets of the %d sent: our rule ended the classification", f.Options.Actions[0].Stats.Packets, n)
		}
	}
	r.stop() // the agent exits: its rules go
	left := tcFilters(t, lab, "sfps0", "ingress")
	if len(left) != 1 || left[0].Pref != 10 {
		t.Errorf("after exit, sfps0 ingress holds %+v, want the foreign filter alone", left)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); !strings.Contains(q, "clsact") {
		t.Errorf("the foreign filter's clsact went:\n%s", q)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps2"); strings.Contains(q, "clsact") {
		t.Errorf("the clsact the agent made on sfps2 stayed:\n%s", q)
	}

	// sw=off: skip_sw on a port that cannot offload: refused, reported,
	// nothing left behind.
	var hw *Psample
	lab.Do(t, func() (err error) {
		hw, err = NewPsample(PsampleConfig{Workers: 1, IngressGroup: 1, InstallRules: true})
		return err
	})
	var err error
	lab.Do(t, func() error {
		err = hw.SetPort(uint32(i2), agent.PortSampling{Rate: 10, HeaderBytes: 128, Direction: sflow.DirectionIngress})
		return nil
	})
	if err == nil {
		t.Errorf("a skip_sw rule on a veth was accepted:\n%s", tcShow(t, lab, "sfps2", "ingress"))
	} else {
		t.Logf("sw=off on a veth: %v", err)
	}
	lab.Do(t, hw.Close)
	if s := tcShow(t, lab, "sfps2", "ingress"); strings.Contains(s, "sample") {
		t.Errorf("a refused rule left:\n%s", s)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps2"); strings.Contains(q, "clsact") {
		t.Errorf("a refused rule left its clsact:\n%s", q)
	}
}
