package main

// The profile part: the per-packet cost of each XDP configuration on live
// frames, measured with the kernel's sampling profiler instead of the BPF
// run-time statistics.
//
// Why not bpf_stats: with kernel.bpf_stats_enabled the kernel wraps every
// program run in two sched_clock() reads. In a KVM guest sched_clock() is
// kvm-clock (pvclock_clocksource_read_nowd under kvm_sched_clock_read),
// which is most of the ~56 ns bpf_stats reports for xdp_pass and varies by
// several ns from trial to trial; the difference between two programs then
// drifts by more than the effect measured. Here bpf_stats is off (checked
// before and after every trial), so no clock runs around the program, and
// the time spent in the program is estimated from where periodic samples
// of all CPUs land.
//
// Why perf(1) and not perf_event_open in this program: perf record
// handles the per-CPU ring buffers, kernel call chains (frame pointers,
// which the x86 BPF JIT keeps) and symbolization, and its --control FIFOs
// enable and disable the events exactly around the frame-count window.
// This program only attributes the samples, by address: an IP inside the
// JIT image of the attached program, its subprograms or a program it
// tail-calls (ProgramInfo.JitedKsymAddrs / JitedFuncLens, prog arrays
// followed), so samples in other BPF programs of the same name (other
// labs, other tests on the machine) are not counted. The bench is run by
// hand, not by make test, so the external tool is acceptable.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ipRange is a half-open range [lo, hi) of kernel text addresses.
type ipRange struct{ lo, hi uint64 }

// dispatcherSyms are the symbols of the XDP dispatcher, which every XDP
// program is entered through (bpf_prog_run_xdp -> bpf_dispatcher_xdp_func
// -> the bpf_dispatcher_xdp image -> jmp to the program): common to all
// programs, so counted apart.
var dispatcherSyms = map[string]bool{"bpf_dispatcher_xdp_func": true, "bpf_dispatcher_xdp": true}

// tcRunSyms is the clsact qdisc's classification at TC ingress: tc_run
// (called from __netif_receive_skb_core for the port's mini qdisc: its
// byte and packet counters, then tcf_classify -> cls_bpf_classify -> the
// program). With only a TCX link, tc_run finds no mini qdisc and returns
// at once; TCX's own call of the program (tcx_run) is inlined into
// __netif_receive_skb_core and has no symbol to count by.
var tcRunSyms = map[string]bool{"tc_run": true}

// hookLayerSyms are what each hook runs around the program, for the
// tcprofile part, which compares TCX, clsact and XDP on veth: tc_run (see
// tcRunSyms) and, for XDP on veth, veth_xdp_rcv_skb, which copies every
// skb into a page with headroom for XDP (veth_convert_skb_to_xdp_buff,
// inlined there, -> skb_cow_data_for_xdp -> skb_pp_cow_data), runs the
// program through the dispatcher and rebuilds the skb after it.
var hookLayerSyms = map[string]bool{"tc_run": true, "veth_xdp_rcv_skb": true,
	"bpf_dispatcher_xdp_func": true, "bpf_dispatcher_xdp": true}

// rxCoreSym is the core of the kernel's receive path (its symbol may carry
// a compiler suffix such as .constprop.0): every frame of the lab's stream
// passes it at p1 (the TC hook is inlined there, then the bridge) and at
// host 2's eth0.
const rxCoreSym = "__netif_receive_skb_core"

// profileCount is the attribution of one trial's samples.
type profileCount struct {
	samples int // all samples read
	prog    int // samples with a frame in the program's ranges
	disp    int // samples with a frame in the hook's symbols (the XDP dispatcher, or tc_run) and none in the program
	rx      int // samples with a frame in the receive path's core (rxCoreSym), wherever else they are
	lost    int // PERF_RECORD_LOST records in the script output
}

