package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// sink is the collector: a UDP socket in the collector namespace that
// counts datagrams, bytes and the flow samples in them (walking the
// sample headers of each sFlow v5 datagram, spec "struct sample_datagram_v5").
type sink struct {
	conn        *net.UDPConn
	datagrams   atomic.Uint64
	bytes       atomic.Uint64
	flowSamples atomic.Uint64
	malformed   atomic.Uint64
	// tid is the OS thread the reader is locked to, so that its CPU time
	// can be told apart from the agent's (threadCPU).
	tid  atomic.Int64
	done chan struct{}
}

// sinkRcvBuf is the socket receive buffer: large, so that bursts are not
// lost in the collector (losses there are still counted, see udpRcvbufErrors).
const sinkRcvBuf = 32 << 20

func startSink(ns, addr string) (*sink, error) {
	s := &sink{done: make(chan struct{})}
	err := inNetns(ns, func() error { return s.listen(addr) })
	if err != nil {
		if s.conn != nil {
			s.conn.Close()
		}
		return nil, fmt.Errorf("sink %s in %s: %w", addr, ns, err)
	}
	go s.run()
	return s, nil
}

// startSinkHere starts a sink in this thread's namespace (loopback).
func startSinkHere(addr string) (*sink, error) {
	s := &sink{done: make(chan struct{})}
	if err := s.listen(addr); err != nil {
		if s.conn != nil {
			s.conn.Close()
		}
		return nil, fmt.Errorf("sink %s: %w", addr, err)
	}
	go s.run()
	return s, nil
}

func (s *sink) listen(addr string) error {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	s.conn, err = net.ListenUDP("udp", ua)
	if err != nil {
		return err
	}
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, sinkRcvBuf)
	}); err != nil {
		return err
	}
	return serr
}

func (s *sink) run() {
	defer close(s.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.tid.Store(int64(syscall.Gettid()))
	buf := make([]byte, 65536)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		s.datagrams.Add(1)
		s.bytes.Add(uint64(n))
		f, ok := countFlowSamples(buf[:n])
		if !ok {
			s.malformed.Add(1)
		}
		s.flowSamples.Add(uint64(f))
	}
}

func (s *sink) close() {
	s.conn.Close()
	<-s.done
}

// countFlowSamples returns how many flow samples (formats 0:1 and 0:3) a
// datagram holds, and false if it is not a well-formed sFlow v5 datagram.
func countFlowSamples(b []byte) (int, bool) {
	be := binary.BigEndian
	if len(b) < 8 || be.Uint32(b) != 5 {
		return 0, false
	}
	off := 8
	switch be.Uint32(b[4:]) { // agent address type
	case 1:
		off += 4
	case 2:
		off += 16
	default:
		return 0, false
	}
	off += 12 // sub_agent_id, sequence_number, uptime
	if len(b) < off+4 {
		return 0, false
	}
	n := int(be.Uint32(b[off:]))
	off += 4
	flows := 0
	for i := 0; i < n; i++ {
		if len(b) < off+8 {
			return flows, false
		}
		format, length := be.Uint32(b[off:]), int(be.Uint32(b[off+4:]))
		if format == 1 || format == 3 {
			flows++
		}
		off += 8 + length
	}
	return flows, off == len(b)
}

// udpRcvbufErrors reads Udp RcvbufErrors (datagrams dropped because a
// socket's receive buffer was full) of namespace ns.
func udpRcvbufErrors(ns string) (uint64, error) {
	var v uint64
	err := inNetns(ns, func() error {
		// thread-self: /proc/self/net would show the netns of the
		// thread group leader, not of this thread.
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var head []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "Udp: ") {
				continue
			}
			f := strings.Fields(line)
			if head == nil {
				head = f
				continue
			}
			for i, h := range head {
				if h == "RcvbufErrors" && i < len(f) {
					v, err = strconv.ParseUint(f[i], 10, 64)
					return err
				}
			}
		}
		return errors.New("no Udp RcvbufErrors in /proc/net/snmp")
	})
	return v, err
}
