// Package top is `sflowswitchd top`: a collector-side live view of the sFlow
// datagrams received on a UDP address (agents and sub-agents, samples per
// data source, top flows from the sampled headers, interface and host
// counters). It is the receiving end of the wire codec in package sflow,
// used by operators and by `make lab` to check a stream by eye.
package top

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

const usage = `usage: sflowswitchd top [-listen ADDR] [-interval D] [-duration D] [-once] [-count N] [-flows N] [-sort frames|bytes]

A collector-side live view of the sFlow datagrams received on the UDP
address -listen: agents and sub-agents (datagrams, lost datagrams from
sequence number gaps), flow samples per data source (sampling rate,
sample_pool, drops, estimated frames = samples x sampling rate), the top
flows parsed from the sampled packet headers, the latest interface
counters per port and the host counters, and dropped-packet notifications
(discarded_packet samples) by reason and by port.

Every -interval the screen is redrawn: cleared with ANSI escapes when stdout
is a terminal, otherwise appended as a new frame after a separator line (for
logs and CI). Malformed datagrams are counted and shown, never fatal.

It stops at -duration, after -count datagrams, on SIGINT or SIGTERM, and
prints a final summary. With -once only the final summary is printed, and
without -duration or -count it stops after one -interval.

Exit status: 0; 1 on an I/O error; 2 on a usage error.

flags:
`

// maxFlows bounds the flow table so that a collector fed with many
// distinct flows (a scan, random addresses) keeps a fixed memory footprint;
// samples of flows beyond it are counted in the "other flows" line.
const maxFlows = 100000

// options are the settings of `sflowswitchd top`.
type options struct {
	interval time.Duration
	duration time.Duration // 0: until a signal
	once     bool
	count    int  // stop after this many datagrams; 0: no limit
	flows    int  // rows in the top flows table
	byBytes  bool // rank flows by estimated bytes instead of frames
	terminal bool
}

// Run implements `sflowswitchd top`.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":6343", "UDP `address` to receive sFlow datagrams on")
	var o options
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "redraw the screen every `D`")
	fs.DurationVar(&o.duration, "duration", 0, "stop after `D` (0: until SIGINT/SIGTERM)")
	fs.BoolVar(&o.once, "once", false, "print only the final summary")
	fs.IntVar(&o.count, "count", 0, "stop after `N` datagrams (0: no limit)")
	fs.IntVar(&o.flows, "flows", 10, "show the top `N` flows")
	sortBy := fs.String("sort", "frames", "rank flows by estimated `frames` or bytes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "top: unexpected argument %q\n", fs.Arg(0))
		return 2
	case o.interval <= 0:
		fmt.Fprintf(stderr, "top: -interval %v must be positive\n", o.interval)
		return 2
	case o.duration < 0:
		fmt.Fprintf(stderr, "top: -duration %v is negative\n", o.duration)
		return 2
	case o.count < 0:
		fmt.Fprintf(stderr, "top: -count %d is negative\n", o.count)
		return 2
	case *sortBy != "frames" && *sortBy != "bytes":
		fmt.Fprintf(stderr, "top: -sort %q: want frames or bytes\n", *sortBy)
		return 2
	case o.flows < 1:
		fmt.Fprintf(stderr, "top: -flows %d must be at least 1\n", o.flows)
		return 2
	}
	o.byBytes = *sortBy == "bytes"
	o.terminal = isTerminal(stdout)
	conn, err := net.ListenPacket("udp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "top: listen: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, conn, o, stdout); err != nil {
		fmt.Fprintf(stderr, "top: %v\n", err)
		return 1
	}
	return 0
}

// isTerminal reports whether w is a terminal (then the screen is cleared
// between frames).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// serve receives datagrams on conn until ctx is done, the duration
// passed or the count was reached, drawing frames to out, then closes conn
// and writes the final summary.
func serve(ctx context.Context, conn net.PacketConn, o options, out io.Writer) error {
	st := newState(conn.LocalAddr().String(), time.Now())
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	} else if o.once && o.count == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.interval)
		defer cancel()
	}
	countReached := make(chan struct{})
	readErr := make(chan error, 1)
	go func() { readErr <- receive(conn, st, o.count, countReached) }()

	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()
	var loopErr error
