package testutil

import (
	"os"
	"strconv"
	"time"
)

// TimeScaleEnv names the environment variable that says how many times
// slower than a real machine the tests run: a number >= 1, default 1.
// The test VMs of `make vagrant-test` set it under software emulation
// (qemu's TCG, vagrant/README.md), where everything takes 10-20 times
// longer; elsewhere it is unset.
const TimeScaleEnv = "SFLOW_TEST_TIME_SCALE"

// TimeScale returns the factor of TimeScaleEnv (1 when unset or invalid).
// Only time is scaled: bounds that the product promises in time (a
// hot-plugged port sampled within 2 s, an idle daemon under 0.2% of a
// core) and how long a test waits for something. Counts and accounting
// are never scaled.
func TimeScale() float64 {
	f, err := strconv.ParseFloat(os.Getenv(TimeScaleEnv), 64)
	if err != nil || f < 1 {
		return 1
	}
	return f
}

// Scaled returns d times TimeScale.
func Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * TimeScale())
}
