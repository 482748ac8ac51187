package main

// The agree subcommand: do two runs of `make bench` agree within the
// spread each reports? It reads two results
// directories (bench/results/<time>, written by bench/run.sh) and, for
// every figure reported as several rounds, compares the runs:
//
//   - compare/results.json (the techniques side by side): every metric of
//     every technique at every rate, from the trials of each round;
//   - every Markdown table row of the other parts' outputs (*.txt) with a
//     per-round list ("58.1, 57.9, 60.2, ..."), matched by file, table
//     header and the row's first cell.
//
// A figure agrees when each run's median lies within the other run's
// min–max ("both"); "one" when only one of the two medians does;
// "overlap" when the two min–max ranges overlap with neither median
// inside the other; "apart" (no) otherwise. It also checks, per run, the side-by-side targets: whether
// sflowswitchd forwards at least as fast as each baseline, uses the least
// CPU per forwarded packet and delivers the most samples per second, at
// every rate (medians). The Go micro-benchmarks (go.txt) are compared with
// benchstat, the tool made for that.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// agreeVerdict classifies two spreads.
func agreeVerdict(a, b spread) string {
	aInB := a.med >= b.lo && a.med <= b.hi
	bInA := b.med >= a.lo && b.med <= a.hi
	switch {
	case aInB && bInA:
		return "both"
	case aInB || bInA:
		return "one"
	case a.lo <= b.hi && b.lo <= a.hi:
		return "overlap"
	}
	return "no"
}

// agreeRow is one figure compared between the runs.
type agreeRow struct {
	where, what string
	a, b        spread
	verdict     string
}

func runAgree(args []string) error {
	fs := flag.NewFlagSet("agree", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: daemon agree RUN_A RUN_B   (results directories of make bench, bench/results/<time>)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return fmt.Errorf("want two results directories")
	}
	a, b := fs.Arg(0), fs.Arg(1)
	var rows []agreeRow
	ra, errA := loadResults(filepath.Join(a, "compare", "results.json"))
	rb, errB := loadResults(filepath.Join(b, "compare", "results.json"))
	if errA == nil && errB == nil {
		rows = append(rows, agreeCompare(ra, rb)...)
	} else {
		fmt.Printf("compare results missing: %v %v\n", errA, errB)
	}
	files, err := filepath.Glob(filepath.Join(a, "*.txt"))
	if err != nil {
		return err
	}
	for _, fa := range files {
		name := filepath.Base(fa)
		if name == "go.txt" || name == "compare.txt" {
			continue
		}
		ta, err := roundLists(fa)
		if err != nil {
			return err
		}
		tb, err := roundLists(filepath.Join(b, name))
		if err != nil {
			fmt.Printf("%s: not in %s: %v\n", name, b, err)
			continue
		}
		keys := make([]string, 0, len(ta))
		for k := range ta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			vb, ok := tb[k]
			if !ok {
				continue
			}
			sa, sb := spreadOf(ta[k]), spreadOf(vb)
			where, what, _ := strings.Cut(k, "\x00")
			rows = append(rows, agreeRow{name + ": " + where, what, sa, sb, agreeVerdict(sa, sb)})
		}
	}

	fmt.Printf("# Do two runs of make bench agree? (`go run ./bench/daemon agree %s %s`)\n\n", a, b)
	n := map[string]int{}
	for _, r := range rows {
		n[r.verdict]++
	}
	fmt.Printf("%d figures reported as several rounds in both runs: each run's median within the other's min–max: %d; one of the two: %d; ranges overlap, neither median inside: %d; ranges apart: %d.\n\n",
		len(rows), n["both"], n["one"], n["overlap"], n["no"])
	// By kind of figure: absolute rates follow the machine's state, which
	// moves between runs; ratios within a run are what the report
	// compares.
	kinds := map[string]map[string]int{}
	var kindNames []string
	for _, r := range rows {
		k := r.what
		if i := strings.LastIndex(k, ": "); i >= 0 {
			k = k[i+2:]
		}
		if kinds[k] == nil {
			kinds[k] = map[string]int{}
			kindNames = append(kindNames, k)
		}
		kinds[k][r.verdict]++
	}
	fmt.Println("| figure | both | one | overlap | apart |")
	fmt.Println("|---|---|---|---|---|")
	for _, k := range kindNames {
		c := kinds[k]
		fmt.Printf("| %s | %d | %d | %d | %d |\n", k, c["both"], c["one"], c["overlap"], c["no"])
	}
	fmt.Println()
	fmt.Println("| where | figure | run A median (min–max) | run B median (min–max) | B/A | agree |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		ratio := "—"
		if r.a.med != 0 {
			ratio = fmt.Sprintf("%.3f", r.b.med/r.a.med)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.where, r.what, r.a.fmt("%.4g"), r.b.fmt("%.4g"), ratio, r.verdict)
	}
	if errA == nil && errB == nil {
		fmt.Println()
		fmt.Print(targets("A", ra))
		fmt.Print(targets("B", rb))
	}
	// benchstat marks a benchmark whose change is not significant "~".
	if bs, err := exec.LookPath("benchstat"); err == nil {
		out, err := exec.Command(bs, filepath.Join(a, "go.txt"), filepath.Join(b, "go.txt")).CombinedOutput()
		fmt.Printf("## Go micro-benchmarks (benchstat A/go.txt B/go.txt)\n\n```\n%s```\n", out)
		if err != nil {
			return fmt.Errorf("benchstat: %w", err)
		}
	} else {
		fmt.Println("benchstat not found: compare go.txt with `go run golang.org/x/perf/cmd/benchstat A/go.txt B/go.txt`")
	}
	return nil
}

