package hsflowdconf

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseRepresentative(t *testing.T) {
	data, err := os.ReadFile("testdata/switch.hsflowd.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("switch.hsflowd.conf", data)
	if err != nil {
		t.Fatal(err)
	}
	u := func(v uint64, line, col int) *Uint { return &Uint{V: v, Pos: Pos{line, col}} }
	want := &Config{
		Collectors: []Collector{
			{IP: "198.18.0.10", UDPPort: 6343, Pos: Pos{15, 3}},
			{IP: "198.18.0.11", UDPPort: 7343, Pos: Pos{16, 3}},
			{IP: "2001:db8::10", UDPPort: 6343, Pos: Pos{18, 3}},
		},
		Sampling:         u(400, 9, 14),
		SamplingSpeed:    map[uint64]Uint{10e9: *u(10000, 10, 18)},
		SamplingBpsRatio: u(2000000, 11, 24),
		Polling:          u(30, 8, 13),
		HeaderBytes:      u(96, 13, 17),
		DatagramBytes:    u(1200, 14, 19),
		AgentCIDRs: []CIDR{
			{Prefix: netip.MustParsePrefix("198.18.0.0/15"), Pos: Pos{6, 16}},
			{Prefix: netip.MustParsePrefix("198.18.99.0/24"), Not: true, Pos: Pos{7, 16}},
		},
		Pcaps: []Pcap{
			{Dev: "swp1", Pos: Pos{19, 3}},
			{Dev: "swp2", Sampling: u(256, 20, 34), Pos: Pos{20, 3}},
		},
		JSONPort:     u(36344, 21, 20),
		DropmonLimit: u(50, 27, 21),
	}
	ignored := c.Ignored
	c.Ignored = nil
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", c, want)
	}
	var names []string
	for _, ig := range ignored {
		if ig.Reason == "" {
			t.Errorf("%s ignored without a reason", ig.Setting)
		}
		names = append(names, ig.Setting)
	}
	if got := strings.Join(names, " "); got != "sampling.app.myapp ulog nflog k8s systemd SONIC start" {
		t.Fatalf("ignored %q", got)
	}
}