// attribute reads `perf script -F period,ip,sym` output of a call-graph
// recording (a header line with the period, then one "\tIP SYM" line per
// frame, leaf first, then a blank line) and counts the samples in which
// any frame lies in prog (the program, what it calls or tail-calls), and
// the others in which a frame is in one of hook's symbols (the XDP
// dispatcher, or tc_run). All samples are expected to have the same period
// (perf record -c); a different period is an error.
func attribute(r io.Reader, prog []ipRange, hook map[string]bool, period uint64) (profileCount, error) {
	var c profileCount
	var inSample, inProg, inDisp, inRx bool
	end := func() {
		if !inSample {
			return
		}
		c.samples++
		switch {
		case inProg:
			c.prog++
		case inDisp:
			c.disp++
		}
		if inRx {
			c.rx++
		}
		inSample, inProg, inDisp, inRx = false, false, false, false
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.TrimSpace(s) == "":
			end()
		case s[0] == '\t':
			if !inSample {
				return c, fmt.Errorf("perf script line %d: call-chain frame outside a sample: %q", line, s)
			}
			f := strings.Fields(s)
			ip, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return c, fmt.Errorf("perf script line %d: bad IP in %q", line, s)
			}
			if inRanges(ip, prog) {
				inProg = true
			}
			if len(f) > 1 && hook[f[1]] {
				inDisp = true
			}
			if len(f) > 1 && (f[1] == rxCoreSym || strings.HasPrefix(f[1], rxCoreSym+".")) {
				inRx = true
			}
		case strings.Contains(s, "PERF_RECORD_LOST"):
			end()
			c.lost++
		default:
			end()
			f := strings.Fields(s)
			p, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return c, fmt.Errorf("perf script line %d: want a sample period, got %q", line, s)
			}
			if p != period {
				return c, fmt.Errorf("perf script line %d: sample period %d, want %d", line, p, period)
			}
			inSample = true
		}
	}
	end()
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading perf script output: %w", err)
	}
	return c, nil
}

func mkfifo(path string) error {
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("mkfifo %s: %w", path, err)
	}
	return nil
}

func inRanges(ip uint64, rs []ipRange) bool {
	for _, r := range rs {
		if ip >= r.lo && ip < r.hi {
			return true
		}
	}
	return false
}

// progRanges returns the JIT image ranges of p (main program and
// subprograms) and, following its prog arrays, of every program it can
// tail-call (the sampler's shared xdp_take_sample), recursively.
func progRanges(p *ebpf.Program) ([]ipRange, error) {
	info, err := p.Info()
	if err != nil {
		return nil, fmt.Errorf("program info: %w", err)
	}
	id, _ := info.ID()
	return rangesOf(info, map[ebpf.ProgramID]bool{id: true})
}

func rangesOf(info *ebpf.ProgramInfo, seen map[ebpf.ProgramID]bool) ([]ipRange, error) {
	addrs, ok1 := info.JitedKsymAddrs()
	lens, ok2 := info.JitedFuncLens()
	if !ok1 || !ok2 || len(addrs) == 0 || len(addrs) != len(lens) {
		return nil, fmt.Errorf("program %s: no JIT symbol addresses (JIT off, or not root?)", info.Name)
	}
	var rs []ipRange
	for i, a := range addrs {
		rs = append(rs, ipRange{uint64(a), uint64(a) + uint64(lens[i])})
	}
	mapIDs, _ := info.MapIDs()
	for _, mid := range mapIDs {
		sub, err := tailTargets(mid, seen)
		if err != nil {
			return nil, err
		}
		rs = append(rs, sub...)
	}
	return rs, nil
}

// tailTargets returns the ranges of the programs in prog array mid (none
// if mid is another kind of map).
func tailTargets(mid ebpf.MapID, seen map[ebpf.ProgramID]bool) ([]ipRange, error) {
	m, err := ebpf.NewMapFromID(mid)
	if err != nil {
		return nil, fmt.Errorf("opening map %d: %w", mid, err)
	}
	defer m.Close()
	if m.Type() != ebpf.ProgramArray {
		return nil, nil
	}
	var rs []ipRange
	for k := uint32(0); k < m.MaxEntries(); k++ {
		var pid uint32 // a prog array read from user space yields program IDs
		if err := m.Lookup(k, &pid); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return nil, fmt.Errorf("prog array %d slot %d: %w", mid, k, err)
		}
		if seen[ebpf.ProgramID(pid)] {
			continue
		}
		seen[ebpf.ProgramID(pid)] = true
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(pid))
		if err != nil {
			return nil, fmt.Errorf("opening tail-call target %d: %w", pid, err)
		}
		info, err := p.Info()
		if err == nil {
			var sub []ipRange
			sub, err = rangesOf(info, seen)
			rs = append(rs, sub...)
		}
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("tail-call target %d: %w", pid, err)
		}
	}
	return rs, nil
}

// perfRun is a perf record of all CPUs, started with its events disabled
// and switched on and off through its control FIFO.
type perfRun struct {
	dir      string
	cmd      *exec.Cmd
	ctl, ack *os.File
	stderr   strings.Builder
	kept     string // -profile-keep: the directory left in place
}

