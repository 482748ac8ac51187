package daemon

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// TestCheckReload: a reload that could only be applied in part is refused
// whole before anything changes (issue 10: validate a configuration whole;
// defect 6: a typo in ports would stop sampling on every port).
func TestCheckReload(t *testing.T) {
	old := config.Defaults()
	old.Ports = []string{"swp*"}
	old.Collectors = []config.Collector{{Address: "198.18.0.1"}}
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), settings: old, mibRows: 3,
		ports: map[int]dataplane.PortInfo{3: {Index: 3, Name: "swp1"}, 4: {Index: 4, Name: "swp2"}}}
	for _, c := range []struct {
		name   string
		change func(*config.Settings)
		want   string // "" = accepted
	}{
		{"same", func(*config.Settings) {}, ""},
		{"a port that comes later, next to present ones", func(s *config.Settings) { s.Ports = []string{"swp1", "swp9"} }, ""},
		{"default selection", func(s *config.Settings) { s.Ports = nil }, ""},
		{"typo", func(s *config.Settings) { s.Ports = []string{"sw*p"} }, "match none"},
		{"monitor ports only, present", func(s *config.Settings) { s.Ports, s.MonitorPorts = []string{"x"}, []string{"swp2"} }, ""},
		{"three collectors", func(s *config.Settings) {
			s.Collectors = []config.Collector{{Address: "198.18.0.1"}, {Address: "198.18.0.2"}, {Address: "198.18.0.3"}}
		}, ""},
		{"four collectors", func(s *config.Settings) {
			s.Collectors = []config.Collector{{Address: "198.18.0.1"}, {Address: "198.18.0.2"}, {Address: "198.18.0.3"}, {Address: "198.18.0.4"}}
		}, "restart to add collectors"},
	} {
		s := old
		c.change(&s)
		err := d.checkReload(s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
