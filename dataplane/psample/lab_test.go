package psample

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// moduleProbe answers testskip.Feature for the psample features: the
// modules are loaded first (the VM's Debian kernels have them as
// modules), then probed as the daemon probes them.
type moduleProbe struct{}

func (moduleProbe) Unavailable(name string) error {
	switch name {
	case "psample":
		return ProbePsample()
	case "act_sample":
		return ProbeActSample()
	}
	return fmt.Errorf("unknown feature %s", name)
}

// needActSample loads psample and act_sample where they are modules and
// skips t (testskip.Feature) when the kernel has either not.
func needActSample(t testing.TB) {
	t.Helper()
	testskip.Root(t)
	_ = exec.Command("modprobe", "-q", "psample").Run()
	_ = exec.Command("modprobe", "-q", "act_sample").Run()
	testskip.Feature(t, moduleProbe{}, "psample")
	testskip.Feature(t, moduleProbe{}, "act_sample")
}
