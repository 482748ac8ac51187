package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExampleConfigParses(t *testing.T) {
	f := newFlags()
	if err := f.fs.Parse([]string{"-config", "../../deploy/sflowswitchd.conf.example"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.load()
	if err != nil {
		t.Fatalf("example config refused: %v", err)
	}
	if len(s.Collectors) != 2 || s.Collectors[0].MaxDatagramSize != 1400 || s.Polling != 20 || s.HeaderBytes != 128 {
		t.Fatalf("example config read as %+v", s)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("sampling = 500\npolling = 30\n[[collector]]\naddress = \"198.18.0.9:7000\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFlags()
	if err := f.fs.Parse([]string{"-config", file, "-sampling", "77", "-collector", "198.18.0.5:6343", "-collector", "198.18.0.6"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if s.Sampling != 77 || s.Polling != 30 || len(s.Collectors) != 2 || s.Collectors[1].Address != "198.18.0.6" {
		t.Fatalf("got %+v", s)
	}
}

func TestDefaults(t *testing.T) {
	f := newFlags()
	if err := f.fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	s, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Collectors) != 1 || s.Collectors[0].Address != DefaultCollector || s.Polling != 20 || s.HeaderBytes != 128 || s.Workers < 1 {
		t.Fatalf("defaults %+v", s)
	}
	for _, tc := range []struct {
		speed uint64
		want  uint32
	}{{1000, 1000}, {10000, 10000}, {10, 100}, {0, DefaultSamplingUnknownSpeed}, {100000, 100000}} {
		if got := s.samplingRate(tc.speed); got != tc.want {
			t.Errorf("rate at %d Mb/s = %d, want %d", tc.speed, got, tc.want)
		}
	}
}

func TestInvalidConfigRefused(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key":   "samplng = 10\n",
		"bad toml":      "sampling = \n",
		"bad header":    "header_bytes = 1000\n",
		"bad collector": "[[collector]]\naddress = \"198.18.0.1:99999\"\n",
		"bad size":      "[[collector]]\naddress = \"198.18.0.1\"\nmax_datagram_size = 10\n",
		"bad glob":      "ports = [\"[\"]\n",
		"bad level":     "log_level = \"loud\"\n",
	} {
		file := filepath.Join(t.TempDir(), "c.conf")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		f := newFlags()
		if err := f.fs.Parse([]string{"-config", file}); err != nil {
			t.Fatal(err)
		}
		_, err := f.load()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}