// startPerf starts `perf record -a -g` of the kernel-mode cpu-clock event
// every period ns on every CPU, events disabled until enable.
func startPerf(perf string, period uint64) (*perfRun, error) {
	dir, err := os.MkdirTemp("", "xdpbench-perf-")
	if err != nil {
		return nil, fmt.Errorf("perf temp dir: %w", err)
	}
	pr := &perfRun{dir: dir}
	ctl, ack := filepath.Join(dir, "ctl"), filepath.Join(dir, "ack")
	for _, f := range []string{ctl, ack} {
		if err := mkfifo(f); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// Opened read-write: neither open blocks waiting for perf.
	if pr.ctl, err = os.OpenFile(ctl, os.O_RDWR, 0); err == nil {
		pr.ack, err = os.OpenFile(ack, os.O_RDWR, 0)
	}
	if err != nil {
		pr.cleanup()
		return nil, fmt.Errorf("opening perf control FIFOs: %w", err)
	}
	pr.cmd = exec.Command(perf, "record", "-q", "-a", "-g", "--kernel-callchains",
		"-e", "cpu-clock:k", "-c", strconv.FormatUint(period, 10),
		"-m", "1024", "-D", "-1", "--control", "fifo:"+ctl+","+ack,
		"-o", filepath.Join(dir, "perf.data"))
	pr.cmd.Stderr = &pr.stderr
	if err := pr.cmd.Start(); err != nil {
		pr.cleanup()
		return nil, fmt.Errorf("starting perf record: %w", err)
	}
	return pr, nil
}

// command sends a control command ("enable", "disable") and waits for
// perf's acknowledgement.
func (pr *perfRun) command(cmd string) error {
	if _, err := pr.ctl.WriteString(cmd + "\n"); err != nil {
		return fmt.Errorf("perf control %s: %w", cmd, err)
	}
	if err := pr.ack.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return fmt.Errorf("perf ack deadline: %w", err)
	}
	var got []byte
	buf := make([]byte, 16)
	for !strings.Contains(string(got), "ack\n") {
		n, err := pr.ack.Read(buf)
		if err != nil {
			return fmt.Errorf("perf control %s: waiting for ack: %w (perf: %s)", cmd, err, pr.stderr.String())
		}
		got = append(got, buf[:n]...)
	}
	return nil
}

// stop ends perf record (SIGINT writes out the data) and waits for it.
func (pr *perfRun) stop() error {
	if err := pr.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("stopping perf record: %w", err)
	}
	err := pr.cmd.Wait()
	// perf record writes out its data, then re-raises SIGINT on itself.
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("perf record: %w: %s", err, pr.stderr.String())
	}
	return nil
}

// count runs perf script on the recording and attributes its samples.
func (pr *perfRun) count(perf string, prog []ipRange, hook map[string]bool, period uint64) (profileCount, error) {
	cmd := exec.Command(perf, "script", "-i", filepath.Join(pr.dir, "perf.data"),
		"-F", "period,ip,sym", "--show-lost-events", "--max-stack", "32")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return profileCount{}, fmt.Errorf("perf script: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return profileCount{}, fmt.Errorf("starting perf script: %w", err)
	}
	c, aerr := attribute(out, prog, hook, period)
	if aerr != nil {
		_, _ = io.Copy(io.Discard, out) // let perf script finish
	}
	werr := cmd.Wait()
	if aerr != nil {
		return c, aerr
	}
	if werr != nil {
		return c, fmt.Errorf("perf script: %w: %s", werr, stderr.String())
	}
	return c, nil
}

// cleanup closes the FIFOs, kills perf if it still runs (by its PID) and
// removes the recording.
func (pr *perfRun) cleanup() {
	if pr.ctl != nil {
		pr.ctl.Close()
	}
	if pr.ack != nil {
		pr.ack.Close()
	}
	if pr.cmd != nil && pr.cmd.ProcessState == nil && pr.cmd.Process != nil {
		_ = pr.cmd.Process.Kill() // best effort: an error path already
		_ = pr.cmd.Wait()
	}
	if pr.dir != "" {
		os.RemoveAll(pr.dir)
	}
}

// saveJited writes p's JIT image to dir/prog.jited and its load address
// and name to dir/prog.addr (for reading the hot offsets of a kept
// recording; perf script -F ip,sym,symoff gives them).
func saveJited(p *ebpf.Program, dir string) error {
	info, err := p.Info()
	if err != nil {
		return fmt.Errorf("program info: %w", err)
	}
	insns, ok := info.JitedInsns()
	addrs, ok2 := info.JitedKsymAddrs()
	if !ok || !ok2 || len(addrs) == 0 {
		return fmt.Errorf("program %s: JIT image not available", info.Name)
	}
	if err := os.WriteFile(filepath.Join(dir, "prog.jited"), insns, 0o600); err != nil {
		return fmt.Errorf("saving JIT image: %w", err)
	}
	addr := fmt.Sprintf("%#x %s\n", addrs[0], info.Name)
	if err := os.WriteFile(filepath.Join(dir, "prog.addr"), []byte(addr), 0o600); err != nil {
		return fmt.Errorf("saving JIT address: %w", err)
	}
	return nil
}

