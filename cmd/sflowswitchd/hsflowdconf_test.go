package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

const representativeHsflowd = "../../config/hsflowdconf/testdata/switch.hsflowd.conf"

// loadWithNotes is loadArgs, also returning what load printed (the
// ignored hsflowd settings).
func loadWithNotes(t *testing.T, args ...string) (config.Settings, string, error) {
	t.Helper()
	f := newFlags()
	var out bytes.Buffer
	f.fs.SetOutput(&out)
	if err := f.fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	s, err := f.load()
	return s, out.String(), err
}

// TestHsflowdConfLikeTOML: a representative hsflowd.conf (several
// collectors, sampling.10G, bps_ratio, agent.cidr, pcap devices with and
// without their own rate, json, modules that do not apply) loads to the
// same settings as the equivalent TOML file, and every ignored setting
// is printed once with its line, column and reason.
func TestHsflowdConfLikeTOML(t *testing.T) {
	config.ForgetReportedIgnored()
	h, notes, err := loadWithNotes(t, "-hsflowd-conf", representativeHsflowd)
	if err != nil {
		t.Fatal(err)
	}
	toml, err := loadArgs(t, "-config", "testdata/switch.toml")
	if err != nil {
		t.Fatal(err)
	}
	if h.HsflowdConf != representativeHsflowd {
		t.Fatalf("HsflowdConf %q", h.HsflowdConf)
	}
	h.HsflowdConf = ""
	if !reflect.DeepEqual(h, toml) {
		t.Fatalf("hsflowd.conf read as\n%+v\nthe TOML as\n%+v", h, toml)
	}
	for _, want := range []string{
		`line=12 col=3 setting=sampling.app.myapp reason="application sampling`,
		`line=22 col=3 setting=ulog reason="another packet-sampling source`,
		`line=23 col=3 setting=nflog reason=`,
		`line=24 col=3 setting=k8s reason=`,
		`line=25 col=3 setting=systemd reason=`,
		`line=26 col=3 setting=Cumulus reason=`,
		`line=27 col=24 setting=start reason="drop sources are the kernel's`,
	} {
		if strings.Count(notes, want) != 1 {
			t.Errorf("notes lack %q once:\n%s", want, notes)
		}
	}
	// Structured as the daemon's log (logfmt), one line each.
	if n := strings.Count(notes, `level=WARN msg="hsflowd setting ignored" file=`+representativeHsflowd+" "); n != 7 {
		t.Errorf("%d notes in logfmt, want 7:\n%s", n, notes)
	}
	if n := strings.Count(notes, "\n"); n != 7 {
		t.Errorf("%d notes, want 7:\n%s", n, notes)
	}
	// A reload (the same file read again) does not print them again.
	if _, notes, err := loadWithNotes(t, "-hsflowd-conf", representativeHsflowd); err != nil || notes != "" {
		t.Fatalf("second load printed %q (%v)", notes, err)
	}
	// The rates: a port's own, then its speed's, then the bit/s ratio
	// (2 Mb/s per sample: 1 in 500 at 1G, at least 1), then unknown speed.
	for _, tc := range []struct {
		port  string
		speed uint64
		want  uint32
	}{{"swp2", 10000, 256}, {"swp1", 10000, 10000}, {"swp1", 1000, 500}, {"swp1", 1, 1}, {"swp1", 0, 400}} {
		if got := h.PortSamplingRate(tc.port, tc.speed); got != tc.want {
			t.Errorf("%s at %d Mb/s: rate %d, want %d", tc.port, tc.speed, got, tc.want)
		}
	}
}