// TestSyntaxLikeHsflowd: separators '=' ';' and white space, braces
// against words, quotes with "" inside, case-insensitive names, comments,
// several sflow blocks.
func TestSyntaxLikeHsflowd(t *testing.T) {
	c, err := Parse("x", []byte("SFLOW{Polling=5;collector{IP=\"198.18.0.1\"}}# done\r\nsflow {pcap{dev=\"we\"\"ird\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Polling.V != 5 || len(c.Collectors) != 1 || c.Collectors[0].IP != "198.18.0.1" || c.Pcaps[0].Dev != `we"ird` {
		t.Fatalf("%+v", c)
	}
	// Multipliers as hsflowd's expectInteger32.
	c, err = Parse("x", []byte("sflow { sampling.1G = 1K }"))
	if err != nil || c.SamplingSpeed[1e9].V != 1000 {
		t.Fatalf("%+v %v", c, err)
	}
	// An empty file, and one with only comments, configure nothing.
	for _, s := range []string{"", "# nothing\n\n"} {
		if c, err := Parse("x", []byte(s)); err != nil || len(c.Collectors) != 0 {
			t.Fatalf("%q: %+v %v", s, c, err)
		}
	}
	// A json block without udpport is hsflowd's default port; a dropmon
	// block without limit its default limit.
	c, err = Parse("x", []byte("sflow { json { } dropmon { start=on } }"))
	if err != nil || c.JSONPort.V != defaultJSONPort || c.DropmonLimit.V != defaultDropmonLimit {
		t.Fatalf("%+v %v", c, err)
	}
}

// TestRefusals: one case per class of refusal, each naming its line and
// column.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		line, col  int
		msg        string
	}{
		{"top level not sflow", "collector { ip=1.2.3.4 }", 1, 1, `expected "sflow {"`},
		{"sflow without brace", "sflow polling=1", 1, 1, "expected '{'"},
		{"missing close brace", "sflow {\n polling = 1\n", 2, 13, "missing '}'"},
		{"extra close brace", "sflow { }\n}", 2, 1, `expected "sflow {"`},
		{"unknown setting", "sflow {\n  pollng = 20\n}", 2, 3, `unknown setting "pollng"`},
		{"unknown block", "sflow {\n  widget { }\n}", 2, 3, `unknown block "widget"`},
		{"unknown setting in block", "sflow { collector { ip=1.2.3.4 port=1 } }", 1, 32, `unknown setting "port" in collector`},
		{"no value", "sflow { polling }", 1, 17, "has no value"},
		{"not a number", "sflow { polling = often }", 1, 19, "not a whole number"},
		{"out of range", "sflow {\n polling = 301 }", 2, 12, "outside 0..300"},
		{"bad cidr", "sflow { agent.cidr = 10.0.0.0/33 }", 1, 22, "not an IP prefix"},
		{"bad agentIP", "sflow { agentIP = me }", 1, 19, "not an IP address"},
		{"collector without ip", "sflow {\n collector { udpport = 1 } }", 2, 2, "without ip"},
		{"unterminated quote", "sflow { agent = \"eth0 }", 1, 17, "unterminated"},
		{"long word", "sflow { agent = " + strings.Repeat("e", 256) + " }", 1, 17, "at most 255"},
		{"nested too deep", "sflow { k8s { a { b { } } } }", 1, 21, "nested more than 3"},
		{"brace without name", "sflow { { } }", 1, 9, "needs a name"},
		{"bad on/off", "sflow { dropmon { start = yes } }", 1, 27, "expected on or off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.conf", []byte(tc.file))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Line != tc.line || e.Col != tc.col || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got %v, want f.conf:%d:%d: ...%s...", err, tc.line, tc.col, tc.msg)
			}
		})
	}
}

// FuzzParse: no input crashes the parser; every refusal is an *Error
// with a position inside the file; what is accepted is consistent.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 1m ./config/hsflowdconf/
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile("testdata/switch.hsflowd.conf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("sflow { collector { ip=127.0.0.1 udpport=6343 } }"))
	f.Add([]byte("sflow{json{}dropmon{limit=5}pcap{dev=\"a\"\"b\" sampling=1K}}"))
	f.Add([]byte("sflow { k8s { a { b { } } } }"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Parse("fuzz", in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v", err, err)
			}
			lines := strings.Count(string(in), "\n") + 1
			if e.Line < 1 || e.Line > lines || e.Col < 1 {
				t.Fatalf("position %d:%d outside the file (%d lines): %v", e.Line, e.Col, lines, err)
			}
			return
		}
		for _, col := range c.Collectors {
			if col.IP == "" || col.UDPPort == 0 {
				t.Fatalf("collector %+v", col)
			}
		}
		for _, p := range c.Pcaps {
			if p.Dev == "" {
				t.Fatalf("pcap without dev %+v", p)
			}
		}
		for _, ig := range c.Ignored {
			if ig.Reason == "" || ig.Line < 1 {
				t.Fatalf("ignored %+v", ig)
			}
		}
	})
}

// TestDNSSD: hsflowd's ways of switching DNS-SD on, with and without a
// domain.
func TestDNSSD(t *testing.T) {
	for text, want := range map[string]*DNSSD{
		"sflow { DNS-SD { domain=.example.net } }":             {Domain: ".example.net", Pos: Pos{1, 9}},
		"sflow { dns-sd { } }":                                 {Pos: Pos{1, 9}},
		"sflow { DNSSD = on }":                                 {Pos: Pos{1, 9}},
		"sflow { DNSSD_domain = .a.example\n DNSSD = on }":     {Domain: ".a.example", Pos: Pos{2, 2}},
		"sflow { dns-sd { DNSSD_domain = .b.example } }":       {Domain: ".b.example", Pos: Pos{1, 9}},
		"sflow { DNSSD = off }":                                nil,
		"sflow { dns-sd { domain=.example.net } DNSSD = off }": nil,
		"sflow { collector { ip = 198.18.0.1 } }":              nil,
	} {
		c, err := Parse("x", []byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(c.DNSSD, want) {
			t.Errorf("%q: DNSSD %+v, want %+v", text, c.DNSSD, want)
		}
	}
	for _, text := range []string{"sflow { DNSSD = maybe }", "sflow { dns-sd { server = 198.18.0.1 } }", "sflow { dns-sd { domain } }"} {
		if _, err := Parse("x", []byte(text)); err == nil {
			t.Errorf("%q accepted", text)
		}
	}
}

// TestPlatformSections: psample { } and dent { } as hsflowd reads them
// (hsflowconfig.c HSPOBJ_PSAMPLE, HSPOBJ_DENT), with hsflowd's defaults.
func TestPlatformSections(t *testing.T) {
	c, err := Parse("x", []byte("sflow {\n psample { group=5 egress=on }\n dent { sw=on switchport=^eth[0-9]+$ }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Psample{Group: 5, Ingress: true, Egress: true, Pos: Pos{2, 2}}); !reflect.DeepEqual(c.Psample, want) {
		t.Errorf("psample %+v, want %+v", c.Psample, want)
	}
	if want := (&Dent{SW: true, SwitchPort: "^eth[0-9]+$", Pos: Pos{3, 2}}); !reflect.DeepEqual(c.Dent, want) {
		t.Errorf("dent %+v, want %+v", c.Dent, want)
	}
	if len(c.Ignored) != 0 {
		t.Errorf("ignored %+v", c.Ignored)
	}
	c, err = Parse("x", []byte("sflow { psample { } dent { } }"))
	if err != nil || *c.Psample != (Psample{Group: 1, Ingress: true, Pos: Pos{1, 9}}) || *c.Dent != (Dent{Pos: Pos{1, 21}}) {
		t.Errorf("defaults: %+v %+v %v", c.Psample, c.Dent, err)
	}
	// Both directions off reads nothing: reported, no psample.
	c, err = Parse("x", []byte("sflow { psample { ingress=off } }"))
	if err != nil || c.Psample != nil || len(c.Ignored) != 1 || !strings.Contains(c.Ignored[0].Reason, "instead") {
		t.Errorf("ingress=off: %+v %+v %v", c.Psample, c.Ignored, err)
	}
	for _, text := range []string{
		"sflow { psample { group=33 } }",      // hsflowd: 1..32
		"sflow { psample { group=0 } }",       //
		"sflow { psample { egress=yes } }",    // on|off
		"sflow { psample { rate=5 } }",        // unknown
		"sflow { dent { switchport=\"(\" } }", // not a regex
		"sflow { dent { sw=maybe } }",
		"sflow { dent { ports=swp1 } }",
	} {
		if _, err := Parse("x", []byte(text)); err == nil {
			t.Errorf("%q accepted", text)
		}
	}
}

// TestIgnoredSaysWhatInstead: every section and setting that stays
// ignored says why and what the agent does instead, in one line.
func TestIgnoredSaysWhatInstead(t *testing.T) {
	var text strings.Builder
	text.WriteString("sflow {\n")
	for name := range ignoredBlocks {
		text.WriteString(" " + name + " { }\n")
	}
	for name := range ignoredSettings {
		text.WriteString(" " + name + " = 1\n")
	}
	text.WriteString(" dropmon { start=on sw=on hw=off group=1 hide=1 max=5 max_trip=5 }\n")
	text.WriteString("}\n")
	c, err := Parse("x", []byte(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(ignoredBlocks) + len(ignoredSettings) + 7; len(c.Ignored) != want {
		t.Errorf("%d ignored, want %d", len(c.Ignored), want)
	}
	for _, ig := range c.Ignored {
		r := ig.Reason
		if strings.Contains(r, "\n") || !strings.Contains(r, ";") && !strings.Contains(r, "(") {
			t.Errorf("%s: reason %q does not say what happens instead, in one line", ig.Setting, r)
		}
	}
}
