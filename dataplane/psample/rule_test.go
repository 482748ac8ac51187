package psample

import (
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
)

// TestRuleLifecycle: the rule goes in, changes in place, comes out; tc's
// own decoder shows what the kernel holds; the clsact qdisc the owner
// made goes with its last rule.
func TestRuleLifecycle(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	var o *Owner
	lab.Do(t, func() (err error) { o, err = NewOwner(); return err })
	defer lab.Do(t, o.Close)
	tcShow := func(side string) string { return lab.MustCmd(t, "tc", "-s", "filter", "show", "dev", "sfps0", side) }

	lab.Do(t, func() error { return o.Install(Rule{IfIndex: i0, Rate: 10, Group: 5, TruncSize: 64}) })
	out := tcShow("ingress")
	if !strings.Contains(out, "matchall") || !strings.Contains(out, "sample rate 1/10 group 5 trunc_size 64") ||
		!strings.Contains(out, "pref 1") || !strings.Contains(out, "handle 0x73667073") {
		t.Fatalf("tc filter show ingress:\n%s", out)
	}
	if !strings.Contains(out, "not_in_hw") && !strings.Contains(out, "skip_hw") && strings.Contains(out, "skip_sw") {
		t.Errorf("a veth rule must run in software:\n%s", out)
	}
	// In place: one filter, the same action, the new rate and group.
	var before, after []Installed
	lab.Do(t, func() (err error) { before, err = Rules(i0, false); return err })
	lab.Do(t, func() error { return o.Install(Rule{IfIndex: i0, Rate: 1000, Group: 6, TruncSize: 128}) })
	lab.Do(t, func() (err error) { after, err = Rules(i0, false); return err })
	if len(before) != 1 || len(after) != 1 || before[0].ActIndex == 0 || after[0].ActIndex != before[0].ActIndex || after[0].Rate != 1000 {
		t.Errorf("the change was not made in place: before %+v, after %+v", before, after)
	}
	out = tcShow("ingress")
	if strings.Count(out, "handle 0x73667073") != 1 || !strings.Contains(out, "sample rate 1/1000 group 6 trunc_size 128") {
		t.Fatalf("after the change:\n%s", out)
	}
	lab.Do(t, func() error { return o.Install(Rule{IfIndex: i0, Egress: true, Rate: 7, Group: 8}) })
	var rs []Installed
	lab.Do(t, func() (err error) { rs, err = Rules(i0, true); return err })
	if len(rs) != 1 || !rs[0].Ours || rs[0].Rate != 7 || rs[0].Group != 8 || !rs[0].OwnQdisc {
		t.Fatalf("egress rules %+v", rs)
	}
	lab.Do(t, func() error { return o.Remove(i0, false) })
	if out := tcShow("ingress"); strings.Contains(out, "matchall") {
		t.Errorf("ingress rule left:\n%s", out)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); !strings.Contains(q, "clsact") {
		t.Errorf("clsact gone while the egress rule is on it:\n%s", q)
	}
	lab.Do(t, func() error { return o.Remove(i0, true) })
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); strings.Contains(q, "clsact") {
		t.Errorf("the clsact qdisc the owner made is left:\n%s", q)
	}
}

// TestRuleOthersLeftAlone: a filter an operator put at our place is not
// taken over; a qdisc that was there stays after our rule leaves.
func TestRuleOthersLeftAlone(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps0", "clsact")
	lab.MustCmd(t, "tc", "filter", "add", "dev", "sfps0", "egress", "pref", "1", "handle", "0x73667073", "matchall",
		"action", "sample", "rate", "3", "group", "9")
	var o *Owner
	lab.Do(t, func() (err error) { o, err = NewOwner(); return err })
	defer lab.Do(t, o.Close)
	var errEgress error
	lab.Do(t, func() error {
		errEgress = o.Install(Rule{IfIndex: i0, Egress: true, Rate: 10, Group: 5})
		return o.Install(Rule{IfIndex: i0, Rate: 10, Group: 5})
	})
	if errEgress == nil {
		t.Error("another program's filter at our place was replaced")
	}
	lab.Do(t, func() error { return o.Remove(i0, false) })
	lab.Do(t, func() error { return o.Remove(i0, true) })
	if out := lab.MustCmd(t, "tc", "filter", "show", "dev", "sfps0", "egress"); !strings.Contains(out, "sample rate 1/3 group 9") {
		t.Errorf("the operator's filter is gone:\n%s", out)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); !strings.Contains(q, "clsact") {
		t.Errorf("the operator's clsact is gone:\n%s", q)
	}
}

// TestRemoveStale: the rules of an owner that died (its name released:
// Close, as the kernel does at exit however the process ends) are removed
// at the next start; a live owner's stay.
func TestRemoveStale(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	var dead, live *Owner
	lab.Do(t, func() (err error) {
		if dead, err = NewOwner(); err != nil {
			return err
		}
		if live, err = NewOwner(); err != nil {
			return err
		}
		if err := dead.Install(Rule{IfIndex: i0, Rate: 2, Group: 1}); err != nil {
			return err
		}
		if err := dead.Install(Rule{IfIndex: i0, Egress: true, Rate: 2, Group: 2}); err != nil {
			return err
		}
		return live.Install(Rule{IfIndex: i1, Rate: 2, Group: 3})
	})
	defer lab.Do(t, live.Close)
	lab.Do(t, dead.Close)
	var n int
	lab.Do(t, func() (err error) { n, err = RemoveStale(); return err })
	if n != 2 {
		t.Errorf("removed %d stale rules, want 2", n)
	}
	if out := lab.MustCmd(t, "tc", "filter", "show", "dev", "sfps0", "ingress"); strings.Contains(out, "matchall") {
		t.Errorf("stale rule left:\n%s", out)
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); strings.Contains(q, "clsact") {
		t.Errorf("the dead owner's qdisc is left:\n%s", q)
	}
	if out := lab.MustCmd(t, "tc", "filter", "show", "dev", "sfps1", "ingress"); !strings.Contains(out, "sample rate 1/2 group 3") {
		t.Errorf("the live owner's rule was removed:\n%s", out)
	}
	lab.Do(t, func() error { return live.Remove(i1, false) })
}
