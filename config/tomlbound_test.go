package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allocated returns the bytes fn allocated and how long it took.
func allocated(fn func()) (uint64, time.Duration) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	fn()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

// TestHostileTOMLBounded: config files the decoder
// would spend quadratic memory on are refused before it sees them, with a
// short line; whatever else fits in MaxConfigBytes costs memory in
// proportion to its size, and every refusal is short. On the decoder
// alone the 15 KB file took 750 MB, and the refusals of the others were
// up to 20 KB long.
func TestHostileTOMLBounded(t *testing.T) {
	const maxAlloc = 40 << 20 // bytes allocated for one file of at most MaxConfigBytes
	const maxRefusal = MaxErrorLines * (MaxErrorBytes + 32)
	cases := []struct {
		name, text string
		refused    bool
	}{
		{"inline tables nested 5000 deep (15 KB)", "a = " + strings.Repeat("{b=", 5000) + "\n", true},
		{"inline tables nested 10000 deep", "a = " + strings.Repeat("{b=", 10000) + "\n", true},
		{"1 MiB of [", strings.Repeat("[", 1<<20), true},
		{"MaxConfigBytes of [", strings.Repeat("[", MaxConfigBytes), true},
		{"arrays nested 9 deep", "ports = " + strings.Repeat("[", 9) + strings.Repeat("]", 9) + "\n", true},
		{"unknown keys filling MaxConfigBytes", func() string {
			var b strings.Builder
			for i := 0; b.Len() < MaxConfigBytes-32; i++ {
				b.WriteString("key_" + strconv.Itoa(i) + " = 1\n")
			}
			return b.String()
		}(), true},
		{"one unknown key of 200 KB", strings.Repeat("k", 200<<10) + " = 1\n", true},
		{"a string of 200 KB with brackets", "log_level = \"" + strings.Repeat("[{", 100<<10) + "\"\n", true},
		{"a flat array filling MaxConfigBytes", "ports = [" + strings.Repeat("\"p\",", (MaxConfigBytes-16)/4) + "]\n", true},
		{"valid nesting", "collector = [{ address = \"198.18.0.1:6343\" }, { address = \"198.18.0.2\", max_datagram_size = 9000 }]\n" +
			"port_sampling = { \"swp[1]\" = 100 } # [[[[[[[[[[\nsampling_speed = { '10G' = 10000 }\nagent_interface = '''\n[[[[[[[[[[[[\n'''\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "hostile.toml")
			if err := os.WriteFile(file, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			alloc, took := allocated(func() {
				_, err = Load(Layers{File: file})
			})
			t.Logf("%d bytes: %.1f MiB allocated in %v; %v", len(c.text), float64(alloc)/(1<<20), took, err)
			if c.refused && err == nil {
				t.Fatalf("accepted")
			}
			if !c.refused && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if alloc > maxAlloc {
				t.Errorf("%.1f MiB allocated, bound %d MiB", float64(alloc)/(1<<20), maxAlloc>>20)
			}
			if took > 2*time.Second {
				t.Errorf("took %v, bound 2 s", took)
			}
			if err != nil && len(err.Error()) > maxRefusal {
				t.Errorf("refusal is %d bytes long, bound %d: %.300s", len(err.Error()), maxRefusal, err)
			}
		})
	}
}

// TestCheckTOMLShape: brackets in strings and comments do not count;
// nesting up to MaxTOMLNesting passes, one more is refused with its line.
func TestCheckTOMLShape(t *testing.T) {
	ok := []string{
		strings.Repeat("[", MaxTOMLNesting) + strings.Repeat("]", MaxTOMLNesting),
		`a = "[[[[[[[[[[[[[[[\"[[[["`,
		`a = '[[[[[[[[[[[[[[[['`,
		"a = \"\"\"\n[[[[[[[[[[[[\n\\\"\"\"[[[[[[[\"\"\"",
		"a = '''\n[[[[[[[[[[[[\n''''",
		"# [[[[[[[[[[[[[[[[[[[[\na = 1",
		"[[collector]]\n[[collector]]\n[[collector]]\n[[collector]]\n[[collector]]",
	}
	for _, s := range ok {
		if err := checkTOMLShape([]byte(s)); err != nil {
			t.Errorf("checkTOMLShape(%q) = %v", s, err)
		}
	}
	deep := "a = 1\n\nb = " + strings.Repeat("{c=", MaxTOMLNesting+1)
	err := checkTOMLShape([]byte(deep))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("checkTOMLShape(%q) = %v, want a refusal at line 3", deep, err)
	}
	// A quote opening a string that the decoder would refuse does not
	// hide the brackets after the line.
	if err := checkTOMLShape([]byte("a = \"x\nb = " + strings.Repeat("[", 20))); err == nil {
		t.Errorf("brackets after an unterminated string not counted")
	}
}
