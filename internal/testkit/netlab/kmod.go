package netlab

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// kernelLacks is a testskip.Features that reports one kernel feature
// missing (a qdisc or link kind the running kernel has neither built in
// nor as a module), and nothing else.
type kernelLacks struct {
	name, why string
}

// Unavailable implements testskip.Features.
func (k kernelLacks) Unavailable(name string) error {
	if name == k.name {
		return fmt.Errorf("the kernel lacks %s: %s", k.name, k.why)
	}
	return nil
}

// AddQdisc adds qdisc kind (tc qdisc add dev DEV root KIND ARGS...) to
// link dev in namespace ns. A kernel without that qdisc kind (no sch_KIND,
// built in or as a module: this machine's kernel has no netem, Debian's
// do) skips t as a missing kernel feature "sch_KIND" (testskip.Feature);
// any other failure fails t.
func (l *Lab) AddQdisc(t testing.TB, ns, dev, kind string, args ...string) {
	t.Helper()
	cmd := append([]string{"qdisc", "add", "dev", dev, "root", kind}, args...)
	out, err := l.Run(ns, "tc", cmd...)
	if err == nil {
		return
	}
	if bytes.Contains(out, []byte("qdisc kind is unknown")) {
		name := "sch_" + kind
		testskip.Feature(t, kernelLacks{name, string(bytes.TrimSpace(out))}, name)
	}
	t.Fatalf("tc %v in %s: %v\n%s", cmd, ns, err, out)
}