loop:
	for {
		select {
		case <-ticker.C:
			if !o.once {
				if err := writeFrame(out, st, o, false); err != nil {
					loopErr = err
					break loop
				}
			}
		case <-ctx.Done():
			break loop
		case <-countReached:
			break loop
		case err := <-readErr:
			readErr <- err // collected below
			break loop
		}
	}
	closeErr := conn.Close()
	err := <-readErr
	if loopErr == nil {
		loopErr = writeFrame(out, st, o, true)
	}
	switch {
	case err != nil:
		return fmt.Errorf("receive: %w", err)
	case closeErr != nil:
		return fmt.Errorf("close: %w", closeErr)
	}
	return loopErr
}

// receive reads datagrams into st until conn is closed (nil) or fails.
// It closes countReached after count datagrams when count > 0.
func receive(conn net.PacketConn, st *state, count int, countReached chan<- struct{}) error {
	buf := make([]byte, 65536)
	n := 0
	for {
		size, from, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read datagram: %w", err)
		}
		st.add(buf[:size], from, time.Now())
		n++
		if count > 0 && n == count {
			close(countReached)
		}
	}
}

// writeFrame renders one screen and writes it in a single write.
func writeFrame(out io.Writer, st *state, o options, final bool) error {
	var b strings.Builder
	now := time.Now()
	switch {
	case final:
		if o.terminal && !o.once {
			b.WriteString("\x1b[H\x1b[2J")
		}
		fmt.Fprintf(&b, "===== sflowswitchd top: final summary at %s =====\n", now.Format("15:04:05"))
	case o.terminal:
		b.WriteString("\x1b[H\x1b[2J")
	default:
		fmt.Fprintf(&b, "===== sflowswitchd top: frame at %s =====\n", now.Format("15:04:05"))
	}
	st.render(&b, now, o.flows, o.byBytes)
	if _, err := io.WriteString(out, b.String()); err != nil {
		return fmt.Errorf("write screen: %w", err)
	}
	return nil
}

// agentKey identifies a sub-agent: sequence numbers are per sub-agent
// (spec "sample_datagram_v5": sequence_number "incremented with each
// sample datagram generated by a sub-agent within an agent").
type agentKey struct {
	addr netip.Addr
	sub  uint32
}

// agentStats is what has been seen of one sub-agent.
type agentStats struct {
	from      string // UDP source of the last datagram
	datagrams uint64
	lost      uint64 // datagrams missing from sequence number gaps
	restarts  uint64 // sequence numbers that went backwards (agent restart or reordering)
	lastSeq   uint32
	uptime    uint32
}

// sourceKey identifies a data source of one agent (spec: a data source
// is reported by exactly one sub-agent, so the agent address suffices).
type sourceKey struct {
	agent netip.Addr
	src   sflow.DataSource
}

// sourceStats is what has been seen of one data source's flow samples.
type sourceStats struct {
	samples      uint64
	rate         uint32
	pool         uint32
	poolFrames   uint64 // frames counted by sample_pool since the first sample
	drops        uint32
	seqLost      uint64 // flow samples missing from sequence number gaps
	lastSeq      uint32
	estFrames    uint64 // sum of sampling_rate over the samples
	estBytes     uint64 // sum of sampling_rate x frame_length
	havePrevious bool
}

// flowKey is a flow as parsed from a sampled Ethernet header.
type flowKey struct {
	srcMAC, dstMAC [6]byte
	vlan           int // outermost 802.1Q VLAN ID, -1 when untagged
	etherType      uint16
	proto          int // IP protocol, -1 when not IP
	src, dst       netip.Addr
	sport, dport   int // TCP/UDP/SCTP ports, ICMP type/code; -1 when absent
}

// flowStats counts one flow's samples.
type flowStats struct {
	samples   uint64
	estFrames uint64
	estBytes  uint64
}