// bpfStatsEnabled reads kernel.bpf_stats_enabled, which reads 1 while any
// BPF_ENABLE_STATS descriptor is held or the sysctl is set.
func bpfStatsEnabled() (bool, error) {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	if err != nil {
		return false, fmt.Errorf("reading kernel.bpf_stats_enabled: %w", err)
	}
	return strings.TrimSpace(string(b)) != "0", nil
}

// profResult is one profile trial.
type profResult struct {
	frames uint64
	c      profileCount
}

// profile is the kernel-profiler part: same lab, stream and configurations
// as frames (without "no program"), bpf_stats off, perf sampling every CPU
// during each trial window.
func (b *bench) profile() error {
	confs := []config{confPass, confFloor, confUnsampled, confN1000, confEvery}
	res, period, loads, err := b.profileRun(confs, dispatcherSyms)
	if err != nil {
		return err
	}
	b.profileReport(confs, res, period, loads)
	return nil
}

// profileRun runs the profile trials of confs over one stream; hook are
// the symbols counted apart from the program.
func (b *bench) profileRun(confs []config, hook map[string]bool) (map[string][]profResult, uint64, []string, error) {
	// BPF run-time statistics off: drop our BPF_ENABLE_STATS descriptor
	// (the earlier parts are done) and check nobody else holds them.
	if b.stats != nil {
		if err := b.stats.Close(); err != nil {
			return nil, 0, nil, fmt.Errorf("disabling BPF stats: %w", err)
		}
		b.stats = nil
	}
	if on, err := bpfStatsEnabled(); err != nil || on {
		return nil, 0, nil, errors.Join(err, errStatsOn(on))
	}
	period := uint64(math.Round(1e9 / b.o.profFreq))
	res := make(map[string][]profResult)
	loads, err := b.overStream(confs, func(c config, readRx func() (uint64, error)) error {
		r, err := b.profileTrial(c, readRx, hook, period)
		if err != nil {
			return err
		}
		res[c.name] = append(res[c.name], r)
		return nil
	})
	return res, period, loads, err
}

func errStatsOn(on bool) error {
	if on {
		return errors.New("kernel.bpf_stats_enabled is 1 (another process holds BPF stats): the profile part needs them off")
	}
	return nil
}

func (b *bench) profileTrial(c config, readRx func() (uint64, error), hook map[string]bool, period uint64) (profResult, error) {
	var r profResult
	detach, err := b.attach(c)
	if err != nil {
		return r, err
	}
	var prog []ipRange
	var pr *perfRun
	err = func() error {
		var err error
		if prog, err = progRanges(c.prog(b)); err != nil {
			return err
		}
		// perf starts during the settle time (its start-up is not measured).
		if pr, err = startPerf(b.o.perf, period); err != nil {
			return err
		}
		time.Sleep(b.o.settle)
		if on, err := bpfStatsEnabled(); err != nil || on {
			return errors.Join(err, errStatsOn(on))
		}
		rx0, err := readRx()
		if err != nil {
			return err
		}
		if err := pr.command("enable"); err != nil {
			return err
		}
		time.Sleep(b.o.profTrial)
		if err := pr.command("disable"); err != nil {
			return err
		}
		rx1, err := readRx()
		if err != nil {
			return err
		}
		if on, err := bpfStatsEnabled(); err != nil || on {
			return errors.Join(err, errStatsOn(on))
		}
		if r.frames = rx1 - rx0; r.frames == 0 {
			return fmt.Errorf("no frames reached host 2")
		}
		return nil
	}()
	if derr := detach(); derr != nil && err == nil {
		err = derr
	}
	if pr != nil {
		if err == nil {
			err = pr.stop()
		}
		if err == nil {
			r.c, err = pr.count(b.o.perf, prog, hook, period)
		}
		if b.o.profKeep && err == nil {
			// perf (here) cannot annotate BPF; keep the JIT image for
			// objdump -D -b binary -m i386:x86-64 --adjust-vma=<addr>.
			err = saveJited(c.prog(b), pr.dir)
		}
		if b.o.profKeep {
			pr.dir, pr.kept = "", pr.dir // cleanup leaves the recording
			fmt.Fprintf(os.Stderr, "xdp bench: profile %s: recording kept in %s\n", c.name, pr.kept)
		}
		pr.cleanup()
	}
	return r, err
}

