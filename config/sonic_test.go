package config

import (
	"io"
	"strings"
	"testing"
)

// TestSonicFromHsflowdConf: the sflow container's hsflowd.conf turns
// SONiC mode on, with its waitReady.
func TestSonicFromHsflowdConf(t *testing.T) {
	s, err := Load(Layers{HsflowdConf: "hsflowdconf/testdata/sonic.hsflowd.conf", Notes: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Sonic || s.SonicWaitReady != 60 || s.SonicTCP || s.SonicDBConfig != DefaultSonicDBConfig || s.SonicAutoFile != DefaultSonicAutoFile {
		t.Errorf("sonic settings: %v %d %v %q %q", s.Sonic, s.SonicWaitReady, s.SonicTCP, s.SonicDBConfig, s.SonicAutoFile)
	}
	if s.DropsLimit != 50 {
		t.Errorf("drops_limit %d", s.DropsLimit)
	}
}

func TestSonicValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		set  func(*Settings)
		want string
	}{
		"ok":             {func(s *Settings) { s.Sonic = true }, ""},
		"group":          {func(s *Settings) { s.Sonic, s.PsampleGroup = true, 3 }, "psample_group 3 with sonic"},
		"hook":           {func(s *Settings) { s.Sonic, s.Hook = true, "xdp" }, "hook xdp with sonic"},
		"wait":           {func(s *Settings) { s.SonicWaitReady = -1 }, "sonic_wait_ready"},
		"db config":      {func(s *Settings) { s.SonicDBConfig = "db.json" }, "sonic_db_config"},
		"device":         {func(s *Settings) { s.Collectors = []Collector{{Address: "198.18.0.1:6343", Device: "a/b"}} }, "device"},
		"device ok":      {func(s *Settings) { s.Collectors = []Collector{{Address: "198.18.0.1:6343", Device: "mgmt"}} }, ""},
		"auto file":      {func(s *Settings) { s.SonicAutoFile = "x" }, "sonic_auto_file"},
		"no auto file":   {func(s *Settings) { s.SonicAutoFile = "" }, ""},
		"dns-sd":         {func(s *Settings) { s.Sonic, s.DNSSD = true, true }, "dns_sd with sonic"},
		"groups 1 and 2": {func(s *Settings) { s.Sonic, s.PsampleIngressGroup, s.PsampleEgressGroup = true, 1, 2 }, ""},
		"group 5":        {func(s *Settings) { s.Sonic, s.PsampleIngressGroup = true, 5 }, "psample groups 5/0 with sonic"},
		"dent":           {func(s *Settings) { s.Sonic, s.Dent = true, true }, "dent with sonic"},
	} {
		s := Defaults()
		s.Workers = 1
		s.Collectors = []Collector{{Address: DefaultCollector}}
		tc.set(&s)
		err := s.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
