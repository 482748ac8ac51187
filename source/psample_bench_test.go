package source

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
)

// BenchmarkPathCPU: CPU per sample of the psample path against the BPF
// samplers (XDP, TC), at the same rate on the same machine: frames sent
// into a veth port by another process (its CPU: the kernel's per-frame
// work, sampling included, runs in the sender's context on veth), the
// agent in this one (its CPU: reading, encoding and sending the
// samples). Paths alternate within each round; medians over the rounds.
//
//	go test -run '^$' -bench BenchmarkPathCPU -benchtime 1x ./source
//
// SFPS_BENCH_PATHS (e.g. "psample,xdp"; "psample-netlink": the netlink
// intake, where "psample" takes the tap; "psample@10ms": the readers'
// holdoff 10 ms), SFPS_BENCH_ROUNDS (default 3)
// and SFPS_BENCH_WORKERS (default 1; the port is one worker's, the
// others idle, as a port's data source belongs to one sub-agent) change
// the run.
//
// (the VM: make vagrant-test VM_CMD='cd source && $TREE/tests/source.test -test.run ^$ -test.bench BenchmarkPathCPU -test.benchtime 1x')
func BenchmarkPathCPU(b *testing.B) {
	const frames, rate = 20000, 1
	rounds, workers := envInt(b, "SFPS_BENCH_ROUNDS", 3), envInt(b, "SFPS_BENCH_WORKERS", 1)
	paths := []string{"psample", "xdp", "tc"}
	if v := os.Getenv("SFPS_BENCH_PATHS"); v != "" { // e.g. xdp,tc on a kernel without psample
		paths = strings.Split(v, ",")
	}
	for _, p := range paths {
		if strings.HasPrefix(p, "psample") {
			needActSample(b)
		}
	}
	agentNs := map[string][]float64{}
	senderNs := map[string][]float64{}
	for round := 0; round < rounds; round++ {
		for _, path := range paths {
			a, s, n := pathTrial(b, path, frames, rate, workers)
			agentNs[path] = append(agentNs[path], a)
			senderNs[path] = append(senderNs[path], s)
			b.Logf("round %d %-7s: %d samples of %d frames, agent %.0f ns/sample, sender %.0f ns/frame", round+1, path, n, frames, a, s)
		}
	}
	for _, path := range paths {
		a, s := median(agentNs[path]), median(senderNs[path])
		b.ReportMetric(a, path+"-agent-ns/sample")
		b.ReportMetric(s, path+"-sender-ns/frame")
		b.Logf("%-7s agent %.0f ns/sample [%.0f – %.0f], sender %.0f ns/frame [%.0f – %.0f]", path, a, minf(agentNs[path]), maxf(agentNs[path]),
			s, minf(senderNs[path]), maxf(senderNs[path]))
	}
	// The psample path against each ring path, round by round: the
	// trials of one round ran one after the other, under the machine's
	// load of that moment, so the ratio of a round is steadier than the
	// ratio of the medians when the load drifts (a shared machine, or an
	// emulated VM on one).
	for _, ps := range paths {
		if !strings.HasPrefix(ps, "psample") {
			continue
		}
		for _, ring := range paths {
			if strings.HasPrefix(ring, "psample") {
				continue
			}
			var r []float64
			for i := range agentNs[ring] {
				r = append(r, agentNs[ps][i]/agentNs[ring][i])
			}
			b.ReportMetric(median(r), ps+"/"+ring)
			b.Logf("%s/%-4s agent CPU per sample, per round: median %.2f [%.2f – %.2f] %.2f", ps, ring, median(r), minf(r), maxf(r), r)
		}
	}
}

// envInt is the positive integer in environment variable name, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s: %q", name, v)
	}
	return n
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func minf(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[0] }
func maxf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)-1]
}

