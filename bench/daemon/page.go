package main

// The page subcommand writes the results page, bench/README.md, from one
// results directory of bench/run.sh (`make bench`) and nothing else:
//
//	go -C bench run ./daemon page [-figures DIR] [-link PREFIX] RESULTS_DIR > PAGE
//
// Every figure on the page is read from RESULTS_DIR: the run's command,
// date, commit and machine from run.txt, the load average from load.txt,
// the "At a glance" answers from e2e/results.json, compare/results.json
// and the benchmark lines of the *.txt files, each benchmark's tables from
// its NAME.txt. The plots (compare/*.png, e2e/*.png) are copied into
// -figures under stable names (compare-forwarding.png, e2e-samples.png,
// ...) and linked as PREFIX/NAME. The prose that explains the method is
// fixed text here (pagetext.go); it says nothing a run measures.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func runPage(args []string) error {
	fset := flag.NewFlagSet("page", flag.ContinueOnError)
	figures := fset.String("figures", "", "directory to copy the plots into (none: the page links the plots where they are in RESULTS_DIR)")
	link := fset.String("link", "figures", "path of -figures as seen from the page")
	fset.Usage = func() {
		fmt.Fprintln(fset.Output(), "usage: daemon page [-figures DIR] [-link PREFIX] RESULTS_DIR > PAGE   (RESULTS_DIR: bench/results/<time> of bench/run.sh)")
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() != 1 {
		fset.Usage()
		return errors.New("want one results directory")
	}
	p, err := newPage(fset.Arg(0), *figures, *link)
	if err != nil {
		return err
	}
	text, err := p.render()
	if err != nil {
		return err
	}
	_, err = io.WriteString(os.Stdout, text)
	return err
}

// page is the results page being written.
type page struct {
	dir      string // results directory
	figures  string // where plots are copied ("" = linked in place)
	link     string // -figures as seen from the page
	meta     map[string]string
	parts    map[string]partStatus
	partList []string
	loads    []float64 // 1-min load averages sampled during the run
	e2e      *e2eResults
	compare  *results
	b        strings.Builder
}

// partStatus is a part of the run as run.txt records it.
type partStatus struct {
	start, end time.Time
	exit       string
}

