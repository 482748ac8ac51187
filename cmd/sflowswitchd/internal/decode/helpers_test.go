package decode

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// sharedTestdata is the folder of golden datagrams (sflow/testdata).
func sharedTestdata(t testing.TB) string { return testutil.GoldenDir(t) }

// readTestdata returns the bytes of a golden datagram.
func readTestdata(t testing.TB, name string) []byte { return testutil.Golden(t, name) }