// hostStats holds the latest host counters of one data source.
type hostStats struct {
	descr   *sflow.HostDescr
	cpu     *sflow.HostCPU
	cpuUtil float64 // percent busy between the last two host_cpu records, -1 unknown
	mem     *sflow.HostMemory
	net     *sflow.HostNetIO
}

// state accumulates everything `top` shows. add runs in the receiving
// goroutine and render in the drawing one, hence the mutex; a collector
// view is not a hot path.
type state struct {
	mu sync.Mutex

	listen  string
	started time.Time

	datagrams, bytes         uint64
	malformed                uint64
	lastMalformed            string
	flowSamples, ctrSamples  uint64
	otherSamples             uint64
	unparsed                 uint64 // flow samples without a parsable Ethernet sampled_header
	lastDatagrams, lastBytes uint64 // at the previous frame, for the per-second rates
	lastFrame                time.Time

	agents     map[agentKey]*agentStats
	sources    map[sourceKey]*sourceStats
	flows      map[flowKey]*flowStats
	otherFlows flowStats // samples of flows beyond maxFlows
	ifCounters map[sourceKey]*sflow.IfCounters
	// portNames are the port_name records (0:1005) of the interfaces.
	portNames map[sourceKey]string
	hosts     map[sourceKey]*hostStats
	drops     dropView // discarded_packet samples (drops.go)
}

func newState(listen string, now time.Time) *state {
	return &state{
		listen:     listen,
		started:    now,
		lastFrame:  now,
		agents:     map[agentKey]*agentStats{},
		sources:    map[sourceKey]*sourceStats{},
		flows:      map[flowKey]*flowStats{},
		ifCounters: map[sourceKey]*sflow.IfCounters{},
		portNames:  map[sourceKey]string{},
		hosts:      map[sourceKey]*hostStats{},
	}
}

// add decodes one datagram received from `from` and accounts for it.
func (st *state) add(b []byte, from net.Addr, now time.Time) {
	d, err := sflow.Decode(b)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.datagrams++
	st.bytes += uint64(len(b))
	if err != nil {
		st.malformed++
		st.lastMalformed = fmt.Sprintf("%s from %v", err, from)
		return
	}
	ak := agentKey{d.AgentAddress, d.SubAgentID}
	a := st.agents[ak]
	if a == nil {
		a = &agentStats{}
		st.agents[ak] = a
	} else {
		// uint32 arithmetic: a wrap of the sequence number is a normal step.
		switch gap := d.SequenceNumber - a.lastSeq; {
		case gap == 0 || gap > 1<<31:
			a.restarts++
		case gap > 1:
			a.lost += uint64(gap - 1)
		}
	}
	a.datagrams++
	a.lastSeq = d.SequenceNumber
	a.uptime = d.Uptime
	a.from = from.String()
	for _, s := range d.Samples {
		switch s := s.(type) {
		case *sflow.FlowSample:
			st.flowSamples++
			st.addFlowSample(d.AgentAddress, s)
		case *sflow.CounterSample:
			st.ctrSamples++
			st.addCounterSample(d.AgentAddress, s)
		case *sflow.DiscardedPacket:
			st.drops.add(d.AgentAddress, s)
		default:
			st.otherSamples++
		}
	}
}

