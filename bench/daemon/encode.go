package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// memoryDataplane stands in for the kernel in the encode benchmark: ports
// need no attachment and pools are a fixed value (no syscall either way,
// like the daemon's mmap-ed counters).
type memoryDataplane struct{}

func (memoryDataplane) SetPort(uint32, agent.PortSampling) error { return nil }
func (memoryDataplane) RemovePort(uint32) error                  { return nil }
func (memoryDataplane) PortPool(uint32) (uint64, uint64)         { return 1 << 20, 0 }

// memoryReader hands the worker batches of one prepared sample, as fast as
// it asks, so the worker's own cost (sub-sampling, encoding, sending) is
// all that is measured.
type memoryReader struct {
	ps    agent.PacketSample
	batch int
}

func (r *memoryReader) ReadSamples(_ time.Time, fn func(*agent.PacketSample)) (int, error) {
	for i := 0; i < r.batch; i++ {
		fn(&r.ps)
	}
	return r.batch, nil
}

// runEncode measures the workers alone: samples from memory, datagrams to a
// counting sink on loopback, for each maximum datagram size.
func runEncode(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("encode", flag.ContinueOnError)
	seconds := fs.Duration("duration", 5*time.Second, "length of each round")
	rounds := fs.Int("rounds", 3, "rounds per datagram size")
	sizes := fs.String("max-datagram", "1400,9000", "comma-separated receiver max_datagram_size values")
	header := fs.Int("header", 128, "sampled header bytes")
	send := fs.String("send", "gso", "datagram sends: "+sendModes)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setSendMode(&agent.Options{}, *send); err != nil {
		return err
	}
	fmt.Printf("# encode: 1 worker fed from memory (batches of 64), header %d B, send=%s, sink on 127.0.0.1 (own thread, CPU not counted), load %s, %d CPUs\n",
		*header, *send, loadAvg(), numCPU())
	fmt.Printf("%-8s %-5s %10s %9s %8s %7s %7s %8s %8s\n", "maxdgram", "round", "flows/s", "dgram/s", "smp/dgr", "senderr", "sink%", "agent%", "us/smp")
	for _, sz := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(sz))
		if err != nil {
			return fmt.Errorf("bad -max-datagram %q", sz)
		}
		var us []float64
		for r := 1; r <= *rounds; r++ {
			u, err := encodeRound(ctx, size, *header, *send, *seconds, r)
			if err != nil {
				return err
			}
			us = append(us, u)
		}
		fmt.Printf("# MEDIAN max_datagram %d: %.3f us per flow sample\n", size, median(us))
	}
	return nil
}

func encodeRound(ctx context.Context, size, header int, send string, d time.Duration, round int) (float64, error) {
	s, err := startSinkHere("127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer s.close()
	frame := netlab.UDPFrame(netlab.HostMAC(1), netlab.HostMAC(2), netip.AddrPortFrom(netlab.HostAddr(1), 40000),
		netip.AddrPortFrom(netlab.HostAddr(2), 7000), make([]byte, 300))
	rd := &memoryReader{ps: agent.PacketSample{IfIndex: 3, FrameLen: uint32(len(frame)), Header: frame[:header]}, batch: 64}
	opts := agent.Options{Workers: 1, Source: memoryDataplane{}}
	if err := setSendMode(&opts, send); err != nil {
		return 0, err
	}
	ag := agent.New(opts)
	cfg := agent.Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []agent.ReceiverConfig{{Index: 1, Address: s.conn.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort(), MaxDatagramSize: size}},
		Samplers:     []agent.SamplerConfig{{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: header}},
	}
	if err := ag.Apply(cfg); err != nil {
		return 0, err
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { ag.Run(actx, []agent.SampleReader{rd}); close(done) }()
	defer func() { stop(); <-done }()
	if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
		return 0, err
	}
	p0, err := procCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	s0, err := threadCPU(s.tid.Load())
	if err != nil {
		return 0, err
	}
	st := ag.Stats(0)
	f0, g0, e0 := st.FlowSamples.Load(), st.Datagrams.Load(), st.SendErrors.Load()
	t0 := time.Now()
	if err := sleepCtx(ctx, d); err != nil {
		return 0, err
	}
	p1, err := procCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	s1, err := threadCPU(s.tid.Load())
	if err != nil {
		return 0, err
	}
	f1, g1, e1 := st.FlowSamples.Load(), st.Datagrams.Load(), st.SendErrors.Load()
	sec := time.Since(t0).Seconds()
	agentCPU := (p1 - p0 - (s1 - s0)).Seconds()
	flows := float64(f1 - f0)
	us := agentCPU / flows * 1e6
	perDgram := 0.0
	if g1 > g0 {
		perDgram = flows / float64(g1-g0)
	}
	fmt.Printf("%-8d %-5d %10.0f %9.0f %8.1f %7d %7.1f %8.1f %8.3f\n", size, round, flows/sec, float64(g1-g0)/sec, perDgram,
		e1-e0, 100*(s1-s0).Seconds()/sec, 100*agentCPU/sec, us)
	return us, nil
}