// cpuNow is this process's CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pathTrial runs one trial: a fresh lab, the agent on path, frames sent
// by a helper process; it returns the agent's and the sender's CPU.
func pathTrial(b *testing.B, path string, frames int, rate uint32, workers int) (agentNs, senderNs float64, samples int) {
	lab := pslab.New(b)
	i0, _ := lab.Veth(b, "sfps0", "sfps1")
	var dpl agent.SampleSource
	var readers []agent.SampleReader
	var closeFn func() error
	kind, d, _ := strings.Cut(path, "@")
	if d != "" {
		kind += "@"
	}
	switch kind {
	case "psample", "psample@", "psample-netlink", "psample-netlink@":
		// psample@D: the readers' holdoff D (psample.ConnConfig.Holdoff);
		// psample-netlink: the netlink intake (psample: the default, the
		// tap where it attaches).
		var cc psample.ConnConfig
		if strings.HasPrefix(kind, "psample-netlink") {
			cc.Intake = psample.IntakeNetlink
		}
		if d != "" {
			var err error
			if cc.Holdoff, err = time.ParseDuration(d); err != nil {
				b.Fatalf("path %s: %v", path, err)
			}
		}
		var p *Psample
		lab.Do(b, func() (err error) { p, err = NewPsample(PsampleConfig{Workers: workers, Conn: cc}); return err })
		dpl, readers, closeFn = p, p.Readers(), p.Close
	default:
		hook := dataplane.HookXDP
		if path == "tc" {
			hook = dataplane.HookTC
		}
		var dp *dataplane.Dataplane
		lab.Do(b, func() (err error) {
			dp, err = dataplane.Open(dataplane.Config{Workers: workers, MaxPorts: 4, Hook: hook})
			return err
		})
		var err error
		if readers, err = BPFReaders(dp, workers); err != nil {
			b.Fatal(err)
		}
		dpl, closeFn = BPF{DP: dp}, dp.Close
	}
	col := newCollector(b)
	a := agent.New(agent.Options{Workers: workers, Source: dpl})
	done := make(chan struct{})
	ctx, ctxCancel := context.WithCancel(context.Background())
	go func() { a.Run(ctx, readers); close(done) }()
	cfg := agent.Config{AgentAddress: netip.MustParseAddr("198.18.0.9"), Receivers: []agent.ReceiverConfig{{Index: 1, Address: col.addr()}},
		Samplers: []agent.SamplerConfig{{IfIndex: uint32(i0), Instance: 1, Receiver: 1, Rate: rate, HeaderBytes: 128}}}
	lab.Do(b, func() error { return a.Apply(cfg) })
	time.Sleep(200 * time.Millisecond)
	cpu0 := cpuNow(b)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPsampleSender$")
	cmd.Env = append(os.Environ(), senderEnv+"="+lab.NS+",sfps1,"+strconv.Itoa(frames))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sender: %v: %s", err, out)
	}
	// Until the collector holds still.
	last, still := -1, 0
	for still < 3 {
		time.Sleep(300 * time.Millisecond)
		n := col.count()
		if n == last {
			still++
		} else {
			still, last = 0, n
		}
	}
	cpu1 := cpuNow(b)
	ctxCancel()
	<-done
	lab.Do(b, closeFn)
	st := cmd.ProcessState
	send := st.UserTime() + st.SystemTime()
	if last == 0 {
		b.Fatalf("%s: no sample", path)
	}
	return float64(cpu1-cpu0) / float64(last), float64(send) / float64(frames), last
}

// senderEnv makes the test binary a frame sender (BenchmarkPathCPU).
const senderEnv = "SFPS_PSAMPLE_SENDER"

// TestPsampleSender is the sender's body; it does nothing in a normal run.
func TestPsampleSender(t *testing.T) {
	arg := os.Getenv(senderEnv)
	if arg == "" {
		return
	}
	f := strings.SplitN(arg, ",", 3)
	n, _ := strconv.Atoi(f[2])
	(&pslab.Lab{NS: f[0]}).Send(t, f[1], udpFrames(n))
	fmt.Println("sent", n)
}
