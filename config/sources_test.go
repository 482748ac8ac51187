package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSources: Load says where each setting in force came from: the
// default, hsflowd.conf, the file (also a value equal to the default,
// written there), a flag (also one equal to the value below).
func TestSources(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "hsflowd.conf")
	if err := os.WriteFile(h, []byte("sflow {\n polling = 30\n headerBytes = 64\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(f, []byte("hsflowd_conf = \""+h+"\"\nsampling = 1000\nheader_bytes = 64\nlog_level = \"info\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var src Sources
	s, err := Load(Layers{File: f, Notes: io.Discard, Sources: &src, Flags: []string{"workers", "sampling"},
		Override: func(s *Settings) { s.Workers, s.Sampling = 3, 1000 }})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]Source{
		"polling":      SourceHsflowd, // hsflowd.conf only
		"header_bytes": SourceFile,    // both: the file's wins
		"log_level":    SourceFile,    // the default's value, written in the file
		"sampling":     SourceFlag,    // the flag, with the file's value
		"workers":      SourceFlag,
		"hook":         SourceDefault,
	} {
		if got := src.Of(k); got != want {
			t.Errorf("source of %s = %s, want %s", k, got, want)
		}
	}
	if s.Polling != 30 || s.HeaderBytes != 64 || s.Workers != 3 {
		t.Errorf("settings %+v", s)
	}
}

// TestChanges: what a reload logs: the settings that differ, in the
// order of the file's reference, each old -> new; an empty list and a nil
// one are the same.
func TestChanges(t *testing.T) {
	a, b := Defaults(), Defaults()
	b.Sampling, b.Ports, b.Collectors = 2000, []string{"swp1"}, []Collector{{Address: "198.18.0.1:6343"}}
	a.Ports = []string{}
	var got []string
	for _, c := range Changes(a, b) {
		got = append(got, c.String())
	}
	want := `collector: [] -> [198.18.0.1:6343]; sampling: 0 -> 2000; ports: [] -> [swp1]`
	if strings.Join(got, "; ") != want {
		t.Errorf("Changes = %q, want %q", strings.Join(got, "; "), want)
	}
	if c := Changes(a, a); len(c) != 0 {
		t.Errorf("Changes of the same settings: %v", c)
	}
}

// TestSeconds: a duration setting takes whole seconds and Go durations
// of whole seconds, from the file and the flags.
func TestSeconds(t *testing.T) {
	for in, want := range map[string]Seconds{"20": 20, "20s": 20, "1m30s": 90, "0": 0, "0s": 0} {
		if got, err := ParseSeconds(in); err != nil || got != want {
			t.Errorf("ParseSeconds(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"1.5s", "-1", "-5s", "soon", "500ms"} {
		if _, err := ParseSeconds(in); err == nil {
			t.Errorf("ParseSeconds(%q) accepted", in)
		}
	}
}