// TestHsflowdConfLayers: our config file and flags override hsflowd.conf;
// the config file can name it (relative to itself); -sampling on the
// command line applies to every port.
func TestHsflowdConfLayers(t *testing.T) {
	dir := t.TempDir()
	hs := filepath.Join(dir, "hsflowd.conf")
	if err := os.WriteFile(hs, []byte("sflow {\n polling = 30\n sampling.10G = 9000\n collector { ip = 198.18.0.7 }\n pcap { dev = swp3 sampling = 64 }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(conf, []byte("hsflowd_conf = \"hsflowd.conf\"\npolling = 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadArgs(t, "-config", conf, "-header-bytes", "64")
	if err != nil {
		t.Fatal(err)
	}
	if s.Polling != 10 || s.HeaderBytes != 64 || len(s.Collectors) != 1 || s.Collectors[0].Address != "198.18.0.7:6343" ||
		s.PortSamplingRate("swp9", 10000) != 9000 || s.PortSamplingRate("swp3", 10000) != 64 || s.HsflowdConf != hs {
		t.Fatalf("layers: %+v", s)
	}
	s, err = loadArgs(t, "-config", conf, "-sampling", "5")
	if err != nil {
		t.Fatal(err)
	}
	if s.PortSamplingRate("swp9", 10000) != 5 || s.PortSamplingRate("swp3", 10000) != 5 {
		t.Fatalf("-sampling 5 does not apply to every port: %+v", s)
	}
	// -hsflowd-conf on the command line wins over the file's key.
	other := filepath.Join(dir, "other.conf")
	if err := os.WriteFile(other, []byte("sflow { polling = 7 collector { ip = 198.18.0.8 } }"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = loadArgs(t, "-config", conf, "-hsflowd-conf", other); err != nil || s.Collectors[0].Address != "198.18.0.8:6343" || s.Polling != 10 {
		t.Fatalf("%+v %v", s, err)
	}
}

// TestHsflowdHeaderBytesRaised: hsflowd takes headerBytes 0..256; below
// the 20 sflowswitchd exports it is raised to 20, and said.
func TestHsflowdHeaderBytesRaised(t *testing.T) {
	config.ForgetReportedIgnored()
	for _, v := range []int{0, 19} {
		path := filepath.Join(t.TempDir(), "hsflowd.conf")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("sflow { headerBytes = %d }", v)), 0o644); err != nil {
			t.Fatal(err)
		}
		s, notes, err := loadWithNotes(t, "-hsflowd-conf", path)
		if err != nil || s.HeaderBytes != 20 {
			t.Fatalf("headerBytes = %d: header_bytes %d, %v; want 20", v, s.HeaderBytes, err)
		}
		if want := fmt.Sprintf(`setting=headerBytes reason="%d raised to 20`, v); !strings.Contains(notes, want) {
			t.Errorf("headerBytes = %d: notes lack %q:\n%s", v, want, notes)
		}
	}
}

// TestHsflowdConfRefused: an invalid hsflowd.conf is refused with its
// line and column, whether the parser or the mapping onto sflowswitchd's
// settings refuses it; nothing is applied.
func TestHsflowdConfRefused(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"syntax":          {"sflow {\n polling = 5\n", ":2:13: end of file inside the sflow block"},
		"unknown setting": {"sflow {\n samplng = 5\n}", `:2:2: unknown setting "samplng"`},
		"value":           {"sflow { headerBytes = 300 }", ":1:23: headerBytes: 300 outside 0..256"},
		"sampling off":    {"sflow {\n sampling = 0 }", ":2:13: sampling = 0"},
		"speed rate 0":    {"sflow { sampling.1G = 0 }", ":1:23: a sampling rate of 0"},
		"pcap sampling 0": {"sflow { pcap { dev = swp1 sampling = 0 } }", ":1:38: pcap sampling = 0"},
		"bad collector":   {"sflow { collector { ip = 198.18.0.1 udpport = 0 } }", ":1:47: udpport: 0 outside 1..65535"},
		// a name of this host at its AgentX port.
		"localhost:705": {"sflow { collector { ip = localhost udpport = 705 } }", "collector 1: localhost is this host: collector 127.0.0.1:705: port 705 is this host's SNMP/AgentX port"},
		// 20,001 collectors reached 5 GB.
		// The file (900 KB) is over the size limit; 8000 fit.
		"20001 collectors": {"sflow {\n" + strings.Repeat(" collector { ip = 198.18.0.1 }\n", 20001) + "}\n", "larger than 262144 bytes"},
		"8000 collectors":  {"sflow {\n" + strings.Repeat("collector{ip=198.18.0.1}\n", 8000) + "}\n", "collectors: 8000, at most 16"},
		"endless file":     {"", "reading hsflowd config"},
		"missing file":     {"", "reading hsflowd config"},
		"not sflow at top": {"json { }", `:1:1: expected "sflow {"`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hsflowd.conf")
			if name == "endless file" {
				path = "/dev/zero"
			} else if name != "missing file" {
				if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := loadArgs(t, "-hsflowd-conf", path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
