// Command pcapsample is a benchmark baseline: the sampling technique of
// libpcap-based agents (the host agent hsflowd's pcap module, mod_pcap.c,
// read for this purpose; no code taken). A packet socket on the port with
// a classic BPF filter that accepts a packet when the kernel's random
// number modulo N hits (SKF_AD_RANDOM, what mod_pcap installs with
// SO_ATTACH_FILTER), read through a memory-mapped TPACKET_V2 receive ring
// (libpcap's ring in immediate mode; 2 MiB, libpcap's default buffer), a
// batch of up to 10000 packets per wake-up (HSP_READPACKET_BATCH_PCAP).
// Each packet becomes an sFlow flow sample (bench/baselines/internal/emit)
// with sample_pool estimated as samples x N. The kernel's ring drops
// (PACKET_STATISTICS tp_drops, read once a second like pcap_stats) are the
// losses the technique knows of; they go into the samples' drops field.
//
//	pcapsample -dev p1 -rate 100 -collector 198.19.255.2:6343 [-header 128]
//
// Run it as root inside the port's network namespace. It stops on
// SIGINT/SIGTERM and prints its counters as one line of JSON.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bench/baselines/internal/emit"
)

// Ring geometry: 2 MiB of 256-byte frames in 4 KiB blocks.
const (
	frameSize = 256
	blockSize = 4096
	ringBytes = 2 << 20
	batch     = 10000
)

// Result is what pcapsample prints when it stops.
type Result struct {
	Samples    uint64 `json:"samples"`
	Datagrams  uint64 `json:"datagrams"`
	SendErrors uint64 `json:"send_errors"`
	// KnownDrops is the kernel's count of accepted packets the ring had
	// no room for (tp_drops): losses the technique knows of.
	KnownDrops uint64 `json:"known_drops"`
}

// randomFilter is the classic BPF program: accept (snaplen bytes) when
// random % rate == 0, else drop. mod_pcap compares with 1 (same odds for
// N >= 2); 0 also works at N = 1.
func randomFilter(rate uint32, snaplen uint32) ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtRand},
		bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: rate},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 1},
		bpf.RetConstant{Val: snaplen},
		bpf.RetConstant{Val: 0},
	})
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pcapsample:", err)
		os.Exit(1)
	}
}

func run() error {
	dev := flag.String("dev", "", "port to sample")
	rate := flag.Uint("rate", 100, "sample 1 packet in N")
	collector := flag.String("collector", "", "collector host:port")
	header := flag.Int("header", 128, "header bytes per sample (<= 200)")
	maxSize := flag.Int("max-datagram", 1400, "datagram size")
	flag.Parse()
	if *dev == "" || *collector == "" || *rate == 0 || *header < 1 || *header > 200 {
		return errors.New("need -dev, -collector, -rate >= 1, -header 1..200")
	}
	ifc, err := net.InterfaceByName(*dev)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	r, err := openRing(ifc.Index, uint32(*rate), uint32(*header))
	if err != nil {
		return err
	}
	defer r.close()
	e, err := emit.New(*collector, netip.MustParseAddr("198.19.255.1"), uint32(ifc.Index), uint32(*rate), *maxSize)
	if err != nil {
		return err
	}
	var res Result
	fmt.Println("ready") // attached: the harness may start traffic
	lastStats := time.Now()
	for ctx.Err() == nil {
		n, err := r.dispatch(batch, func(frameLen uint32, hdr []byte) {
			e.Sample(frameLen, hdr, uint32(res.KnownDrops))
		})
		if err != nil {
			return err
		}
		now := time.Now()
		if now.Sub(lastStats) >= time.Second {
			d, err := r.drops()
			if err != nil {
				return err
			}
			res.KnownDrops += d
			lastStats = now
		}
		e.FlushIfDue(now)
		if n == 0 {
			if err := r.wait(time.Second); err != nil {
				return err
			}
		}
	}
	d, err := r.drops()
	if err != nil {
		return err
	}
	res.KnownDrops += d
	cerr := e.Close()
	res.Samples, res.Datagrams, res.SendErrors = e.Samples, e.Datagrams, e.SendErrors
	return errors.Join(json.NewEncoder(os.Stdout).Encode(res), cerr)
}

// ring is a packet socket with a TPACKET_V2 receive ring.
type ring struct {
	fd     int
	mem    []byte
	frames int
	next   int
}

func openRing(ifindex int, rate, snaplen uint32) (*ring, error) {
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	r := &ring{fd: fd}
	fail := func(what string, err error) (*ring, error) {
		return nil, errors.Join(fmt.Errorf("%s: %w", what, err), r.close())
	}
	prog, err := randomFilter(rate, snaplen)
	if err != nil {
		return fail("assembling filter", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fail("SO_ATTACH_FILTER", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fail("PACKET_VERSION", err)
	}
	req := unix.TpacketReq{Block_size: blockSize, Block_nr: ringBytes / blockSize, Frame_size: frameSize, Frame_nr: ringBytes / frameSize}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fail("PACKET_RX_RING", err)
	}
	if r.mem, err = unix.Mmap(fd, 0, ringBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap ring", err)
	}
	r.frames = ringBytes / frameSize
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	// Statistics count from here (reading them resets them).
	if _, err := r.drops(); err != nil {
		return fail("statistics", err)
	}
	return r, nil
}

// dispatch hands up to max packets waiting in the ring to fn (the header
// slice is valid during the call) and returns them to the kernel.
func (r *ring) dispatch(max int, fn func(frameLen uint32, hdr []byte)) (int, error) {
	n := 0
	for n < max {
		f := r.mem[r.next*frameSize : (r.next+1)*frameSize]
		h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&f[0]))
		status := (*uint32)(unsafe.Pointer(&h.Status))
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER == 0 {
			break
		}
		off, caplen := int(h.Mac), int(h.Snaplen)
		if off+caplen <= frameSize {
			fn(h.Len, f[off:off+caplen])
		}
		atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
		r.next = (r.next + 1) % r.frames
		n++
	}
	return n, nil
}

// wait blocks until the ring has a packet or timeout passes.
func (r *ring) wait(timeout time.Duration) error {
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	_, err := unix.Poll(fds, int(timeout.Milliseconds()))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll: %w", err)
	}
	return nil
}

// drops returns the packets dropped since the last call.
func (r *ring) drops() (uint64, error) {
	st, err := unix.GetsockoptTpacketStats(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, fmt.Errorf("PACKET_STATISTICS: %w", err)
	}
	return uint64(st.Drops), nil
}

func (r *ring) close() error {
	var errs []error
	if r.mem != nil {
		errs = append(errs, unix.Munmap(r.mem))
		r.mem = nil
	}
	errs = append(errs, unix.Close(r.fd))
	return errors.Join(errs...)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
