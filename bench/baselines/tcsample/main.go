// Command tcsample is a benchmark baseline: the host agent's eBPF sampling
// technique (see tcsample.c) with a user-space reader that turns each
// event into an sFlow flow sample (bench/baselines/internal/emit). It runs
// until SIGINT/SIGTERM, then prints its counters as one line of JSON.
//
//	tcsample -dev p1 -rate 100 -collector 198.19.255.2:6343 [-header 128]
//	tcsample -load-only
//
// Run it as root inside the port's network namespace.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/sflowswitchd/sflowswitchd/bench/baselines/internal/emit"
)

// Offsets in struct event (packed, little-endian).
const (
	evPktLen = 24
	evHdr    = 29
	evSize   = evHdr + 256
)

// Result is what tcsample prints when it stops.
type Result struct {
	Events     uint64 `json:"events"`
	Samples    uint64 `json:"samples"`
	Datagrams  uint64 `json:"datagrams"`
	SendErrors uint64 `json:"send_errors"`
	// KnownDrops is what the technique knows it lost: nothing, always.
	KnownDrops uint64 `json:"known_drops"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tcsample:", err)
		os.Exit(1)
	}
}

func run() error {
	dev := flag.String("dev", "", "port to sample")
	rate := flag.Uint("rate", 100, "sample 1 packet in N")
	collector := flag.String("collector", "", "collector host:port")
	header := flag.Int("header", 128, "header bytes per sample (<= 256)")
	maxSize := flag.Int("max-datagram", 1400, "datagram size")
	loadOnly := flag.Bool("load-only", false, "load the programs (the kernel verifier's check) and exit, attaching nothing")
	flag.Parse()
	if *loadOnly {
		var objs TcObjects
		if err := LoadTcObjects(&objs, nil); err != nil {
			return fmt.Errorf("loading: %w", err)
		}
		fmt.Println("loaded")
		return objs.Close()
	}
	if *dev == "" || *collector == "" || *rate == 0 || *header < 1 || *header > 256 {
		return errors.New("need -dev, -collector, -rate >= 1, -header 1..256")
	}
	ifc, err := net.InterfaceByName(*dev)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var objs TcObjects
	if err := LoadTcObjects(&objs, nil); err != nil {
		return fmt.Errorf("loading: %w", err)
	}
	defer objs.Close()
	if err := objs.Sampling.Put(uint32(ifc.Index), uint32(*rate)); err != nil {
		return fmt.Errorf("setting rate: %w", err)
	}
	// TCX only, as the host agent's eBPF module (bpf_program__attach_tcx):
	// on a kernel without TCX (before 6.6) neither samples.
	in, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: objs.TcIngress, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return fmt.Errorf("attaching tcx ingress: %w", err)
	}
	defer in.Close()
	eg, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: objs.TcEgress, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return fmt.Errorf("attaching tcx egress: %w", err)
	}
	defer eg.Close()

	rd, err := ringbuf.NewReader(objs.Events)
	if err != nil {
		return fmt.Errorf("ring reader: %w", err)
	}
	defer rd.Close()
	e, err := emit.New(*collector, netip.MustParseAddr("198.19.255.1"), uint32(ifc.Index), uint32(*rate), *maxSize)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); rd.Close() }()
	fmt.Println("ready") // attached: the harness may start traffic

	var res Result
	var rec ringbuf.Record
	for {
		rd.SetDeadline(time.Now().Add(time.Second))
		err := rd.ReadInto(&rec)
		now := time.Now()
		switch {
		case err == nil:
			res.Events++
			b := rec.RawSample
			if len(b) < evSize {
				continue
			}
			plen := binary.LittleEndian.Uint32(b[evPktLen:])
			n := min(int(plen), *header)
			e.Sample(plen, b[evHdr:evHdr+n], 0)
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrClosed) || ctx.Err() != nil:
			cerr := e.Close()
			res.Samples, res.Datagrams, res.SendErrors = e.Samples, e.Datagrams, e.SendErrors
			if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
				return errors.Join(err, cerr)
			}
			return cerr
		default:
			return fmt.Errorf("reading ring: %w", err)
		}
		e.FlushIfDue(now)
	}
}