func (st *state) addFlowSample(agent netip.Addr, s *sflow.FlowSample) {
	k := sourceKey{agent, s.Source}
	src := st.sources[k]
	if src == nil {
		src = &sourceStats{}
		st.sources[k] = src
	}
	if src.havePrevious {
		if gap := s.SequenceNumber - src.lastSeq; gap > 1 && gap < 1<<31 {
			src.seqLost += uint64(gap - 1)
		}
		// sample_pool is a 32-bit total that wraps; the difference is
		// what the sampler saw in between.
		src.poolFrames += uint64(s.SamplePool - src.pool)
	}
	src.havePrevious = true
	src.lastSeq = s.SequenceNumber
	src.samples++
	src.rate = s.SamplingRate
	src.pool = s.SamplePool
	src.drops = s.Drops
	rate := uint64(s.SamplingRate)
	src.estFrames += rate

	var hdr *sflow.SampledHeader
	for _, r := range s.Records {
		if h, ok := r.(*sflow.SampledHeader); ok && h.Protocol == sflow.HeaderProtocolEthernet {
			hdr = h
			break
		}
	}
	if hdr == nil {
		st.unparsed++
		return
	}
	src.estBytes += rate * uint64(hdr.FrameLength)
	key, ok := parseEthernet(hdr.Header)
	if !ok {
		st.unparsed++
		return
	}
	f := st.flows[key]
	if f == nil {
		if len(st.flows) >= maxFlows {
			f = &st.otherFlows
		} else {
			f = &flowStats{}
			st.flows[key] = f
		}
	}
	f.samples++
	f.estFrames += rate
	f.estBytes += rate * uint64(hdr.FrameLength)
}

func (st *state) addCounterSample(agent netip.Addr, s *sflow.CounterSample) {
	k := sourceKey{agent, s.Source}
	for _, r := range s.Records {
		switch r := r.(type) {
		case *sflow.IfCounters:
			st.ifCounters[k] = r
		case *sflow.PortName:
			st.portNames[k] = r.PortName
		case *sflow.HostDescr:
			st.host(k).descr = r
		case *sflow.HostCPU:
			h := st.host(k)
			h.cpuUtil = cpuUtil(h.cpu, r)
			h.cpu = r
		case *sflow.HostMemory:
			st.host(k).mem = r
		case *sflow.HostNetIO:
			st.host(k).net = r
		}
	}
}

func (st *state) host(k sourceKey) *hostStats {
	h := st.hosts[k]
	if h == nil {
		h = &hostStats{cpuUtil: -1}
		st.hosts[k] = h
	}
	return h
}

// cpuUtil returns the busy percentage between two host_cpu records from
// the differences of their CPU times, or -1 without a previous record or
// without elapsed time.
func cpuUtil(prev, cur *sflow.HostCPU) float64 {
	if prev == nil {
		return -1
	}
	sum := func(c *sflow.HostCPU) uint32 {
		return c.CPUUser + c.CPUNice + c.CPUSystem + c.CPUIdle + c.CPUWio + c.CPUIntr + c.CPUSintr + c.CPUSteal
	}
	total := sum(cur) - sum(prev)
	idle := (cur.CPUIdle - prev.CPUIdle) + (cur.CPUWio - prev.CPUWio)
	if total == 0 || idle > total {
		return -1
	}
	return 100 * float64(total-idle) / float64(total)
}

