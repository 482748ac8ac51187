package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The fixture testdata/run is a results directory of bench/run.sh from a
// short trial run (BENCH_COUNT=1 BENCH_TIME=10ms, one or two rounds per
// part, on a shared machine), trimmed: its figures mean nothing, but its
// files have the shapes the page reads. Its plots are not committed: the
// test draws them from the JSON as the benchmarks do.
const fixture = "testdata/run"

// copyDir copies the fixture so that a test can draw plots and change
// files in it.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// fixtureRun is the fixture with its plots drawn from its JSON.
func fixtureRun(t *testing.T) string {
	t.Helper()
	dir := copyDir(t, fixture)
	e, err := loadE2E(filepath.Join(dir, "e2e", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.plots(filepath.Join(dir, "e2e")); err != nil {
		t.Fatal(err)
	}
	c, err := loadResults(filepath.Join(dir, "compare", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.plots(filepath.Join(dir, "compare")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func renderPage(t *testing.T, dir, figures string) string {
	t.Helper()
	p, err := newPage(dir, figures, "figures")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.render()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPage writes the page from the fixture and checks that it holds the
// run's facts and figures, read from the fixture's files, each section,
// and plots that exist.
func TestPage(t *testing.T) {
	dir := fixtureRun(t)
	figures := t.TempDir()
	page := renderPage(t, dir, figures)

	want := []string{
		// run.txt and load.txt
		fixtureFacts["command"],
		"- **When:** " + fixtureFacts["when"],
		"- **Code:** `" + fixtureFacts["commit"] + "`",
		"- **Machine:** " + fixtureFacts["machine"],
		"- **Load average (1 min) during the run:** " + fixtureFacts["load"],
		// e2e/results.json: the medians over the rounds
		"| samples/s delivered end to end, 1-in-1 (median of 2) | " + fixtureFacts["e2e1"] + " |",
		"| the daemon's CPU per sample delivered, 1-in-1 | " + fixtureFacts["e2eus1"] + " |",
		// compare/results.json
		"| CPU with the port sampled and no traffic (% of a core) | " + fixtureFacts["idle"] + " |",
		// xdp.txt and daemon.txt
		fixtureFacts["xdp"],
		fixtureFacts["encode"],
		// scale.txt, drops.txt
		fixtureFacts["scale"],
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	for _, s := range pageSections {
		if !strings.Contains(page, "\n## "+s.title+"\n") {
			t.Errorf("page lacks section %q", s.title)
		}
	}
	if strings.Contains(page, "Not in this run") || strings.Contains(page, "**failed**") || strings.Contains(page, "This part failed") {
		t.Errorf("a part of the fixture is shown missing or failed")
	}

	// Every plot linked is in the figures directory, a PNG, the same as the
	// run's; every plot of the run is linked.
	links := regexp.MustCompile(`\]\(figures/([^)]+)\)`).FindAllStringSubmatch(page, -1)
	if len(links) != 8 {
		t.Errorf("%d plots linked, want 8 (5 compare, 3 e2e)", len(links))
	}
	for _, l := range links {
		b, err := os.ReadFile(filepath.Join(figures, l[1]))
		if err != nil {
			t.Errorf("linked plot: %v", err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", l[1])
		}
	}

	// Every Markdown table keeps its shape: each row has the header's
	// number of cells.
	checkTables(t, page)
}

// checkTables checks that every table row of s has its header's number of
// cells (outside code blocks).
func checkTables(t *testing.T, s string) {
	t.Helper()
	cols, code := 0, false
	for i, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "```") {
			code = !code
			continue
		}
		if code || !strings.HasPrefix(l, "|") {
			cols = 0
			continue
		}
		n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|") - 1
		if cols == 0 {
			cols = n
		} else if n != cols {
			t.Errorf("line %d: %d cells, header has %d: %s", i+1, n, cols, l)
		}
	}
	if code {
		t.Errorf("a code block is not closed")
	}
}

// TestPageMissingAndFailed: a part that did not run is said to be missing;
// one that failed is marked, with the end of its errors.
func TestPageMissingAndFailed(t *testing.T) {
	dir := fixtureRun(t)
	if err := os.Remove(filepath.Join(dir, "scale.txt")); err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile(filepath.Join(dir, "run.txt"))
	if err != nil {
		t.Fatal(err)
	}
	run = regexp.MustCompile(`(?m)^(part: ring \S+ \S+) 0$`).ReplaceAll(run, []byte("$1 3"))
	if err := os.WriteFile(filepath.Join(dir, "run.txt"), run, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ring.err"), []byte("earlier line\nring.sh: stress-ng missing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := renderPage(t, dir, t.TempDir())
	scale := page[strings.Index(page, "## Scale to 1000 ports"):]
	scale = scale[:3+strings.Index(scale[3:], "\n## ")]
	if !strings.Contains(scale, "**Not in this run.**") {
		t.Errorf("the scale section does not say it is missing")
	}
	if !strings.Contains(page, "ring ") || !strings.Contains(page, "(**failed**, exit 3)") {
		t.Errorf("the parts line does not mark ring failed")
	}
	if !strings.Contains(page, "**This part failed in this run (exit 3).**") || !strings.Contains(page, "ring.sh: stress-ng missing") {
		t.Errorf("the ring section does not show the failure and its errors")
	}
	checkTables(t, page)
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
pkg: example.com/a
BenchmarkX-2   	  100	  12.5 ns/op	  0 B/op	  0 allocs/op
BenchmarkX-2   	  100	  11.5 ns/op	  0 B/op	  0 allocs/op
BenchmarkX-2   	  100	  20.0 ns/op	  8 B/op	  1 allocs/op
--- FAIL: BenchmarkY
pkg: example.com/b
idle    BenchmarkRingBurst/ring=1MiB-2    1	 228650345 ns/op	 3.525 drop-%
stress  BenchmarkRingBurst/ring=1MiB-2    1	 206440444 ns/op	 0.5050 drop-%
# a comment
`
	bs, notes := parseGoBench(out)
	if len(bs) != 3 {
		t.Fatalf("%d benchmarks, want 3: %+v", len(bs), bs)
	}
	x := bs[0]
	if x.pkg != "example.com/a" || x.name != "BenchmarkX" || len(x.values["ns/op"]) != 3 {
		t.Errorf("first: %+v", x)
	}
	if got, want := x.metricsText(true), "12.5 ns/op (11.5–20), 0 B/op (0–8), 0 allocs/op (0–1)"; got != want {
		t.Errorf("metrics %q, want %q", got, want)
	}
	if bs[1].label != "idle" || bs[2].label != "stress" || bs[2].name != "BenchmarkRingBurst/ring=1MiB" || bs[2].pkg != "example.com/b" {
		t.Errorf("labelled: %+v %+v", bs[1], bs[2])
	}
	if got, want := bs[1].metricsText(false, "ns/op"), "3.52 drop-%"; got != want {
		t.Errorf("metrics %q, want %q", got, want)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "FAIL") || notes[1] != "a comment" {
		t.Errorf("notes %q", notes)
	}
}

func TestEmbed(t *testing.T) {
	md := "# title (x)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nprose line.\n      flat  flat%\n     0.1s   5%\n"
	got := embedMarkdown(md)
	want := "#### title (x)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nprose line.\n```\n      flat  flat%\n     0.1s   5%\n```\n"
	if got != want {
		t.Errorf("embedMarkdown:\n%s\nwant\n%s", got, want)
	}
	cols := "# note\n## 1. part\nround  a   b\n1      2   3\n## 2. other\nx  y\n"
	got = embedColumns(cols)
	want = "```\n# note\n```\n\n#### 1. part\n\n```\nround  a   b\n1      2   3\n```\n\n#### 2. other\n\n```\nx  y\n```\n"
	if got != want {
		t.Errorf("embedColumns:\n%s\nwant\n%s", got, want)
	}
}

// fixtureFacts are figures of the fixture worked out by hand from its
// files (run.txt, load.txt, e2e/results.json: the median of two rounds of
// Delivered and of DaemonCPU/100/Delivered, compare/results.json's idle
// trials, xdp.txt's testrun table, daemon.txt's MEDIAN lines,
// scale.txt's benchmark line).
var fixtureFacts = map[string]string{
	"command": "\n    bench/run.sh\n",
	"when":    "2026-11-28 06:43 – 06:53 UTC (9m0s)",
	"commit":  "61d363072d02",
	"machine": "Intel(R) Xeon(R) Processor, 2 CPUs, 23.5 GiB, Linux 6.18.44-fc-v669, virtualization docker, go1.26.8",
	"load":    "median 6.93, min 4.64, max 11.65 (56 samples",
	// (259831 + 413241) / 2 = 336536; (500769 + 860658) / 2 = 680713
	"e2e1": "TC 337 k, XDP 681 k",
	// TC: 15.911/100/259831 = 0.612 µs, 16.937/100/413241 = 0.410 µs;
	// XDP: 0.501, 0.402 µs
	"e2eus1": "TC 0.511 µs, XDP 0.452 µs",
	"idle":   "packet socket + cBPF (pcap) 0.006 %; TCX eBPF + ring (hsflowd epcap) 0.012 %; sflowswitchd 0.041 %; sflowswitchd -hook xdp 0.032 %",
	"xdp":    "| not sampled 22.0 ns, sampled (1-in-1, 128-byte header) 133.3 ns; a do-nothing XDP program 19.3 ns |",
	"encode": "| 0.208 µs (max_datagram 1400), 0.146 µs (max_datagram 9000) |",
	"scale":  "| 1000 sampled ports (BenchmarkScale/first-ifindex=0) | 75.9 hwm-MiB, 6 ns-1port, 7 ns-first, 18 ns-last, 60.4 rss-MiB, 3.15 start-s, 15080 varbinds, 0.617 walk-s |",
}
