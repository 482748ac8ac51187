package psample

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
)

// BenchmarkActSampleFraction measures act_sample's sampled fraction
// (go test -run x -bench ActSampleFraction -benchtime 1x ./dataplane/psample/,
// in a VM with the module): per rate N (10, 64, 1000), 100 000 frames
// sent into a veth port whose ingress has a matchall + sample rule, read
// from the PSAMPLE socket. The samples are compared with three counts of
// the frames: those sent, the port's rx_packets, and the packets the sample
// action itself saw (its tc statistics): a bias shows as samples×N away
// from the frames by more than the binomial spread, and the three counts
// show whether frames were counted that never met the rule. Reported per
// rate: samples×N/frames for each count (frac_sent, frac_rx, frac_act) and
// the deviation from the action's count in standard deviations (z_act).
//
// SFPS_BIAS_RATES (e.g. "1000") and SFPS_BIAS_FRAMES (e.g. 1000000) change
// the rates and the frames per rate: at 1 in 1000 a bias of a few percent
// needs about 10^6 frames to show.
func BenchmarkActSampleFraction(b *testing.B) {
	needActSample(b)
	rates := []uint32{10, 64, 1000}
	if v := os.Getenv("SFPS_BIAS_RATES"); v != "" {
		rates = rates[:0]
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.ParseUint(f, 10, 32)
			if err != nil || r == 0 {
				b.Fatalf("SFPS_BIAS_RATES: %q", v)
			}
			rates = append(rates, uint32(r))
		}
	}
	n := 100000
	if v := os.Getenv("SFPS_BIAS_FRAMES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("SFPS_BIAS_FRAMES: %q", v)
		}
	}
	for _, rate := range rates {
		b.Run(fmt.Sprintf("1in%d", rate), func(b *testing.B) {
			for range b.N {
				actSampleFraction(b, rate, n)
			}
		})
	}
}

func actSampleFraction(b *testing.B, rate uint32, n int) {
	const chunk = 500
	lab := pslab.New(b)
	i0, _ := lab.Veth(b, "sfps0", "sfps1")
	var o *Owner
	var c *Conn
	lab.Do(b, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i0, Rate: rate, Group: 21, TruncSize: 64}); err != nil {
			return err
		}
		c, err = Open(ConnConfig{})
		return err
	})
	defer func() {
		lab.Do(b, func() error { return errors.Join(o.Remove(i0, false), o.Close()) })
		c.Close()
	}()
	var st *StatsReader
	lab.Do(b, func() (err error) { st, err = NewStatsReader(); return err })
	defer st.Close()
	var before, after PortCounts
	lab.Do(b, func() (err error) { before, err = st.Read(uint32(i0)); return err })
	actBefore := actionPackets(b, lab)
	var got uint64
	var seqs Seq
	seqs.StartAt(0) // a group of its own, made by the rule: numbered from 0
	count := func(s *Sample) {
		if s.Group == 21 {
			got++
			seqs.Observe(s.Seq)
		}
	}
	fs := frames(chunk)
	for sent := 0; sent < n; sent += chunk {
		// Paced: a burst larger than the backlog (netdev_max_backlog)
		// would lose frames before TC ingress.
		lab.Send(b, "sfps1", fs)
		_, _ = c.Read(time.Now().Add(time.Millisecond), count)
	}
	for {
		_, err := c.Read(time.Now().Add(300*time.Millisecond), count)
		if err != nil {
			break
		}
	}
	lab.Do(b, func() (err error) { after, err = st.Read(uint32(i0)); return err })
	act := actionPackets(b, lab) - actBefore
	rx := after.RxPackets - before.RxPackets
	lost := seqs.Settle() // samples the socket did not deliver still count
	sampled := float64(got + seqs.Lost)
	frac := func(frames uint64) float64 { return sampled * float64(rate) / float64(frames) }
	p := 1 / float64(rate)
	sd := math.Sqrt(float64(act) * p * (1 - p))
	z := (sampled - float64(act)*p) / sd
	b.Logf("1 in %d: sent %d, rx %d, action saw %d; samples %d + lost %d (settled %d); samples×N/frames: sent %.4f rx %.4f action %.4f; z (action) %+.2f",
		rate, n, rx, act, got, seqs.Lost, lost, frac(uint64(n)), frac(rx), frac(act), z)
	b.ReportMetric(frac(uint64(n)), "frac_sent")
	b.ReportMetric(frac(rx), "frac_rx")
	b.ReportMetric(frac(act), "frac_act")
	b.ReportMetric(z, "z_act")
}

// actionPackets is the packet count of the sample action on sfps0's
// ingress (tc -s -j filter show): every packet the action ran on.
func actionPackets(b *testing.B, lab *pslab.Lab) uint64 {
	b.Helper()
	out := lab.MustCmd(b, "tc", "-s", "-j", "filter", "show", "dev", "sfps0", "ingress")
	var fs []struct {
		Options struct {
			Actions []struct {
				Kind  string `json:"kind"`
				Stats struct {
					Packets uint64 `json:"packets"`
				} `json:"stats"`
			} `json:"actions"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		b.Fatalf("tc -s -j filter show: %v\n%s", err, out)
	}
	var n uint64
	for _, f := range fs {
		for _, a := range f.Options.Actions {
			if a.Kind == "sample" {
				n += a.Stats.Packets
			}
		}
	}
	return n
}