// parseEthernet extracts the flow key from the leading bytes of an
// Ethernet frame: MACs, the outermost VLAN tag (802.1Q, 802.1ad and the
// pre-standard 0x9100 tags are skipped), and for IPv4 and IPv6 the
// protocol, addresses and ports. It reports false when even the Ethernet
// header is incomplete; a truncated IP header leaves the IP fields unset.
func parseEthernet(h []byte) (flowKey, bool) {
	k := flowKey{vlan: -1, proto: -1, sport: -1, dport: -1}
	if len(h) < 14 {
		return k, false
	}
	copy(k.dstMAC[:], h[0:6])
	copy(k.srcMAC[:], h[6:12])
	eh, _ := ethernet.Parse(h) // a header cut inside a tag keeps the tags before it
	if eh.Tags > 0 {
		k.vlan = int(eh.Outer.VID())
	}
	et := eh.EtherType
	k.etherType = et
	l3 := h[eh.Len:]
	switch et {
	case 0x0800:
		if len(l3) < 20 || l3[0]>>4 != 4 {
			return k, true
		}
		ihl := int(l3[0]&0x0f) * 4
		k.proto = int(l3[9])
		k.src = netip.AddrFrom4([4]byte(l3[12:16]))
		k.dst = netip.AddrFrom4([4]byte(l3[16:20]))
		// Only the first fragment carries the transport header.
		if binary.BigEndian.Uint16(l3[6:8])&0x1fff == 0 && ihl >= 20 && len(l3) >= ihl {
			parsePorts(&k, l3[ihl:])
		}
	case 0x86dd:
		if len(l3) < 40 || l3[0]>>4 != 6 {
			return k, true
		}
		k.src = netip.AddrFrom16([16]byte(l3[8:24]))
		k.dst = netip.AddrFrom16([16]byte(l3[24:40]))
		next, rest := int(l3[6]), l3[40:]
		// Skip the extension headers that can precede the transport header
		// (RFC 8200 section 4): hop-by-hop, routing, destination options,
		// and a first fragment.
		for {
			switch next {
			case 0, 43, 60:
				if len(rest) < 8 {
					k.proto = next
					return k, true
				}
				n := (int(rest[1]) + 1) * 8
				if len(rest) < n {
					k.proto = next
					return k, true
				}
				next, rest = int(rest[0]), rest[n:]
				continue
			case 44:
				if len(rest) < 8 {
					k.proto = next
					return k, true
				}
				first := binary.BigEndian.Uint16(rest[2:4])&0xfff8 == 0
				next, rest = int(rest[0]), rest[8:]
				if !first {
					k.proto = next
					return k, true
				}
				continue
			}
			break
		}
		k.proto = next
		parsePorts(&k, rest)
	}
	return k, true
}

// parsePorts sets the ports (TCP, UDP, SCTP) or the ICMP type and code
// from the transport header t, when it is long enough.
func parsePorts(k *flowKey, t []byte) {
	switch k.proto {
	case 6, 17, 132:
		if len(t) >= 4 {
			k.sport = int(binary.BigEndian.Uint16(t[0:2]))
			k.dport = int(binary.BigEndian.Uint16(t[2:4]))
		}
	case 1, 58:
		if len(t) >= 2 {
			k.sport, k.dport = int(t[0]), int(t[1])
		}
	}
}

// protoName names the IP protocols the lab and most networks carry.
func protoName(p int) string {
	switch p {
	case 1:
		return "icmp"
	case 2:
		return "igmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "icmp6"
	case 132:
		return "sctp"
	}
	return fmt.Sprintf("ip%d", p)
}

// describe returns the protocol column and the source and destination
// endpoints of a flow.
func (k flowKey) describe() (proto, src, dst string) {
	if k.proto < 0 {
		switch k.etherType {
		case 0x0806:
			proto = "arp"
		case 0x0800:
			proto = "ipv4?"
		case 0x86dd:
			proto = "ipv6?"
		default:
			proto = fmt.Sprintf("0x%04x", k.etherType)
		}
		return proto, "-", "-"
	}
	proto = protoName(k.proto)
	endpoint := func(a netip.Addr, port int) string {
		if port < 0 {
			return a.String()
		}
		return netip.AddrPortFrom(a, uint16(port)).String()
	}
	if k.proto == 1 || k.proto == 58 {
		if k.sport >= 0 {
			proto = fmt.Sprintf("%s %d/%d", proto, k.sport, k.dport)
		}
		return proto, k.src.String(), k.dst.String()
	}
	return proto, endpoint(k.src, k.sport), endpoint(k.dst, k.dport)
}

