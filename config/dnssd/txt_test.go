package dnssd

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/config/hsflowdconf"
)

// TestSpeedTokens: the speeds of sampling.<speed> are printed as hsflowd
// prints them (util.c printSpeed), read back, and a TXT key of each
// applies to ports of that speed only.
func TestSpeedTokens(t *testing.T) {
	for tok, bps := range map[string]uint64{
		"100M": 100e6, "1G": 1e9, "10G": 10e9, "25G": 25e9, "40G": 40e9,
		"100G": 100e9, "400G": 400e9, "800G": 800e9, "1T": 1e12,
	} {
		if got := hsflowdconf.PrintSpeed(bps); got != tok {
			t.Errorf("PrintSpeed(%d) = %q, want %q", bps, got, tok)
		}
		if got, ok := hsflowdconf.ParseSpeed(tok); !ok || got != bps {
			t.Errorf("ParseSpeed(%q) = %d, %v", tok, got, ok)
		}
		ds, probs := ParseTXT([]string{"sampling." + strings.ToLower(tok) + "=777"}, Settings{})
		if len(probs) != 0 {
			t.Fatalf("%s: %v", tok, probs)
		}
		s := Apply(config.Defaults(), ds)
		mbps := bps / 1e6
		if got := s.PortSamplingRate("p1", mbps); got != 777 {
			t.Errorf("sampling.%s: a %d Mb/s port samples 1 in %d, want 777", tok, mbps, got)
		}
		if got := s.PortSamplingRate("p1", mbps*2); got == 777 {
			t.Errorf("sampling.%s applies to a %d Mb/s port too", tok, mbps*2)
		}
	}
	// hsflowd truncates: a 2.5 Gb/s port is "2G", 1000G is "1T".
	for bps, tok := range map[uint64]string{2_500_000_000: "2G", 1e15: "1000T", 999: "999", 1500: "1K"} {
		if got := hsflowdconf.PrintSpeed(bps); got != tok {
			t.Errorf("PrintSpeed(%d) = %q, want %q", bps, got, tok)
		}
	}
	ds, _ := ParseTXT([]string{"sampling.2G=300"}, Settings{})
	s := Apply(config.Defaults(), ds)
	if got := s.PortSamplingRate("p1", 2500); got != 300 {
		t.Errorf("sampling.2G on a 2.5 Gb/s port: 1 in %d, want 300 (hsflowd prints its speed 2G)", got)
	}
}

// TestPrecedence: sampling.<speed> for ports of that speed, then plain
// sampling, then the speed default (here sampling.bps_ratio); the
// file's rates are replaced by DNS-SD's when the TXT carries any.
func TestPrecedence(t *testing.T) {
	base := config.Defaults()
	base.Sampling, base.Workers = 50, 1
	base.SamplingSpeed = map[string]uint32{"1G": 2222}
	for _, tc := range []struct {
		txt  []string
		want map[uint64]uint32 // Mb/s -> rate
	}{
		// No sampling key: the file's rules stay.
		{[]string{"polling=5"}, map[uint64]uint32{1000: 2222, 10000: 50}},
		// Plain sampling wins over the speed default (hsflowd: the
		// opposite, which its users report as a bug), and replaces the
		// file's per-speed.
		{[]string{"sampling=400"}, map[uint64]uint32{1000: 400, 10000: 400, 0: 400}},
		// sampling.<speed> wins for its speed.
		{[]string{"sampling=400", "sampling.10G=9000"}, map[uint64]uint32{1000: 400, 10000: 9000}},
		// Without plain sampling: the speed default, here bps_ratio.
		{[]string{"sampling.10G=9000", "sampling.bps_ratio=2000000"}, map[uint64]uint32{10000: 9000, 1000: 500, 0: config.DefaultSamplingUnknownSpeed}},
		// Without either: one per Mb/s.
		{[]string{"sampling.10G=9000"}, map[uint64]uint32{10000: 9000, 25000: 25000, 40: config.MinSampling}},
	} {
		ds, probs := ParseTXT(tc.txt, Settings{})
		if len(probs) != 0 {
			t.Fatalf("%v: %v", tc.txt, probs)
		}
		s := Apply(base, ds)
		if err := s.Validate(); err != nil {
			t.Fatalf("%v: applied settings invalid: %v", tc.txt, err)
		}
		for mbps, want := range tc.want {
			if got := s.PortSamplingRate("p1", mbps); got != want {
				t.Errorf("%v: %d Mb/s port samples 1 in %d, want %d", tc.txt, mbps, got, want)
			}
		}
	}
	if base.Sampling != 50 || base.SamplingSpeed["1G"] != 2222 || len(base.SamplingSpeed) != 1 {
		t.Errorf("Apply modified its base: %+v", base)
	}
}

