package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// e2eResults is what `e2e -out DIR` writes to DIR/results.json: every
// window of the run, for the results page (page.go) and for comparing
// runs.
type e2eResults struct {
	Args   []string    `json:"args"`
	Start  time.Time   `json:"start"`
	End    time.Time   `json:"end"`
	Alone  []e2eWindow `json:"alone"`  // the generator alone
	Trials []e2eWindow `json:"trials"` // one per hook, rate and round
}

// hooks and rates in the order measured.
func (r *e2eResults) keys() (hooks []string, rates []uint32) {
	for _, t := range r.Trials {
		if !slices.Contains(hooks, t.Hook) {
			hooks = append(hooks, t.Hook)
		}
		if !slices.Contains(rates, t.Rate) {
			rates = append(rates, t.Rate)
		}
	}
	slices.Sort(rates)
	return hooks, rates
}

// values returns f over the rounds of hook and rate.
func (r *e2eResults) values(hook string, rate uint32, f func(e2eWindow) float64) []float64 {
	var v []float64
	for _, t := range r.Trials {
		if t.Hook == hook && t.Rate == rate {
			v = append(v, f(t))
		}
	}
	return v
}

func loadE2E(path string) (*e2eResults, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r e2eResults
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func (r *e2eResults) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return r.plots(dir)
}

var hookColors = map[string]color.Color{
	"tc":   color.RGBA{0, 150, 60, 255},
	"xdp":  color.RGBA{150, 0, 150, 255},
	"auto": color.RGBA{0, 110, 200, 255},
}

// e2ePlots are the plots of the end-to-end benchmark: one line per hook,
// x = the sampling rate N, y = the median over the rounds.
var e2ePlots = []struct {
	file, title, y string
	get            func(e2eWindow) float64
	logY           bool
}{
	{"e2e-samples.png", "Samples delivered end to end", "flow samples/s at the collector (median)", func(w e2eWindow) float64 { return w.Delivered }, true},
	{"e2e-cpu.png", "Daemon CPU per sample delivered", "µs of CPU per sample (median)", e2eWindow.usPerSample, false},
	{"e2e-loss.png", "Samples lost over the trial (all counted)", "fraction lost (median)", func(w e2eWindow) float64 { return w.TrialLoss }, false},
}

func (r *e2eResults) plots(dir string) error {
	hooks, rates := r.keys()
	for _, m := range e2ePlots {
		p := plot.New()
		p.Title.Text = m.title
		p.X.Label.Text = "sampling rate N (1-in-N)"
		p.Y.Label.Text = m.y
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		if m.logY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for _, h := range hooks {
			var pts plotter.XYs
			for _, rate := range rates {
				v := r.values(h, rate, m.get)
				if len(v) == 0 {
					continue
				}
				y := median(v)
				if m.logY && y <= 0 {
					continue
				}
				// A log x axis cannot show N = 1 at 0; it sits at 1.
				pts = append(pts, plotter.XY{X: float64(rate), Y: y})
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			c := hookColors[h]
			if c == nil {
				c = color.Black
			}
			l.Color, s.Color = c, c
			l.Width = vg.Points(1.5)
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add("hook "+h, l, s)
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, m.file)); err != nil {
			return fmt.Errorf("saving %s: %w", m.file, err)
		}
	}
	return nil
}