// render writes the screen's text for the state at now.
func (st *state) render(b *strings.Builder, now time.Time, nflows int, byBytes bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	secs := now.Sub(st.lastFrame).Seconds()
	dgRate, byteRate := 0.0, 0.0
	if secs > 0 {
		dgRate = float64(st.datagrams-st.lastDatagrams) / secs
		byteRate = float64(st.bytes-st.lastBytes) / secs
	}
	st.lastDatagrams, st.lastBytes, st.lastFrame = st.datagrams, st.bytes, now

	fmt.Fprintf(b, "sflowswitchd top  listening on %s  running %s\n", st.listen, now.Sub(st.started).Round(time.Second))
	fmt.Fprintf(b, "datagrams %d (%.1f/s, %s/s)  malformed %d  samples: flow %d, counters %d, drops %d, other %d\n",
		st.datagrams, dgRate, fmtBytes(uint64(byteRate)), st.malformed, st.flowSamples, st.ctrSamples, st.drops.notifications, st.otherSamples)
	if st.malformed > 0 {
		fmt.Fprintf(b, "last malformed: %s\n", st.lastMalformed)
	}
	rates := map[uint32]bool{}
	for _, s := range st.sources {
		rates[s.rate] = true
	}
	if len(rates) > 0 {
		list := make([]string, 0, len(rates))
		for _, r := range slices.Sorted(maps.Keys(rates)) {
			list = append(list, fmt.Sprintf("1-in-%d", r))
		}
		fmt.Fprintf(b, "sampling rates in use by the agents: %s\n", strings.Join(list, ", "))
	}

	b.WriteString("\nAGENTS\n")
	t := table{header: []string{"agent", "sub-agent", "from", "datagrams", "lost", "restarts", "last seq", "uptime"}}
	for _, k := range slices.SortedFunc(maps.Keys(st.agents), compareAgents) {
		a := st.agents[k]
		t.add(addrString(k.addr), fmt.Sprint(k.sub), a.from, fmt.Sprint(a.datagrams), fmt.Sprint(a.lost),
			fmt.Sprint(a.restarts), fmt.Sprint(a.lastSeq), (time.Duration(a.uptime) * time.Millisecond).Round(time.Second).String())
	}
	t.write(b, "(none yet)")

	b.WriteString("\nFLOW SAMPLES per data source (est. frames = samples x sampling rate)\n")
	t = table{header: []string{"agent", "source", "samples", "rate", "sample_pool", "pool frames", "drops", "lost samples", "est. frames", "est. bytes"}}
	for _, k := range slices.SortedFunc(maps.Keys(st.sources), compareSources) {
		s := st.sources[k]
		t.add(addrString(k.agent), sourceName(k.src), fmt.Sprint(s.samples), fmt.Sprintf("1-in-%d", s.rate), fmt.Sprint(s.pool),
			fmt.Sprint(s.poolFrames), fmt.Sprint(s.drops), fmt.Sprint(s.seqLost), fmt.Sprint(s.estFrames), fmtBytes(s.estBytes))
	}
	t.write(b, "(none yet)")

	rank := "frames"
	if byBytes {
		rank = "bytes"
	}
	fmt.Fprintf(b, "\nTOP FLOWS by estimated %s (%d flows, %d flow samples without a parsable Ethernet header)\n", rank, len(st.flows), st.unparsed)
	t = table{header: []string{"src mac", "dst mac", "vlan", "proto", "source", "destination", "samples", "est. frames", "est. bytes"}}
	keys := slices.Collect(maps.Keys(st.flows))
	slices.SortFunc(keys, func(x, y flowKey) int {
		fx, fy := st.flows[x], st.flows[y]
		first, second := cmp.Compare(fy.estFrames, fx.estFrames), cmp.Compare(fy.estBytes, fx.estBytes)
		if byBytes {
			first, second = second, first
		}
		if first != 0 {
			return first
		}
		if second != 0 {
			return second
		}
		return compareFlowKeys(x, y)
	})
	for i, k := range keys {
		if i == nflows {
			break
		}
		f := st.flows[k]
		vlan := "-"
		if k.vlan >= 0 {
			vlan = fmt.Sprint(k.vlan)
		}
		proto, src, dst := k.describe()
		t.add(net.HardwareAddr(k.srcMAC[:]).String(), net.HardwareAddr(k.dstMAC[:]).String(), vlan, proto, src, dst,
			fmt.Sprint(f.samples), fmt.Sprint(f.estFrames), fmtBytes(f.estBytes))
	}
	if st.otherFlows.samples > 0 {
		t.add("(other flows)", "", "", "", "", "", fmt.Sprint(st.otherFlows.samples), fmt.Sprint(st.otherFlows.estFrames), fmtBytes(st.otherFlows.estBytes))
	}
	t.write(b, "(none yet)")

	st.drops.render(b)

	b.WriteString("\nINTERFACE COUNTERS (latest if_counters)\n")
	t = table{header: []string{"agent", "source", "ifIndex", "speed", "admin/oper", "in octets", "in pkts", "out octets", "out pkts", "in disc/err", "out disc/err"}}
	for _, k := range slices.SortedFunc(maps.Keys(st.ifCounters), compareSources) {
		c := st.ifCounters[k]
		ifName := fmt.Sprint(c.IfIndex)
		if n, ok := st.portNames[k]; ok {
			ifName += " (" + n + ")" // the agent's port_name
		}
		t.add(addrString(k.agent), sourceName(k.src), ifName, fmtSpeed(c.IfSpeed), fmtStatus(c.IfStatus),
			fmtCounter64(c.IfInOctets), fmtPkts(c.IfInUcastPkts, c.IfInMulticastPkts, c.IfInBroadcastPkts),
			fmtCounter64(c.IfOutOctets), fmtPkts(c.IfOutUcastPkts, c.IfOutMulticastPkts, c.IfOutBroadcastPkts),
			fmtCounter32(c.IfInDiscards)+"/"+fmtCounter32(c.IfInErrors), fmtCounter32(c.IfOutDiscards)+"/"+fmtCounter32(c.IfOutErrors))
	}
	t.write(b, "(none yet)")

	b.WriteString("\nHOST COUNTERS (latest)\n")
	t = table{header: []string{"agent", "source", "hostname", "os", "cpus", "load 1/5/15", "cpu busy", "mem total", "mem free", "net in", "net out"}}
	for _, k := range slices.SortedFunc(maps.Keys(st.hosts), compareSources) {
		h := st.hosts[k]
		row := []string{addrString(k.agent), sourceName(k.src), "-", "-", "-", "-", "-", "-", "-", "-", "-"}
		if h.descr != nil {
			row[2] = h.descr.Hostname
			row[3] = strings.TrimSpace(osName(h.descr.OSName) + " " + h.descr.OSRelease)
		}
		if h.cpu != nil {
			row[4] = fmt.Sprint(h.cpu.CPUNum)
			row[5] = fmtLoad(h.cpu.LoadOne) + "/" + fmtLoad(h.cpu.LoadFive) + "/" + fmtLoad(h.cpu.LoadFifteen)
			if h.cpuUtil >= 0 {
				row[6] = fmt.Sprintf("%.1f%%", h.cpuUtil)
			}
		}
		if h.mem != nil {
			row[7], row[8] = fmtBytes(h.mem.MemTotal), fmtBytes(h.mem.MemFree)
		}
		if h.net != nil {
			row[9] = fmt.Sprintf("%s %s pkts", fmtBytes(h.net.BytesIn), fmtCounter32(h.net.PktsIn))
			row[10] = fmt.Sprintf("%s %s pkts", fmtBytes(h.net.BytesOut), fmtCounter32(h.net.PacketsOut))
		}
		t.add(row...)
	}
	t.write(b, "(none yet)")
	b.WriteString("\n")
}

