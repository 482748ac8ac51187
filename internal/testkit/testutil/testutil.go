// Package testutil holds the helpers that tests of several packages share:
// the repository's golden sFlow datagrams and MIB modules, and the rule
// for tests that need root. Everything it reads lives inside the
// repository, so a clone with nothing beside it runs its tests.
package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoDir is the repository's top folder, found from this file's own
// location (the tests run with their package folder as working directory,
// which differs per package).
func RepoDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testutil: runtime.Caller failed")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// GoldenDir is the folder of golden sFlow datagrams (sflow/testdata): hand-
// built from the spec texts, each with the reference decoder's (sflowtool)
// reading beside it. It fails the test if the folder is missing.
func GoldenDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoDir(), "sflow", "testdata")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("golden datagrams not found: %v", err)
	}
	return dir
}

// Golden returns the bytes of the golden datagram file name (e.g.
// "flow_core.bin") from GoldenDir.
func Golden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(GoldenDir(t), name))
	if err != nil {
		t.Fatalf("golden datagram: %v", err)
	}
	return b
}

// MIBDir is the repository's folder of MIB modules (mib/modules/: SFLOW-MIB,
// APM-MIB and what they import), for net-snmp's -M.
func MIBDir() string {
	return filepath.Join(RepoDir(), "mib", "modules")
}

// AddGoldenSeeds adds every golden datagram of GoldenDir (the valid and
// the malformed ones) to f's seed corpus.
func AddGoldenSeeds(f *testing.F) {
	f.Helper()
	seeds, err := filepath.Glob(filepath.Join(GoldenDir(f), "*.bin"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed datagrams: %v", err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}
