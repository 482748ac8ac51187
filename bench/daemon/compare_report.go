package main

import (
	"fmt"
	"image/color"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func netInterfaceIndex(name string) (int, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifc.Index, nil
}

// xdpProgIDHere returns the ID of the XDP program on link name in the
// calling thread's namespace.
func xdpProgIDHere(name string) (uint32, error) {
	lk, err := netlink.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	if x := lk.Attrs().Xdp; x != nil && x.ProgId != 0 {
		return x.ProgId, nil
	}
	return 0, fmt.Errorf("no XDP program on %s", name)
}

// spread is a median with the smallest and largest value.
type spread struct{ med, lo, hi float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	return spread{median(v), slices.Min(v), slices.Max(v)}
}

func (s spread) fmt(f string) string {
	if math.IsNaN(s.med) {
		return "n/a"
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.med, s.lo, s.hi)
}

// cell collects, for one technique at one rate, every round's values.
type cell struct {
	fwd, vsNone, vsPass, ns, cpu, cpuM, sps, loss, known, colDrops []float64
	genPPS, genRefused, genCPU                                     []float64 // -traffic gen
}

// cells groups trials by rate and technique; ratios are per round against
// the references measured in the same round and rate block.
func (r *results) cells() map[uint32]map[string]*cell {
	ref := map[string]float64{} // "tech@rate#round" -> fwd pps
	for _, t := range r.Trials {
		if t.Rate == 0 {
			ref[fmt.Sprintf("%s#%d", t.Tech, t.Round)] = t.FwdPPS
		}
	}
	out := map[uint32]map[string]*cell{}
	for _, t := range r.Trials {
		tech, rate := t.Tech, t.Rate
		if rate == 0 {
			name, n, _ := strings.Cut(t.Tech, "@")
			tech = name
			fmt.Sscan(n, &rate)
		}
		if out[rate] == nil {
			out[rate] = map[string]*cell{}
		}
		c := out[rate][tech]
		if c == nil {
			c = &cell{}
			out[rate][tech] = c
		}
		c.fwd = append(c.fwd, t.FwdPPS)
		if t.GenPPS > 0 {
			c.genPPS = append(c.genPPS, t.GenPPS)
			c.genRefused = append(c.genRefused, t.GenRefused)
			c.genCPU = append(c.genCPU, t.GenCPU)
		}
		if n := ref[fmt.Sprintf("%s@%d#%d", techNone, rate, t.Round)]; n > 0 {
			c.vsNone = append(c.vsNone, t.FwdPPS/n)
		}
		if p := ref[fmt.Sprintf("%s@%d#%d", techPass, rate, t.Round)]; p > 0 {
			c.vsPass = append(c.vsPass, t.FwdPPS/p)
		}
		if t.NsPerPkt >= 0 {
			c.ns = append(c.ns, t.NsPerPkt)
		}
		if tech != techNone && tech != techPass {
			c.cpu = append(c.cpu, t.CPUPct)
			c.cpuM = append(c.cpuM, t.cpuPerMpkt())
			c.sps = append(c.sps, t.SamplesPS)
			c.loss = append(c.loss, t.lossFrac())
			c.colDrops = append(c.colDrops, t.CollectorDrops)
			if t.KnownLost >= 0 {
				c.known = append(c.known, t.KnownLost)
			}
		}
	}
	return out
}

func (r *results) rates() []uint32 {
	seen := map[uint32]bool{}
	var rs []uint32
	for _, t := range r.Trials {
		rate := t.Rate
		if rate == 0 {
			_, n, _ := strings.Cut(t.Tech, "@")
			fmt.Sscan(n, &rate)
		}
		if !seen[rate] {
			seen[rate] = true
			rs = append(rs, rate)
		}
	}
	slices.Sort(rs)
	return rs
}

// knows says whether a technique reports its own losses.
func knows(tech string) string {
	switch tech {
	case techSFSD, techSFSX:
		return "yes (kernel drops + agent drops, in the samples' drops field and metrics)"
	case techPcap:
		return "yes (PACKET_STATISTICS tp_drops, in the drops field)"
	case techTC:
		return "no (a failed ring reservation is not counted)"
	}
	return "—"
}

func (r *results) markdown() string {
	var b strings.Builder
	var u unix.Utsname
	_ = unix.Uname(&u) // cannot fail on Linux
	fmt.Fprintf(&b, "# Techniques side by side (`go run ./bench/daemon compare %s`)\n\n", r.Opts)
	fmt.Fprintf(&b, "- %s, kernel %s, %d CPUs; load average (1 min) at start, after each round, at the end: %s\n",
		r.Start.Format("2006-01-02 15:04Z"), unix.ByteSliceToString(u.Release[:]), numCPU(), strings.Join(r.Load, ", "))
	b.WriteString("- CPU is the sampling process's time on CPU from /proc/PID/task/*/schedstat (ns). The machine is shared with other engineers' jobs: absolute rates move by 2x between runs; compare ratios within one run. Values are medians over rounds with (min–max).\n")
	traffic := r.Traffic
	if traffic == "" {
		traffic = "trafgen: 64-byte UDP frames from a packet socket in h1 at trafgen's maximum rate"
	}
	b.WriteString("- Lab: h1 -> p1 -> br0 -> p2 -> h2 (veth, one switch namespace); each technique samples p1; samples go to a collector namespace over mgmt0. Traffic: " + traffic + ".\n")
	if strings.HasPrefix(traffic, "bench/gen") {
		b.WriteString("- With the generator, p1 receives xdp_frames through veth's NAPI poll, as from a NIC: an XDP program runs on the frame itself (no skb, no copy), and without one the frame is turned into an skb there. The remark below on veth's copy for XDP concerns skbs sent into a veth (trafgen), not these frames.\n")
	}
	b.WriteString("- On veth, attaching any XDP program moves receive onto veth's NAPI path (frames queued in the peer's ptr_ring and polled) instead of netif_rx into the per-CPU backlog: the do-nothing XDP program alone changes forwarding (about -17% on this machine in earlier runs), and veth copies every frame into a page with XDP headroom before an XDP program sees it (skb_pp_cow_data). Both ratios are given: to no program at all, and to the do-nothing XDP program (the reference for an XDP sampler).\n")
	b.WriteString("- Kernel ns/pkt comes from the BPF run-time statistics, switched on only in a window of their own after each trial's main window: they read the clock twice per program run, which on this KVM guest (kvm-clock) costs tens of ns per packet and would slow every BPF technique's forwarding but not the packet socket's.\n")
	b.WriteString("- sflowswitchd runs with -drops " + r.Drops + " (dropped-packet notifications; off compares the sampling alone: the lab's sink drops every frame it receives, and the drop watcher is a tracepoint program that runs for every drop in the kernel, whose cost bench/drops measures).\n")
	b.WriteString("- sflowswitchd runs twice: with its default hook (auto, which on a veth port is TC ingress through TCX, for the reason above) and with -hook xdp (the XDP sampler on the same veth port, as on a NIC with native XDP).\n\n")

	cells := r.cells()
	rates := r.rates()
	b.WriteString("## Forwarding, per-packet cost, CPU, samples\n\n")
	b.WriteString("| 1-in-N | technique | forwarded pps | / no program | / do-nothing XDP | kernel ns/pkt (bpf_stats) | sampling process CPU % of a core | CPU ms per M forwarded pkts | samples/s at collector | lost (1 - delivered/expected) | reported lost by the technique | collector socket drops |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, rate := range rates {
		for _, tech := range allTechs {
			c := cells[rate][tech]
			if c == nil {
				continue
			}
			row := []string{fmt.Sprint(rate), tech, spreadOf(c.fwd).fmt("%.0f"), spreadOf(c.vsNone).fmt("%.3f"),
				spreadOf(c.vsPass).fmt("%.3f"), spreadOf(c.ns).fmt("%.1f")}
			if tech == techNone || tech == techPass {
				row = append(row, "—", "—", "—", "—", "—", "—")
			} else {
				known := "no count"
				if len(c.known) > 0 {
					known = spreadOf(c.known).fmt("%.0f")
				}
				row = append(row, spreadOf(c.cpu).fmt("%.2f"), spreadOf(c.cpuM).fmt("%.1f"),
					spreadOf(c.sps).fmt("%.0f"), spreadOf(c.loss).fmt("%.3f"), known, spreadOf(c.colDrops).fmt("%.0f"))
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	b.WriteString("\nExpected samples/s = frames received on p1 per second / N. \"Lost\" compares what reached the collector (counted over the window shifted by the 1.3 s delivery lag: sflowswitchd sends samples below its ring wake-up mark at its workers' one-second tick) with that expectation: at 1-in-1 it is exact, at other rates it includes binomial noise (it can be negative). \"Reported lost\" is the technique's own count over the trial (sflowswitchd: kernel ring drops + agent drops from its metrics over the window; pcap: tp_drops over the trial; the TC technique has none).\n\n")

	if r.Traffic != "" && strings.HasPrefix(r.Traffic, "bench/gen") {
		b.WriteString("## The generator during the trials\n\n")
		b.WriteString("Its thread's CPU includes the softirq work the kernel runs on it at the end of each batch (p1's NAPI poll, the hook, the bridge, h2's receive), unless paced below what that CPU can take.\n\n")
		b.WriteString("| 1-in-N | technique | frames/s sent (accepted by the veth) | frames/s refused (p1's ring full) | generator thread CPU % of a core |\n|---|---|---|---|---|\n")
		for _, rate := range rates {
			for _, tech := range allTechs {
				c := cells[rate][tech]
				if c == nil || len(c.genPPS) == 0 {
					continue
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", rate, tech, spreadOf(c.genPPS).fmt("%.0f"), spreadOf(c.genRefused).fmt("%.0f"), spreadOf(c.genCPU).fmt("%.1f"))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("## Whether each technique knows what it lost\n\n| technique | knows its losses |\n|---|---|\n")
	for _, tech := range samplerTechs {
		fmt.Fprintf(&b, "| %s | %s |\n", tech, knows(tech))
	}

	b.WriteString("\n## Idle CPU (port sampled at 1-in-1000, no traffic)\n\n| technique | CPU % of a core |\n|---|---|\n")
	for _, i := range r.Idle {
		fmt.Fprintf(&b, "| %s | %.3f |\n", i.Tech, i.CPUPct)
	}
	b.WriteString("\n## sample_pool accuracy\n\nExactly counted traffic (trafgen --num, or the generator's exact count) through p1; the last flow sample's sample_pool against the kernel's rx_packets of p1 over the trial.\n\n")
	b.WriteString("| technique | frames | samples | last sample_pool | error % |\n|---|---|---|---|---|\n")
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %+.3f |\n", p.Tech, p.Frames, p.Samples, p.LastPool, p.ErrPct)
	}
	b.WriteString("\nsflowswitchd's pool is counted per frame in the kernel and reported at the sampled frame, so its only shortfall is the frames after the last sample (fewer than N on average); the baselines report samples x N, an estimate whose error is binomial noise.\n\n")
	b.WriteString("Plots: forwarding.png (forwarding rate / no program vs N), samples.png (samples/s at the collector vs N) and loss.png (fraction lost), cpu.png (CPU per million forwarded packets), nspkt.png (kernel ns per packet).\n")
	return b.String()
}

var techColors = map[string]color.Color{
	techNone: color.RGBA{120, 120, 120, 255},
	techPass: color.RGBA{0, 0, 0, 255},
	techPcap: color.RGBA{200, 80, 0, 255},
	techTC:   color.RGBA{0, 110, 200, 255},
	techSFSD: color.RGBA{0, 150, 60, 255},
	techSFSX: color.RGBA{150, 0, 150, 255},
}

// plots writes the PNGs: one line per technique, x = N (log scale).
func (r *results) plots(dir string) error {
	cells := r.cells()
	rates := r.rates()
	type metric struct {
		file, title, y string
		get            func(*cell) []float64
		techs          []string
		logY           bool
	}
	ms := []metric{
		{"forwarding.png", "Forwarding rate vs sampling rate", "forwarded pps / no program (median)", func(c *cell) []float64 { return c.vsNone }, allTechs, false},
		{"samples.png", "Samples delivered to the collector", "flow samples/s (median)", func(c *cell) []float64 { return c.sps }, samplerTechs, true},
		{"loss.png", "Samples lost (1 - delivered/expected)", "fraction lost (median)", func(c *cell) []float64 { return c.loss }, samplerTechs, false},
		{"cpu.png", "Sampling process CPU per million forwarded packets", "CPU ms / M packets (median)", func(c *cell) []float64 { return c.cpuM }, samplerTechs, true},
		{"nspkt.png", "Kernel cost per packet (bpf_stats)", "ns per packet (median)", func(c *cell) []float64 { return c.ns }, []string{techPass, techTC, techSFSD, techSFSX}, false},
	}
	for _, m := range ms {
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
		for _, tech := range m.techs {
			var pts plotter.XYs
			for _, rate := range rates {
				c := cells[rate][tech]
				if c == nil {
					continue
				}
				v := m.get(c)
				if len(v) == 0 {
					continue
				}
				y := median(v)
				if m.logY && y <= 0 {
					continue
				}
				pts = append(pts, plotter.XY{X: float64(rate), Y: y})
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = techColors[tech], techColors[tech]
			l.Width = vg.Points(1.5)
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(tech, l, s)
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, m.file)); err != nil {
			return fmt.Errorf("saving %s: %w", m.file, err)
		}
	}
	return nil
}