func compareAgents(x, y agentKey) int {
	if c := x.addr.Compare(y.addr); c != 0 {
		return c
	}
	return cmp.Compare(x.sub, y.sub)
}

func compareSources(x, y sourceKey) int {
	if c := x.agent.Compare(y.agent); c != 0 {
		return c
	}
	if c := cmp.Compare(x.src.Type, y.src.Type); c != 0 {
		return c
	}
	return cmp.Compare(x.src.Index, y.src.Index)
}

func compareFlowKeys(x, y flowKey) int {
	for _, c := range []int{
		strings.Compare(string(x.srcMAC[:]), string(y.srcMAC[:])),
		strings.Compare(string(x.dstMAC[:]), string(y.dstMAC[:])),
		cmp.Compare(x.vlan, y.vlan),
		cmp.Compare(x.etherType, y.etherType),
		cmp.Compare(x.proto, y.proto),
		x.src.Compare(y.src),
		x.dst.Compare(y.dst),
		cmp.Compare(x.sport, y.sport),
		cmp.Compare(x.dport, y.dport),
	} {
		if c != 0 {
			return c
		}
	}
	return 0
}

// addrString prints an agent address; the zero Addr is the spec's "unknown".
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	return a.String()
}

// sourceName names a data source the way sFlow MIBs write it.
func sourceName(s sflow.DataSource) string {
	switch s.Type {
	case sflow.SourceIfIndex:
		return fmt.Sprintf("ifIndex %d", s.Index)
	case sflow.SourceSmonVlan:
		return fmt.Sprintf("vlan %d", s.Index)
	case sflow.SourceEntPhysicalEntry:
		return fmt.Sprintf("entPhysical %d", s.Index)
	case sflow.SourceEntLogicalEntry:
		return fmt.Sprintf("entLogical %d", s.Index)
	}
	return s.String()
}

