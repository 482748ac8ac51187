package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadHsflowd loads the settings of an hsflowd.conf holding text.
func loadHsflowd(t *testing.T, text string) (Settings, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hsflowd.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var notes bytes.Buffer
	s, err := Load(Layers{HsflowdConf: path, Notes: &notes})
	return s, notes.String(), err
}

// TestHsflowdPlatform: the Cumulus/DENT-style hsflowd.conf maps
// onto listen-only psample by group (G ingress, G+1 egress), the DENT
// rules and the drop limit, and nothing of it is reported ignored but
// dropmon's switches.
func TestHsflowdPlatform(t *testing.T) {
	ForgetReportedIgnored()
	s, notes, err := loadHsflowd(t, `sflow {
  collector { ip=127.0.0.1 udpport=6399 }
  psample { group=1 egress=on }
  dropmon { limit=50 start=on sw=on hw=off }
  dent { sw=off }
}
`)
	if err != nil {
		t.Fatal(err)
	}
	if s.PsampleIngressGroup != 1 || s.PsampleEgressGroup != 2 || s.PsampleGroup != 0 || s.Direction != "both" {
		t.Errorf("psample: ingress group %d, egress group %d, group %d, direction %q; want 1, 2, 0, both",
			s.PsampleIngressGroup, s.PsampleEgressGroup, s.PsampleGroup, s.Direction)
	}
	if !s.Dent || s.DentSW || s.DentSwitchPort != DefaultDentSwitchPort {
		t.Errorf("dent %v sw %v switchport %q", s.Dent, s.DentSW, s.DentSwitchPort)
	}
	if s.Drops != "on" || s.DropsLimit != 50 {
		t.Errorf("dropmon: drops %q limit %d", s.Drops, s.DropsLimit)
	}
	for _, want := range []string{"setting=start reason=", "setting=sw reason=", "setting=hw reason="} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "setting=psample ") || strings.Contains(notes, "setting=dent ") {
		t.Errorf("psample or dent reported ignored:\n%s", notes)
	}
	for _, port := range []string{"swp1", "swp12s3"} {
		if !s.SwitchPort(port) {
			t.Errorf("%s is not a switch port", port)
		}
	}
	for _, port := range []string{"eth0", "swp", "lo", "bond0"} {
		if s.SwitchPort(port) {
			t.Errorf("%s is a switch port", port)
		}
	}

	// Egress only: G+1 alone, sampled at egress.
	s, _, err = loadHsflowd(t, "sflow { psample { group=7 ingress=off egress=on } }")
	if err != nil || s.PsampleIngressGroup != 0 || s.PsampleEgressGroup != 8 || s.Direction != "egress" || s.Dent {
		t.Errorf("egress only: %d %d %q %v (%v)", s.PsampleIngressGroup, s.PsampleEgressGroup, s.Direction, s.Dent, err)
	}
	// dent alone: hsflowd's psample defaults, group 1 ingress.
	s, _, err = loadHsflowd(t, "sflow { dent { sw=on switchport=^eth[0-9]$ } }")
	if err != nil || s.PsampleIngressGroup != 1 || s.PsampleEgressGroup != 0 || !s.DentSW || !s.SwitchPort("eth1") || s.SwitchPort("swp1") {
		t.Errorf("dent alone: %+v (%v)", s, err)
	}
}

// TestPlatformRefused: listen-only modes that contradict each other, and
// a psample intake that does not exist.
func TestPlatformRefused(t *testing.T) {
	for name, mod := range map[string]func(*Settings){
		"group and by group":  func(s *Settings) { s.PsampleGroup, s.PsampleIngressGroup = 3, 1 },
		"same group":          func(s *Settings) { s.PsampleIngressGroup, s.PsampleEgressGroup = 4, 4 },
		"dent without groups": func(s *Settings) { s.Dent = true },
		"dent bad regex":      func(s *Settings) { s.Dent, s.PsampleIngressGroup, s.DentSwitchPort = true, 1, "(" },
		"psample intake":      func(s *Settings) { s.PsampleIntake = "perf" },
	} {
		s := Defaults()
		s.Workers, s.Collectors = 1, []Collector{{Address: DefaultCollector}}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
