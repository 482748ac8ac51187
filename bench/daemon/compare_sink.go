package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// poolSink is the collector of the technique comparison: it counts the
// flow samples of one data source (ifindex) and keeps the sample_pool of
// the latest one, walking each datagram's sample headers without decoding
// records (cheap enough not to compete with what is measured).
type poolSink struct {
	conn     *net.UDPConn
	ifindex  atomic.Uint32
	flows    atomic.Uint64
	mu       sync.Mutex
	lastPool uint32
	havePool bool
	done     chan struct{}
}

func startPoolSink(ns, addr string) (*poolSink, error) {
	s := &poolSink{done: make(chan struct{})}
	err := inNetns(ns, func() error {
		a, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		if s.conn, err = net.ListenUDP("udp", a); err != nil {
			return err
		}
		return s.conn.SetReadBuffer(sinkRcvBuf)
	})
	if err != nil {
		if s.conn != nil {
			s.conn.Close()
		}
		return nil, fmt.Errorf("pool sink %s in %s: %w", addr, ns, err)
	}
	go s.run()
	return s, nil
}

func (s *poolSink) run() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.datagram(buf[:n])
	}
}

// datagram walks one sFlow v5 datagram (spec "struct sample_datagram_v5");
// for flow samples (0:1 compact, 0:3 expanded) of the watched ifindex it
// counts the sample and records its sample_pool.
func (s *poolSink) datagram(b []byte) {
	be := binary.BigEndian
	if len(b) < 8 || be.Uint32(b) != 5 {
		return
	}
	off := 8
	switch be.Uint32(b[4:]) {
	case 1:
		off += 4
	case 2:
		off += 16
	default:
		return
	}
	off += 12
	if len(b) < off+4 {
		return
	}
	n := int(be.Uint32(b[off:]))
	off += 4
	want := s.ifindex.Load()
	for i := 0; i < n && len(b) >= off+8; i++ {
		format, length := be.Uint32(b[off:]), int(be.Uint32(b[off+4:]))
		body := b[off+8:]
		if len(body) > length {
			body = body[:length]
		}
		var src, pool uint32
		ok := false
		switch {
		case format == 1 && len(body) >= 16: // seq, source_id, rate, pool
			src, pool, ok = be.Uint32(body[4:])&0xffffff, be.Uint32(body[12:]), true
		case format == 3 && len(body) >= 20: // seq, type, index, rate, pool
			src, pool, ok = be.Uint32(body[8:]), be.Uint32(body[16:]), true
		}
		if ok && src == want {
			s.flows.Add(1)
			s.mu.Lock()
			s.lastPool, s.havePool = pool, true
			s.mu.Unlock()
		}
		off += 8 + length
	}
}

// pool returns the latest sample_pool seen (false: none yet).
func (s *poolSink) pool() (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastPool, s.havePool
}

// reset forgets the latest pool (before a new technique's trial).
func (s *poolSink) reset() {
	s.mu.Lock()
	s.havePool = false
	s.mu.Unlock()
}

func (s *poolSink) close() {
	s.conn.Close()
	<-s.done
}