// TestTXTKeys: every key DNS-SD takes, in any case, lands in its setting;
// txtvers is ignored; unknown keys are reported.
func TestTXTKeys(t *testing.T) {
	base := config.Defaults()
	base.Collectors = []config.Collector{{Address: config.NoCollector, MaxDatagramSize: 1400}}
	txt := []string{"txtvers=1", "SAMPLING=300", "Polling=7", "headerBytes=64", "DROPLIMIT=12",
		"agentIP=198.18.0.9", "agent=eth0", "agent.cidr=198.18.0.0/15", "agent.cidr=!10.0.0.0/8",
		"sampling.BPS_RATIO=5000000", "colour=blue", "sampling.app.myapp=10"}
	ds, probs := ParseTXT(txt, Settings{})
	ds.Collectors = []string{"198.18.1.1:6343", "[2001:db8::1]:6344"}
	s := Apply(base, ds)
	want := base
	want.Collectors = []config.Collector{{Address: "198.18.1.1:6343", MaxDatagramSize: 1400}, {Address: "[2001:db8::1]:6344", MaxDatagramSize: 1400}}
	want.Sampling, want.SamplingBpsRatio, want.SamplingSpeed = 300, 5000000, nil
	want.Polling, want.HeaderBytes, want.DropsLimit = 7, 64, 12
	want.AgentAddress, want.AgentInterface = "198.18.0.9", "eth0"
	want.AgentCIDR = []string{"198.18.0.0/15", "!10.0.0.0/8"}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("applied\n%+v\nwant\n%+v", s, want)
	}
	if len(probs) != 2 || probs[0].Kind != UnknownKey || probs[0].Item != "colour=blue" || probs[1].Kind != UnknownKey || !strings.Contains(probs[1].Item, "myapp") {
		t.Errorf("problems %v, want the two unknown keys", probs)
	}
	// No SRV target: no static receiver.
	if s := Apply(base, Settings{}); len(s.StaticCollectors()) != 0 {
		t.Errorf("no collectors applied as %+v", s.Collectors)
	}
}

// TestBadValues: a bad value is reported and the setting keeps the value
// in force (the previous answer's; the file's when there was none).
func TestBadValues(t *testing.T) {
	prev, probs := ParseTXT([]string{"sampling=300", "headerBytes=64", "polling=7", "agent.cidr=198.18.0.0/15"}, Settings{})
	if len(probs) != 0 {
		t.Fatal(probs)
	}
	bad := []string{"sampling=abc", "headerBytes=99999", "polling=-1", "dropLimit=x", "agentIP=nowhere",
		"agent.cidr=198.18.0.0/99", "sampling.10G=0", "sampling.bps_ratio=0"}
	ds, probs := ParseTXT(bad, prev)
	if len(probs) != len(bad) {
		t.Fatalf("%d problems for %d bad values: %v", len(probs), len(bad), probs)
	}
	for i, p := range probs {
		if p.Kind != BadValue || p.Item != bad[i] {
			t.Errorf("problem %d: %v, want a bad value %q", i, p, bad[i])
		}
	}
	if !reflect.DeepEqual(ds.Values, prev.Values) || !reflect.DeepEqual(ds.CIDRs, prev.CIDRs) {
		t.Errorf("after bad values: %+v, want the previous %+v", ds, prev)
	}
	base := config.Defaults()
	s := Apply(base, ds)
	if s.Sampling != 300 || s.HeaderBytes != 64 || s.Polling != 7 || s.DropsLimit != base.DropsLimit {
		t.Errorf("applied %+v", s)
	}
	// Without a previous value the setting is the file's.
	ds, _ = ParseTXT([]string{"headerBytes=99999"}, Settings{})
	if s := Apply(base, ds); s.HeaderBytes != base.HeaderBytes {
		t.Errorf("headerBytes=99999 applied as %d", s.HeaderBytes)
	}
	// A later good string of the same key wins over an earlier bad one.
	ds, _ = ParseTXT([]string{"sampling=abc", "sampling=500"}, prev)
	if ds.Values["sampling"] != "500" {
		t.Errorf("sampling after abc then 500: %q", ds.Values["sampling"])
	}
}

// TestNames: the names asked, with a domain (as hsflowd writes it) and
// with the search list.
func TestNames(t *testing.T) {
	for _, tc := range []struct {
		domain string
		search []string
		want   []string
	}{
		{".example.net", []string{"other.org"}, []string{"_sflow._udp.example.net."}},
		{"example.net.", nil, []string{"_sflow._udp.example.net."}},
		{"", []string{"a.example.", "b.example"}, []string{"_sflow._udp.a.example.", "_sflow._udp.b.example."}},
	} {
		got, err := Names(tc.domain, tc.search)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Names(%q, %q) = %q, %v; want %q", tc.domain, tc.search, got, err, tc.want)
		}
	}
	if _, err := Names("", nil); err == nil {
		t.Error("no domain and no search list accepted")
	}
}

// TestTiming: the smallest TTL, never under the floor; 300 s without a
// TTL; a failed query backs off from the floor to 300 s.
func TestTiming(t *testing.T) {
	var tm Timing
	for _, tc := range []struct {
		a     Answer
		retry time.Duration
		want  time.Duration
	}{
		{Answer{Outcome: Records, TTL: 60 * time.Second}, 0, 60 * time.Second},
		{Answer{Outcome: Records, TTL: 2 * time.Second}, 0, MinInterval},
		{Answer{Outcome: Records}, 0, NoTTLInterval},
		{Answer{Outcome: Empty}, 0, NoTTLInterval},
		{Answer{Outcome: Empty, TTL: 30 * time.Second}, 0, 30 * time.Second},
		{Answer{Outcome: Error}, 0, MinInterval},
		{Answer{Outcome: Error}, MinInterval, 2 * MinInterval},
		{Answer{Outcome: Error}, 200 * time.Second, NoTTLInterval},
	} {
		if got := tm.Next(tc.a, tc.retry); got != tc.want {
			t.Errorf("Next(%v ttl %v, retry %v) = %v, want %v", tc.a.Outcome, tc.a.TTL, tc.retry, got, tc.want)
		}
	}
}