// profileReport prints the profile part's table.
func (b *bench) profileReport(confs []config, res map[string][]profResult, period uint64, loads []string) {
	nsOf := func(n int, frames uint64) float64 { return float64(n) * float64(period) / float64(frames) }
	sigma := func(n int, frames uint64) float64 { return math.Sqrt(float64(n)) * float64(period) / float64(frames) }
	type fig struct{ prog, both, sProg, sBoth []float64 }
	figs := make(map[string]*fig)
	lost := 0
	for _, c := range confs {
		f := &fig{}
		for _, r := range res[c.name] {
			f.prog = append(f.prog, nsOf(r.c.prog, r.frames))
			f.both = append(f.both, nsOf(r.c.prog+r.c.disp, r.frames))
			f.sProg = append(f.sProg, sigma(r.c.prog, r.frames))
			f.sBoth = append(f.sBoth, sigma(r.c.prog+r.c.disp, r.frames))
			lost += r.c.lost
		}
		figs[c.name] = f
	}
	pass, floor := figs[confPass.name], figs[confFloor.name]
	// quadrature returns per round sqrt(a^2 + b^2): the 1-sigma Poisson
	// resolution of a difference of two independent counts.
	quadrature := func(a, b []float64) []float64 {
		var r []float64
		for i := range min(len(a), len(b)) {
			r = append(r, math.Hypot(a[i], b[i]))
		}
		return r
	}
	spread := func(xs []float64) string {
		if len(xs) == 0 {
			return "—"
		}
		return fmt.Sprintf("%+.2f (%+.2f – %+.2f)", median(xs), slices.Min(xs), slices.Max(xs))
	}
	w := b.out
	fmt.Fprintf(w, "## profile: live frames, bpf_stats off, perf record -a -g cpu-clock every %d ns (%.0f Hz per CPU); trafgen h1 -> h2, 64-byte UDP, %d rounds x %v per configuration, order rotated each round (load average per round: %v)\n\n",
		period, 1e9/float64(period), b.o.rounds, b.o.profTrial, loads)
	fmt.Fprintf(w, "| configuration on p1 | frames/trial (median) | program samples (median) | program ns/frame (median) | ±1σ Poisson | minus xdp_pass (median, min – max) | ±1σ Poisson | σ between rounds | minus xdp_floor (median, min – max) | program + dispatcher ns/frame | minus xdp_pass (median, min – max) | per-round program ns/frame |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		f := figs[c.name]
		var frames, samples []float64
		for _, r := range res[c.name] {
			frames = append(frames, float64(r.frames))
			samples = append(samples, float64(r.c.prog))
		}
		dProg, sdProg, sdRounds, dFloor, dBoth := "—", "—", "—", "—", "—"
		if c.name != confPass.name {
			d := diffs(f.prog, pass.prog)
			dProg = spread(d)
			sdProg = fmt.Sprintf("%.2f", median(quadrature(f.sProg, pass.sProg)))
			if len(d) > 1 {
				sdRounds = fmt.Sprintf("%.2f", stddev(d))
			}
			dBoth = spread(diffs(f.both, pass.both))
		}
		if c.port != nil {
			dFloor = spread(diffs(f.prog, floor.prog))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.2f | %s | %s | %s | %s | %.2f | %s | %s |\n",
			c.name, median(frames), median(samples), median(f.prog), median(f.sProg), dProg, sdProg,
			sdRounds, dFloor, median(f.both), dBoth, list("%.2f", f.prog))
	}
	fmt.Fprintf(w, "\nns/frame = samples x %d ns / frames received by host 2 in the window (perf enabled and disabled through its control FIFO around the two rx reads). Program: samples with a call-chain frame in the attached program's JIT image, its subprograms or the program it tail-calls (by address), i.e. including the helpers it calls. Dispatcher: other samples with a frame in bpf_dispatcher_xdp_func / bpf_dispatcher_xdp (shared by every XDP program on the machine). ±1σ Poisson: the counting resolution sqrt(samples) x period / frames, median over rounds; for differences sqrt(σa² + σb²). σ between rounds: standard deviation of the per-round differences (the actual trial-to-trial noise; the median's error is about 1.25 σ / sqrt(rounds)). Differences are per round (adjacent trials), then median and range. Lost-event records in the recordings: %d.\n\n", period, lost)
}

// stddev returns the sample standard deviation of xs (0 for fewer than 2).
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return math.Sqrt(v / float64(len(xs)-1))
}
