package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// loadArgs parses args as the daemon's command line and loads the
// settings (defaults, -config file, flags).
func loadArgs(t *testing.T, args ...string) (config.Settings, error) {
	t.Helper()
	f := newFlags()
	if err := f.fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return f.load()
}

func TestExampleConfigParses(t *testing.T) {
	s, err := loadArgs(t, "-config", "../../packaging/sflowswitchd.conf.example")
	if err != nil {
		t.Fatalf("example config refused: %v", err)
	}
	// Its collectors are commented out, as hsflowd ships them: the
	// default, this host's 127.0.0.1:6343, until the operator sets one.
	if len(s.Collectors) != 1 || s.Collectors[0].Address != config.DefaultCollector || s.Polling != 20 || s.HeaderBytes != 128 {
		t.Fatalf("example config read as %+v", s)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("sampling = 500\npolling = 30\n[[collector]]\naddress = \"198.18.0.9:7000\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadArgs(t, "-config", file, "-sampling", "77", "-collector", "198.18.0.5:6343", "-collector", "198.18.0.6")
	if err != nil {
		t.Fatal(err)
	}
	if s.Sampling != 77 || s.Polling != 30 || len(s.Collectors) != 2 || s.Collectors[1].Address != "198.18.0.6" {
		t.Fatalf("got %+v", s)
	}
}

func TestDefaults(t *testing.T) {
	s, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Collectors) != 1 || s.Collectors[0].Address != config.DefaultCollector || s.Polling != 20 || s.HeaderBytes != 128 || s.Workers < 1 ||
		s.RingBytes != dataplane.DefaultRingBytes {
		t.Fatalf("defaults %+v", s)
	}
	for _, tc := range []struct {
		speed uint64
		want  uint32
	}{{1000, 1000}, {10000, 10000}, {10, 100}, {0, config.DefaultSamplingUnknownSpeed}, {100000, 100000}} {
		if got := s.SamplingRate(tc.speed); got != tc.want {
			t.Errorf("rate at %d Mb/s = %d, want %d", tc.speed, got, tc.want)
		}
	}
}

func TestInvalidConfigRefused(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key":    "samplng = 10\n",
		"bad toml":       "sampling = \n",
		"bad header":     "header_bytes = 1000\n",
		"bad collector":  "[[collector]]\naddress = \"198.18.0.1:99999\"\n",
		"bad size":       "[[collector]]\naddress = \"198.18.0.1\"\nmax_datagram_size = 10\n",
		"bad glob":       "ports = [\"[\"]\n",
		"bad level":      "log_level = \"loud\"\n",
		"ring not 2^n":   "ring_bytes = 3000000\n",
		"ring too small": "ring_bytes = 1024\n",
		"ring too large": "ring_bytes = 2147483648\n",
		"bad direction":  "direction = \"out\"\n",
		"bad port dir":   "[port_direction]\np1 = \"sideways\"\n",
	} {
		file := filepath.Join(t.TempDir(), "c.conf")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadArgs(t, "-config", file)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestEveryFlagOverrides checks that each daemon flag, given on the
// command line, changes the loaded settings (a flag missing from the
// override table would be parsed and then silently ignored).
func TestEveryFlagOverrides(t *testing.T) {
	values := map[string]string{
		"collector":                   "198.18.0.1",
		"sampling":                    "7",
		"sampling-unknown-speed":      "9",
		"polling":                     "5",
		"header-bytes":                "64",
		"ports":                       "p1",
		"monitor-ports":               "p2",
		"agent-address":               "198.18.0.2",
		"agent-interface":             "eth9",
		"workers":                     strconv.Itoa(runtime.NumCPU() + 1),
		"metrics":                     "127.0.0.1:9116",
		"metrics-allow-remote":        "true",
		"app-api-allow-remote":        "true",
		"log-level":                   "debug",
		"agentx":                      "off",
		"app-api":                     "127.0.0.1:36343",
		"apm-interval":                "5",
		"apm-reports":                 "5",
		"snmp-receivers":              "4",
		"snmp-instances":              "2",
		"state-dir":                   "/var/lib/elsewhere",
		"hsflowd-conf":                representativeHsflowd,
		"max-ports":                   "300",
		"ring-bytes":                  "65536",
		"hook":                        "xdp",
		"port-hook":                   "p1=tc",
		"psample-group":               "7",
		"sonic":                       "true",
		"sonic-db-config":             "/run/elsewhere/database_config.json",
		"psample-ingress-group":       "5",
		"psample-egress-group":        "6",
		"dent":                        "true",
		"dent-switchport":             "^eth[0-9]$",
		"dent-sw":                     "true",
		"transit":                     "true",
		"direction":                   "both",
		"port-direction":              "p1=egress",
		"drops":                       "off",
		"drops-limit":                 "7",
		"drops-header-bytes":          "64",
		"pin-dir":                     "/sys/fs/bpf/elsewhere",
		"max-samples-per-second":      "5000",
		"max-port-samples-per-second": "700",
		"dns-sd":                      "true",
		"dns-sd-domain":               ".example.net",
		"dns-sd-resolv-conf":          "/etc/elsewhere.conf",
		"dns-sd-start-delay":          "0",
		"psample-intake":              "netlink",
	}
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	newFlags().fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name == "config" || fl.Name == "cleanup" || fl.Name == "upgrade-check" || fl.Name == "check-config" || fl.Name == "version" {
			return // not settings: what the command does
		}
		v, ok := values[fl.Name]
		if !ok {
			t.Errorf("flag -%s: no test value", fl.Name)
			return
		}
		s, err := loadArgs(t, "-"+fl.Name, v)
		if err != nil {
			t.Fatalf("-%s %s: %v", fl.Name, v, err)
		}
		if reflect.DeepEqual(s, def) {
			t.Errorf("-%s %s left the settings at their defaults", fl.Name, v)
		}
	})
}

// TestPortDirection: -direction sets every port's direction (over the
// file's port_direction), -port-direction per port by name or glob, an
// exact name before patterns; a bad entry is refused.
func TestPortDirection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("direction = \"egress\"\n[port_direction]\n\"p*\" = \"both\"\np2 = \"ingress\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"-config", file}, map[string]string{"p1": "both", "p2": "ingress", "eth0": "egress"}},
		{[]string{"-config", file, "-direction", "ingress"}, map[string]string{"p1": "ingress", "p2": "ingress", "eth0": "ingress"}},
		{[]string{"-direction", "both", "-port-direction", "p1=egress, eth*=ingress"}, map[string]string{"p1": "egress", "p2": "both", "eth0": "ingress"}},
	} {
		s, err := loadArgs(t, tc.args...)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		for port, want := range tc.want {
			if got := s.PortDirectionOf(port); got != want {
				t.Errorf("%q: port %s direction %q, want %q", tc.args, port, got, want)
			}
		}
	}
	if _, err := loadArgs(t, "-port-direction", "p1"); err == nil {
		t.Error("-port-direction p1 (no direction) accepted")
	}
	if _, err := loadArgs(t, "-direction", "out"); err == nil {
		t.Error("-direction out accepted")
	}
}
