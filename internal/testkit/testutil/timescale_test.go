package testutil

import (
	"testing"
	"time"
)

func TestScaled(t *testing.T) {
	for env, want := range map[string]time.Duration{
		"": 2 * time.Second, "1": 2 * time.Second, "10": 20 * time.Second, "2.5": 5 * time.Second,
		"0.5": 2 * time.Second, "x": 2 * time.Second,
	} {
		t.Setenv(TimeScaleEnv, env)
		if got := Scaled(2 * time.Second); got != want {
			t.Errorf("%s=%q: Scaled(2s) = %v, want %v", TimeScaleEnv, env, got, want)
		}
	}
}
