package psample

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
)

// TestRuleVerdictContinue: the agent's sample rule at priority 1 lets the
// port's own filters after it classify every frame, at ingress and at
// egress (verdict continue). A rule with the verdict pipe, as earlier
// versions wrote it, ends the classification there (the later filter
// sees nothing), and Install replaces it in place (the same action) with
// continue again.
func TestRuleVerdictContinue(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	// The port's own filters, on a clsact the port's owner made, after
	// where ours goes.
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps0", "clsact")
	for _, side := range []string{"ingress", "egress"} {
		lab.MustCmd(t, "tc", "filter", "add", "dev", "sfps0", side, "pref", "10", "matchall", "action", "pass")
	}
	var o *Owner
	lab.Do(t, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		return errors.Join(o.Install(Rule{IfIndex: i0, Rate: 1, Group: 41, TruncSize: 64}),
			o.Install(Rule{IfIndex: i0, Egress: true, Rate: 1, Group: 42, TruncSize: 64}))
	})
	defer lab.Do(t, func() error { return errors.Join(o.Remove(i0, false), o.Remove(i0, true), o.Close()) })
	rule := func(egress bool) *Installed {
		var r *Installed
		lab.Do(t, func() (err error) { r, err = ourRule(i0, egress); return err })
		if r == nil {
			t.Fatalf("no rule of ours at %s", Side(egress))
		}
		return r
	}
	for _, egress := range []bool{false, true} {
		if r := rule(egress); r.Pipe {
			t.Errorf("%s: our rule's verdict is pipe, want continue", Side(egress))
		}
	}
	const n = 400
	in0, eg0 := laterFilterPackets(t, lab, "ingress"), laterFilterPackets(t, lab, "egress")
	lab.Send(t, "sfps1", frames(n)) // into sfps0: its ingress
	lab.Send(t, "sfps0", frames(n)) // out of sfps0: its egress
	in1, eg1 := laterFilterPackets(t, lab, "ingress"), laterFilterPackets(t, lab, "egress")
	t.Logf("the filter after ours saw %d of %d frames at ingress, %d of %d at egress", in1-in0, n, eg1-eg0, n)
	if in1-in0 < n || eg1-eg0 < n {
		t.Errorf("the port's filter after ours saw %d (ingress) and %d (egress) of %d frames each: our rule ended the classification", in1-in0, eg1-eg0, n)
	}

	// An earlier version's rule: pipe. The later filter sees nothing.
	idx := rule(false).ActIndex
	lab.Do(t, func() error { return o.Install(Rule{IfIndex: i0, Rate: 1, Group: 41, TruncSize: 64, Pipe: true}) })
	if r := rule(false); !r.Pipe || r.ActIndex != idx {
		t.Fatalf("pipe rule read back as %+v (action %d, want %d)", r, r.ActIndex, idx)
	}
	lab.Send(t, "sfps1", frames(n))
	if in2 := laterFilterPackets(t, lab, "ingress"); in2 != in1 {
		t.Errorf("after a pipe rule the later filter saw %d frames, want none", in2-in1)
	}
	// Installed again as the agent installs it: continue, in place.
	lab.Do(t, func() error { return o.Install(Rule{IfIndex: i0, Rate: 1, Group: 41, TruncSize: 64}) })
	if r := rule(false); r.Pipe || r.ActIndex != idx {
		t.Fatalf("reinstalled rule %+v (action %d, want %d, continue)", r, r.ActIndex, idx)
	}
	in2 := laterFilterPackets(t, lab, "ingress")
	lab.Send(t, "sfps1", frames(n))
	if in3 := laterFilterPackets(t, lab, "ingress"); in3-in2 < n {
		t.Errorf("after the rule was replaced the later filter saw %d of %d frames", in3-in2, n)
	}
}

// laterFilterPackets is the packet count of the pass action of sfps0's
// filter at priority 10 on side (tc -s -j filter show).
func laterFilterPackets(t *testing.T, lab *pslab.Lab, side string) uint64 {
	t.Helper()
	out := lab.MustCmd(t, "tc", "-s", "-j", "filter", "show", "dev", "sfps0", side)
	var fs []struct {
		Pref    int `json:"pref"`
		Options struct {
			Actions []struct {
				Kind  string `json:"kind"`
				Stats struct {
					Packets uint64 `json:"packets"`
				} `json:"stats"`
			} `json:"actions"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("tc -s -j filter show: %v\n%s", err, out)
	}
	for _, f := range fs {
		if f.Pref == 10 && len(f.Options.Actions) > 0 {
			return f.Options.Actions[0].Stats.Packets
		}
	}
	t.Fatalf("no filter at priority 10 on sfps0 %s:\n%s", side, out)
	return 0
}
