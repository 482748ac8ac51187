package dnssd

import (
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

// FuzzParseTXT: whatever the TXT strings of an answer (they come from the
// network), ParseTXT neither panics nor keeps a value it refused, and the
// settings Apply makes of them are valid whole.
func FuzzParseTXT(f *testing.F) {
	for _, s := range []string{"sampling=400\x00polling=5", "SAMPLING.10G=1\x00agent.cidr=!10.0.0.0/8", "headerBytes=99999", "=\x00x=\x00sampling.=1", "agentIP=::1\x00agent=eth0"} {
		f.Add(s)
	}
	base := config.Defaults()
	base.Workers, base.Collectors = 1, []config.Collector{{Address: config.NoCollector}}
	f.Fuzz(func(t *testing.T, joined string) {
		txt := strings.Split(joined, "\x00")
		ds, probs := ParseTXT(txt, Settings{})
		for _, p := range probs {
			if p.Kind == BadValue {
				k, v, _ := strings.Cut(p.Item, "=")
				if got, ok := ds.Values[canonicalKey(k)]; ok && got == strings.TrimSpace(v) {
					t.Fatalf("refused %q kept", p.Item)
				}
			}
		}
		s := Apply(base, ds)
		if err := s.Validate(); err != nil {
			t.Fatalf("%q applied to invalid settings: %v", txt, err)
		}
	})
}
