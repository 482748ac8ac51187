package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestConfigErrorsGolden")

// TestConfigErrorsGolden: what a refused config file prints, for the
// mistakes operators make ([collector] for [[collector]], a misspelt key,
// a string for a list, 0 as a rate, several bad values at once): the
// file and line, the setting, what it takes in words, and the nearest key
// for a misspelt one. The expected outputs are testdata/errors/*.golden
// (go test ./config -run Golden -update rewrites them; read the diff).
func TestConfigErrorsGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.toml")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".toml"), func(t *testing.T) {
			_, err := Load(Layers{File: f, Notes: io.Discard})
			got := "ok\n"
			if err != nil {
				got = err.Error() + "\n"
			}
			golden := strings.TrimSuffix(f, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s:\ngot:\n%s\nwant:\n%s", f, got, want)
			}
		})
	}
}

// TestSuggest: the nearest known key of a misspelt one, none for a key
// far from every setting.
func TestSuggest(t *testing.T) {
	for k, want := range map[string]string{
		"samplng": "sampling", "Sampling": "sampling", "header_byte": "header_bytes", "collectors": "collector",
		"pollling": "polling", "agent_adress": "agent_address", "zzzzzzzzzz": "",
	} {
		if got := suggest([]string{k}); got != want {
			t.Errorf("suggest(%q) = %q, want %q", k, got, want)
		}
	}
	if got := suggest([]string{"collector", "addres"}); got != "address" {
		t.Errorf("suggest(collector.addres) = %q", got)
	}
}