// fmtBytes formats a byte count with a binary unit.
func fmtBytes(n uint64) string {
	if n == sflow.CounterUnavailable64 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n)/unit, "KMGTPE"
	i := 0
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%ciB", v, suffix[i])
}

// fmtSpeed formats ifSpeed (bits per second, 0 = unknown).
func fmtSpeed(bps uint64) string {
	switch {
	case bps == 0:
		return "unknown"
	case bps%1_000_000_000 == 0:
		return fmt.Sprintf("%dG", bps/1_000_000_000)
	case bps%1_000_000 == 0:
		return fmt.Sprintf("%dM", bps/1_000_000)
	}
	return fmt.Sprintf("%d", bps)
}

// fmtStatus formats the ifStatus bits (spec "if_counters": bit 0 admin,
// bit 1 oper).
func fmtStatus(s uint32) string {
	word := func(up bool) string {
		if up {
			return "up"
		}
		return "down"
	}
	return word(s&sflow.IfStatusAdminUp != 0) + "/" + word(s&sflow.IfStatusOperUp != 0)
}

func fmtCounter32(v uint32) string {
	if v == sflow.CounterUnavailable32 {
		return "-"
	}
	return fmt.Sprint(v)
}

func fmtCounter64(v uint64) string {
	if v == sflow.CounterUnavailable64 {
		return "-"
	}
	return fmt.Sprint(v)
}

// fmtPkts sums the unicast, multicast and broadcast packets that are
// available (a driver may not count multicast or broadcast separately);
// "-" when none is.
func fmtPkts(counts ...uint32) string {
	var sum uint64
	have := false
	for _, c := range counts {
		if c != sflow.CounterUnavailable32 {
			sum += uint64(c)
			have = true
		}
	}
	if !have {
		return "-"
	}
	return fmt.Sprint(sum)
}

func fmtLoad(l float32) string {
	if l < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", l)
}

func osName(o sflow.OSName) string {
	names := map[sflow.OSName]string{
		sflow.OSNameOther: "other", sflow.OSNameLinux: "linux", sflow.OSNameWindows: "windows",
		sflow.OSNameDarwin: "darwin", sflow.OSNameHPUX: "hp-ux", sflow.OSNameAIX: "aix",
		sflow.OSNameDragonfly: "dragonfly", sflow.OSNameFreeBSD: "freebsd", sflow.OSNameNetBSD: "netbsd",
		sflow.OSNameOpenBSD: "openbsd", sflow.OSNameOSF: "osf", sflow.OSNameSolaris: "solaris",
	}
	if n, ok := names[o]; ok {
		return n
	}
	return "unknown"
}

// table is a plain-text table with left-aligned columns.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write appends the table to b, or the header and empty when it has no
// rows.
func (t *table) write(b *strings.Builder, empty string) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		for i, c := range cells {
			if i > 0 {
				l.WriteString("  ")
			}
			fmt.Fprintf(&l, "%-*s", widths[i], c)
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteString("\n")
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	if len(t.rows) == 0 {
		b.WriteString("  " + empty + "\n")
	}
}