func loadResults(path string) (*results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// agreeCompare compares every multi-round metric of the side-by-side
// comparison.
func agreeCompare(ra, rb *results) []agreeRow {
	ca, cb := ra.cells(), rb.cells()
	var rows []agreeRow
	for _, rate := range ra.rates() {
		for _, tech := range allTechs {
			x, y := ca[rate][tech], cb[rate][tech]
			if x == nil || y == nil {
				continue
			}
			for _, m := range []struct {
				name string
				a, b []float64
			}{
				{"forwarded pps", x.fwd, y.fwd},
				{"/ no program", x.vsNone, y.vsNone},
				{"/ do-nothing XDP", x.vsPass, y.vsPass},
				{"kernel ns/pkt", x.ns, y.ns},
				{"CPU ms per M pkts", x.cpuM, y.cpuM},
				{"samples/s", x.sps, y.sps},
				{"lost fraction", x.loss, y.loss},
				{"generator frames/s", x.genPPS, y.genPPS},
				{"generator CPU %", x.genCPU, y.genCPU},
			} {
				if len(m.a) < 2 || len(m.b) < 2 {
					continue
				}
				sa, sb := spreadOf(m.a), spreadOf(m.b)
				rows = append(rows, agreeRow{fmt.Sprintf("compare 1-in-%d", rate), tech + ": " + m.name, sa, sb, agreeVerdict(sa, sb)})
			}
		}
	}
	return rows
}

// targets checks the side-by-side targets in one run, on
// medians: sflowswitchd (its default hook) forwards at least as fast as
// each baseline, uses the least CPU per forwarded packet and delivers the
// most samples per second, at every rate.
func targets(name string, r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Targets in run %s (medians; sflowswitchd = default hook)\n\n", name)
	b.WriteString("| 1-in-N | forwards >= pcap, TC (pps / no program) | least CPU per M pkts | most samples/s |\n|---|---|---|---|\n")
	cells := r.cells()
	for _, rate := range r.rates() {
		c := cells[rate]
		s := c[techSFSD]
		if s == nil {
			continue
		}
		fwd, cpu, sps := "yes", "yes", "yes"
		var fwdv, cpuv, spsv []string
		for _, base := range []string{techPcap, techTC} {
			o := c[base]
			if o == nil {
				continue
			}
			if median(s.vsNone) < median(o.vsNone) {
				fwd = "no"
			}
			if median(s.cpuM) > median(o.cpuM) {
				cpu = "no"
			}
			if median(s.sps) < median(o.sps) {
				sps = "no"
			}
			fwdv = append(fwdv, fmt.Sprintf("%s %.3f", short(base), median(o.vsNone)))
			cpuv = append(cpuv, fmt.Sprintf("%s %.1f", short(base), median(o.cpuM)))
			spsv = append(spsv, fmt.Sprintf("%s %.0f", short(base), median(o.sps)))
		}
		fmt.Fprintf(&b, "| %d | %s: %.3f vs %s | %s: %.1f vs %s | %s: %.0f vs %s |\n", rate,
			fwd, median(s.vsNone), strings.Join(fwdv, ", "),
			cpu, median(s.cpuM), strings.Join(cpuv, ", "),
			sps, median(s.sps), strings.Join(spsv, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

func short(tech string) string {
	switch tech {
	case techPcap:
		return "pcap"
	case techTC:
		return "TC"
	}
	return tech
}

// roundLists reads the Markdown tables of a bench output and returns, for
// every cell holding a per-round list of at least three numbers, the
// values keyed by table header, row label and column name.
func roundLists(path string) (map[string][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRoundLists(f)
}

func parseRoundLists(r io.Reader) (map[string][]float64, error) {
	out := map[string][]float64{}
	var header []string
	section := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			section = strings.TrimLeft(line, "# ")
			if i := strings.IndexAny(section, "(:"); i > 0 {
				section = strings.TrimSpace(section[:i])
			}
			header = nil
			continue
		}
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
			continue
		case strings.HasPrefix(cells[0], "---"):
			continue
		}
		for i := 1; i < len(cells) && i < len(header); i++ {
			if v, ok := numberList(cells[i]); ok {
				out[section+"\x00"+cells[0]+": "+header[i]] = v
			}
		}
	}
	return out, sc.Err()
}

// numberList parses "1.5, 2, 3.25" (three or more numbers).
func numberList(s string) ([]float64, bool) {
	parts := strings.Split(s, ",")
	if len(parts) < 3 {
		return nil, false
	}
	v := make([]float64, 0, len(parts))
	for _, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, false
		}
		v = append(v, x)
	}
	return v, true
}