func newPage(dir, figures, link string) (*page, error) {
	p := &page{dir: dir, figures: figures, link: strings.TrimSuffix(link, "/"), meta: map[string]string{}, parts: map[string]partStatus{}}
	if err := p.readRun(); err != nil {
		return nil, err
	}
	if err := p.readLoad(); err != nil {
		return nil, err
	}
	var err error
	if p.e2e, err = loadE2E(filepath.Join(dir, "e2e", "results.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if p.compare, err = loadResults(filepath.Join(dir, "compare", "results.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return p, nil
}

// readRun reads run.txt: "key: value" lines; "part: NAME START END EXIT"
// once per part.
func (p *page) readRun() error {
	f, err := os.Open(filepath.Join(p.dir, "run.txt"))
	if err != nil {
		return fmt.Errorf("not a results directory of bench/run.sh: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		if k != "part" {
			p.meta[k] = v
			continue
		}
		fs := strings.Fields(v)
		if len(fs) != 4 {
			return fmt.Errorf("run.txt: bad part line %q", v)
		}
		var st partStatus
		if st.start, err = time.Parse(time.RFC3339, fs[1]); err != nil {
			return fmt.Errorf("run.txt: %w", err)
		}
		if st.end, err = time.Parse(time.RFC3339, fs[2]); err != nil {
			return fmt.Errorf("run.txt: %w", err)
		}
		st.exit = fs[3]
		p.parts[fs[0]] = st
		p.partList = append(p.partList, fs[0])
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, k := range []string{"command", "start", "commit", "cpu", "cpus", "kernel"} {
		if p.meta[k] == "" {
			return fmt.Errorf("run.txt: no %q", k)
		}
	}
	return nil
}

// readLoad reads load.txt: "TIME LOAD1 LOAD5 LOAD15 ..." lines.
func (p *page) readLoad() error {
	b, err := os.ReadFile(filepath.Join(p.dir, "load.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(fs[1], 64)
		if err != nil {
			return fmt.Errorf("load.txt: %q: %w", l, err)
		}
		p.loads = append(p.loads, v)
	}
	return nil
}

func (p *page) printf(format string, a ...any) { fmt.Fprintf(&p.b, format, a...) }

func (p *page) render() (string, error) {
	p.printf("%s", pageIntro)
	p.runSection()
	p.glance()
	for _, s := range pageSections {
		if err := p.section(s); err != nil {
			return "", fmt.Errorf("%s: %w", s.file, err)
		}
	}
	p.printf("%s", pageElsewhere)
	return p.b.String(), nil
}

// runSection: the command, the date, the code and the machine.
func (p *page) runSection() {
	m := p.meta
	p.printf("## The run on this page\n\n")
	p.printf("    %s\n\n", m["command"])
	if k := m["knobs"]; k != "" {
		p.printf("- **Settings:** `%s`\n", k)
	}
	when := m["start"]
	if st, err := time.Parse(time.RFC3339, m["start"]); err == nil {
		if end, err := time.Parse(time.RFC3339, m["end"]); err == nil {
			when = fmt.Sprintf("%s – %s UTC (%s)", st.Format("2006-01-02 15:04"), end.Format("15:04"), end.Sub(st).Round(time.Minute))
		} else {
			when = st.Format("2006-01-02 15:04") + " UTC (the run did not finish)"
		}
	}
	p.printf("- **When:** %s\n", when)
	code := "`" + shortCommit(m["commit"]) + "`"
	if s := m["subject"]; s != "" {
		code += " (" + s + ")"
	}
	if m["branch"] != "" {
		code += ", branch " + m["branch"]
	}
	if m["dirty"] == "yes" {
		code += ", **with uncommitted changes**"
	}
	p.printf("- **Code:** %s\n", code)
	machine := fmt.Sprintf("%s, %s CPUs", m["cpu"], m["cpus"])
	if m["memory"] != "" {
		machine += ", " + m["memory"]
	}
	machine += ", Linux " + m["kernel"]
	if v := m["virt"]; v != "" && v != "none" && v != "unknown" {
		machine += ", virtualization " + v
	}
	if m["go"] != "" {
		machine += ", " + m["go"]
	}
	p.printf("- **Machine:** %s\n", machine)
	if len(p.loads) > 0 {
		p.printf("- **Load average (1 min) during the run:** median %.2f, min %.2f, max %.2f (%d samples, every 10 s; load.txt)\n",
			median(p.loads), slices.Min(p.loads), slices.Max(p.loads), len(p.loads))
	} else if m["load-start"] != "" {
		p.printf("- **Load average at the start:** %s\n", m["load-start"])
	}
	if len(p.partList) > 0 {
		var s []string
		for _, name := range p.partList {
			st := p.parts[name]
			d := st.end.Sub(st.start).Round(time.Second)
			if st.exit == "0" {
				s = append(s, fmt.Sprintf("%s %s", name, d))
			} else {
				s = append(s, fmt.Sprintf("%s %s (**failed**, exit %s)", name, d, st.exit))
			}
		}
		p.printf("- **Parts:** %s\n", strings.Join(s, ", "))
	}
	p.printf("- **Raw results:** `bench/results/%s/` on the machine of the run (not committed).\n\n", filepath.Base(filepath.Clean(p.dir)))
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// glance writes "At a glance": a few answers, each from the results.
func (p *page) glance() {
	var rows [][2]string
	add := func(q, a string) { rows = append(rows, [2]string{q, a}) }
	if r := p.e2e; r != nil && len(r.Trials) > 0 {
		hooks, rates := r.keys()
		per := func(rate uint32, f func(e2eWindow) float64, form func(float64) string) string {
			var s []string
			for _, h := range hooks {
				if v := r.values(h, rate, f); len(v) > 0 {
					s = append(s, strings.ToUpper(h)+" "+form(median(v)))
				}
			}
			return strings.Join(s, ", ")
		}
		n := len(r.values(hooks[0], rates[0], func(e2eWindow) float64 { return 0 }))
		for _, rate := range rates {
			add(fmt.Sprintf("samples/s delivered end to end, 1-in-%d (median of %d)", rate, n),
				per(rate, func(w e2eWindow) float64 { return w.Delivered }, humanRate))
		}
		for _, rate := range rates {
			var s []string
			for _, h := range hooks {
				all := r.values(h, rate, func(w e2eWindow) float64 { return w.TrialLoss })
				ring := r.values(h, rate, func(w e2eWindow) float64 { return w.TrialRingLoss })
				if len(all) > 0 {
					s = append(s, fmt.Sprintf("%s %s (in the ring %s)", strings.ToUpper(h), pct(median(all)), pct(median(ring))))
				}
			}
			add(fmt.Sprintf("samples lost end to end, 1-in-%d (each one counted)", rate), strings.Join(s, ", "))
		}
		for _, rate := range rates {
			add(fmt.Sprintf("the daemon's CPU per sample delivered, 1-in-%d", rate),
				per(rate, e2eWindow.usPerSample, func(v float64) string { return fmt.Sprintf("%.3f µs", v) }))
		}
		if len(r.Alone) > 0 {
			var v []float64
			for _, w := range r.Alone {
				v = append(v, w.GenSent)
			}
			add("the frame generator alone (no program on the port), frames/s", humanRate(median(v)))
		}
	}
	if c := p.compare; c != nil && len(c.Trials) > 0 {
		cells := c.cells()
		rates := c.rates()
		per := func(rate uint32, f func(*cell) []float64, form func(float64) string) string {
			var s []string
			for _, t := range samplerTechs {
				if x := cells[rate][t]; x != nil && len(f(x)) > 0 {
					s = append(s, t+" "+form(median(f(x))))
				}
			}
			return strings.Join(s, "; ")
		}
		lo, hi := rates[0], rates[len(rates)-1]
		add(fmt.Sprintf("forwarding rate while sampling 1-in-%d, / no program (side by side)", hi),
			per(hi, func(x *cell) []float64 { return x.vsNone }, func(v float64) string { return fmt.Sprintf("%.3f", v) }))
		add(fmt.Sprintf("sampling process CPU per million forwarded packets, 1-in-%d", hi),
			per(hi, func(x *cell) []float64 { return x.cpuM }, func(v float64) string { return fmt.Sprintf("%.1f ms", v) }))
		add(fmt.Sprintf("samples/s at the collector, 1-in-%d (side by side)", lo),
			per(lo, func(x *cell) []float64 { return x.sps }, humanRate))
		if len(c.Idle) > 0 {
			var s []string
			for _, i := range c.Idle {
				s = append(s, fmt.Sprintf("%s %.3f %%", i.Tech, i.CPUPct))
			}
			add("CPU with the port sampled and no traffic (% of a core)", strings.Join(s, "; "))
		}
	}
	p.glanceTables(add)
	for _, g := range []struct{ file, question, bench string }{
		{"scale.txt", "1000 sampled ports", "BenchmarkScale"},
		{"drops.txt", "dropped-packet notifications: forwarding with the drop program / without", "BenchmarkDropsForwarding"},
		{"drops.txt", "a flood of drops", "BenchmarkDropsFlood"},
	} {
		bs, err := readGoBench(filepath.Join(p.dir, g.file))
		if err != nil {
			continue
		}
		for _, b := range bs {
			if b.name == g.bench || strings.HasPrefix(b.name, g.bench+"/") {
				add(g.question+" ("+b.name+")", b.metricsText(false, "ns/op"))
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	p.printf("## At a glance\n\n| question | answer (medians) |\n|---|---|\n")
	for _, r := range rows {
		p.printf("| %s | %s |\n", r[0], r[1])
	}
	p.printf("\n")
}

func pct(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f %%", 100*v)
}

// humanRate writes 679123 as "679 k", 1138000 as "1.14 M".
func humanRate(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.3g M", v/1e6)
	case a >= 1e5:
		return fmt.Sprintf("%.0f k", v/1e3)
	case a >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// pageSection is one benchmark's section: fixed method text, then the
// plots and the tables of the run.
type pageSection struct {
	title string
	file  string // NAME.txt in the results directory
	part  string // the run.sh part that writes it
	kind  string // how file is shown: markdown, columns or gobench
	// skip are units of benchmark lines left out (gobench): ns/op is the
	// whole run's time where a benchmark reports its own figures.
	skip   []string
	method string
	plots  []plotRef
}

// plotRef is a plot in the results directory and its name on the page.
type plotRef struct{ src, name, alt string }

func (p *page) section(s pageSection) error {
	p.printf("## %s\n\n%s\n\n", s.title, strings.TrimRight(strings.TrimLeft(s.method, "\n"), "\n"))
	st, ran := p.parts[s.part]
	path := filepath.Join(p.dir, s.file)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		p.printf("**Not in this run.**\n\n")
		return nil
	}
	if err != nil {
		return err
	}
	if ran && st.exit != "0" {
		p.printf("**This part failed in this run (exit %s).** What it wrote is below; its errors, last lines of %s:\n\n", st.exit, s.part+".err")
		p.printf("```\n%s```\n\n", tail(filepath.Join(p.dir, s.part+".err"), 15))
	}
	for _, pl := range s.plots {
		src := filepath.Join(p.dir, pl.src)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		link, err := p.plot(src, pl.name)
		if err != nil {
			return err
		}
		p.printf("![%s](%s)\n\n", pl.alt, link)
	}
	switch s.kind {
	case "markdown":
		p.printf("%s\n", embedMarkdown(string(b)))
	case "columns":
		p.printf("%s\n", embedColumns(string(b)))
	case "gobench":
		p.printf("%s\n", goBenchPage(string(b), s.skip...))
	default:
		return fmt.Errorf("kind %q", s.kind)
	}
	return nil
}

// plot copies src to the figures directory as name and returns its link.
func (p *page) plot(src, name string) (string, error) {
	if p.figures == "" {
		return filepath.ToSlash(src), nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.figures, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(p.figures, name), b, 0o644); err != nil {
		return "", err
	}
	return p.link + "/" + name, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")\n"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// isCodeLine says whether a line of a bench output is preformatted text
// (columns aligned by spaces or tabs, profiles) rather than Markdown.
func isCodeLine(l string) bool {
	if strings.HasPrefix(l, "|") || strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "#") {
		return false
	}
	return strings.Contains(l, "\t") || strings.Contains(l, "  ")
}

// embedMarkdown puts a Markdown bench output under a section of the page:
// its headings become level-4 headings, preformatted lines go into code
// blocks.
func embedMarkdown(s string) string {
	var b strings.Builder
	code := false
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		c := l != "" && isCodeLine(l)
		if c != code {
			b.WriteString("```\n")
			code = c
		}
		if !c && strings.HasPrefix(l, "#") {
			l = "#### " + strings.TrimLeft(l, "# ")
		}
		b.WriteString(l + "\n")
	}
	if code {
		b.WriteString("```\n")
	}
	return b.String()
}

// embedColumns puts a column-text bench output (daemon.sh's) under a
// section: its "## " lines become level-4 headings, everything else is
// preformatted.
func embedColumns(s string) string {
	var b strings.Builder
	code := false
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		h := strings.HasPrefix(l, "## ")
		if h == code {
			if code {
				b.WriteString("```\n\n")
			} else {
				b.WriteString("```\n")
			}
			code = !h
		}
		if h {
			b.WriteString("#### " + strings.TrimPrefix(l, "## ") + "\n\n")
			continue
		}
		b.WriteString(l + "\n")
	}
	if code {
		b.WriteString("```\n")
	}
	return b.String()
}

// goBench is one benchmark of `go test -bench` output, with every run's
// values per unit.
type goBench struct {
	label, pkg, name string
	units            []string
	values           map[string][]float64
}

// metricsText writes "12.3 ns/op (12.1–12.9), 0 B/op" (range only with
// several runs and ranges on), leaving out the units skip.
func (g *goBench) metricsText(ranges bool, skip ...string) string {
	var s []string
	for _, u := range g.units {
		if slices.Contains(skip, u) {
			continue
		}
		v := g.values[u]
		t := fmt.Sprintf("%s %s", num(median(v)), u)
		if ranges && len(v) > 1 && slices.Min(v) != slices.Max(v) {
			t += fmt.Sprintf(" (%s–%s)", num(slices.Min(v)), num(slices.Max(v)))
		}
		s = append(s, t)
	}
	return strings.Join(s, ", ")
}

func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func readGoBench(path string) ([]*goBench, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bs, _ := parseGoBench(string(b))
	return bs, nil
}

// parseGoBench reads the benchmark lines of `go test -bench` output
// ("[LABEL] BenchmarkName-N ITERATIONS VALUE UNIT ..."), grouped by label,
// package and name in order of appearance, and the other lines worth
// keeping: comments ("# ...") and failures.
func parseGoBench(s string) ([]*goBench, []string) {
	var out []*goBench
	index := map[string]*goBench{}
	var notes []string
	pkg := ""
	for _, l := range strings.Split(s, "\n") {
		fs := strings.Fields(l)
		switch {
		case len(fs) == 0:
			continue
		case fs[0] == "pkg:" && len(fs) == 2:
			pkg = fs[1]
			continue
		case strings.HasPrefix(l, "#"):
			notes = append(notes, strings.TrimSpace(strings.TrimLeft(l, "#")))
			continue
		case strings.HasPrefix(fs[0], "FAIL") || strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic:"):
			notes = append(notes, "**"+strings.TrimSpace(l)+"**")
			continue
		}
		i := slices.IndexFunc(fs, func(f string) bool { return strings.HasPrefix(f, "Benchmark") })
		if i < 0 || i > 1 || len(fs) < i+4 || (len(fs)-i-2)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseUint(fs[i+1], 10, 64); err != nil {
			continue
		}
		label := ""
		if i == 1 {
			label = fs[0]
		}
		name := fs[i]
		if j := strings.LastIndex(name, "-"); j > 0 {
			if _, err := strconv.Atoi(name[j+1:]); err == nil {
				name = name[:j]
			}
		}
		key := label + "\x00" + pkg + "\x00" + name
		g := index[key]
		if g == nil {
			g = &goBench{label: label, pkg: pkg, name: name, values: map[string][]float64{}}
			index[key] = g
			out = append(out, g)
		}
		for k := i + 2; k+1 < len(fs); k += 2 {
			v, err := strconv.ParseFloat(fs[k], 64)
			if err != nil {
				break
			}
			u := fs[k+1]
			if _, ok := g.values[u]; !ok {
				g.units = append(g.units, u)
			}
			g.values[u] = append(g.values[u], v)
		}
	}
	return out, notes
}

// goBenchPage writes go test benchmark output as tables, one per package,
// medians with the range over the runs.
func goBenchPage(s string, skip ...string) string {
	bs, notes := parseGoBench(s)
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("- " + n + "\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	if len(bs) == 0 {
		b.WriteString("No benchmark results in this output.\n")
		return b.String()
	}
	pkg := "\x00"
	for _, g := range bs {
		if g.pkg != pkg {
			if pkg != "\x00" {
				b.WriteString("\n")
			}
			pkg = g.pkg
			if pkg != "" {
				fmt.Fprintf(&b, "`%s`\n\n", pkg)
			}
			b.WriteString("| benchmark | runs | median (min–max over the runs) |\n|---|---|---|\n")
		}
		name := g.name
		if g.label != "" {
			name = g.label + " " + name
		}
		runs := 0
		for _, v := range g.values {
			runs = max(runs, len(v))
		}
		fmt.Fprintf(&b, "| %s | %d | %s |\n", name, runs, g.metricsText(true, skip...))
	}
	return b.String()
}

// mdTable is a Markdown table of a bench output under its last heading.
type mdTable struct {
	heading string
	header  []string
	rows    [][]string
}

// cell returns the cell of the first row whose label starts with row, in
// the first column whose header starts with col.
func (t *mdTable) cell(row, col string) (string, bool) {
	c := slices.IndexFunc(t.header, func(h string) bool { return strings.HasPrefix(h, col) })
	if c < 0 {
		return "", false
	}
	for _, r := range t.rows {
		if strings.HasPrefix(r[0], row) && c < len(r) {
			return r[c], true
		}
	}
	return "", false
}

// mdTables reads the Markdown tables of a bench output.
func mdTables(s string) []*mdTable {
	var out []*mdTable
	var t *mdTable
	heading := ""
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			heading = strings.TrimLeft(l, "# ")
		}
		if !strings.HasPrefix(l, "|") {
			t = nil
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case t == nil:
			t = &mdTable{heading: heading, header: cells}
			out = append(out, t)
		case strings.HasPrefix(cells[0], "---"):
		default:
			t.rows = append(t.rows, cells)
		}
	}
	return out
}

// glanceTables adds the answers read from the tables and summary lines of
// xdp.txt and daemon.txt.
func (p *page) glanceTables(add func(q, a string)) {
	if b, err := os.ReadFile(filepath.Join(p.dir, "xdp.txt")); err == nil {
		for _, t := range mdTables(string(b)) {
			if !strings.HasPrefix(t.heading, "testrun") {
				continue
			}
			un, ok1 := t.cell("sampler unsampled", "bpf_stats ns/run")
			sa, ok2 := t.cell("sampler sampled", "bpf_stats ns/run")
			pass, ok3 := t.cell("xdp_pass", "bpf_stats ns/run")
			if ok1 && ok2 && ok3 {
				add("the XDP sampler's kernel time per frame (BPF_PROG_TEST_RUN, bpf_stats)",
					fmt.Sprintf("not sampled %s ns, sampled (1-in-1, 128-byte header) %s ns; a do-nothing XDP program %s ns", un, sa, pass))
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "daemon.txt"))
	if err != nil {
		return
	}
	var live, encode, idle []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(l, "#"))
		if !strings.HasPrefix(l, "MEDIAN ") {
			continue
		}
		var flows, us float64
		var size int
		var bin string
		switch {
		case scan(l, "MEDIAN flows/s %f, agent CPU per flow sample %f us", &flows, &us):
			live = append(live, fmt.Sprintf("%s samples/s, %.3f µs each", humanRate(flows), us))
		case scan(l, "MEDIAN max_datagram %d: %f us per flow sample", &size, &us):
			encode = append(encode, fmt.Sprintf("%.3f µs (max_datagram %d)", us, size))
		case scan(l, "MEDIAN %s %f%% of a core", &bin, &us):
			idle = append(idle, fmt.Sprintf("%.4g %% of a core", us))
		}
	}
	if len(live) > 0 {
		add("samples/s through the agent in process, 1-in-1 live frames (daemon.sh part 2: max_datagram 1400, 9000)", strings.Join(live, "; "))
	}
	if len(encode) > 0 {
		add("the workers' CPU per flow sample, fed from memory", strings.Join(encode, ", "))
	}
	if len(idle) > 0 {
		add("the daemon idle, 4 ports sampled, no traffic (schedstat)", strings.Join(idle, ", "))
	}
}

// scan is fmt.Sscanf that says whether every operand was read.
func scan(s, format string, a ...any) bool {
	n, err := fmt.Sscanf(s, format, a...)
	return err == nil && n == len(a)
}
