package psample

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// PortCounts are a port's packet counters: the kernel's 64-bit link
// statistics (struct rtnl_link_stats64 rx_packets and tx_packets), what
// ip -s link shows.
type PortCounts struct {
	RxPackets, TxPackets uint64
}

// StatsReader reads ports' 64-bit packet counters with RTM_GETSTATS
// (IFLA_STATS_LINK_64 only: a small reply), one request per port, no
// allocation. Not safe for concurrent use: one per reader.
type StatsReader struct {
	fd  int
	seq uint32
	req [nlmsgHdrLen + 12]byte
	buf []byte
}

// RTM_GETSTATS's header (struct if_stats_msg) and the link-64 filter bit.
const (
	ifStatsMsgLen    = 12
	iflaStatsLink64  = 1
	statsFilterLink6 = 1 << (iflaStatsLink64 - 1)
)

// NewStatsReader opens a route socket in the calling thread's network
// namespace.
func NewStatsReader() (*StatsReader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("psample: route socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("psample: route socket: %w", err)
	}
	r := &StatsReader{fd: fd, buf: make([]byte, 4096)}
	binary.NativeEndian.PutUint32(r.req[0:], uint32(len(r.req)))
	binary.NativeEndian.PutUint16(r.req[4:], unix.RTM_GETSTATS)
	binary.NativeEndian.PutUint16(r.req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(r.req[nlmsgHdrLen+8:], statsFilterLink6)
	return r, nil
}

// ErrNoPort is returned for a port that does not exist (any more).
var ErrNoPort = errors.New("no such port")

// Read returns port ifindex's counters.
func (r *StatsReader) Read(ifindex uint32) (PortCounts, error) {
	r.seq++
	binary.NativeEndian.PutUint32(r.req[8:], r.seq)
	binary.NativeEndian.PutUint32(r.req[nlmsgHdrLen+4:], ifindex)
	if _, err := unix.Write(r.fd, r.req[:]); err != nil {
		return PortCounts{}, fmt.Errorf("psample: RTM_GETSTATS: %w", err)
	}
	for {
		n, err := unix.Read(r.fd, r.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return PortCounts{}, fmt.Errorf("psample: RTM_GETSTATS reply: %w", err)
		}
		c, done, err := r.parse(r.buf[:n])
		if done || err != nil {
			return c, err
		}
	}
}

// parse reads a reply to request r.seq; done when it was found.
func (r *StatsReader) parse(b []byte) (PortCounts, bool, error) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		seq := binary.NativeEndian.Uint32(b[8:])
		if l < nlmsgHdrLen || l > len(b) {
			return PortCounts{}, true, errShort
		}
		m := b[nlmsgHdrLen:l]
		b = b[min((l+3)&^3, len(b)):]
		if seq != r.seq {
			continue // a late reply to an earlier request
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(m) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m)); e != 0 {
					if unix.Errno(-e) == unix.ENODEV {
						return PortCounts{}, true, ErrNoPort
					}
					return PortCounts{}, true, fmt.Errorf("psample: RTM_GETSTATS: %w", unix.Errno(-e))
				}
			}
			return PortCounts{}, true, errShort
		case unix.RTM_NEWSTATS:
			if len(m) < ifStatsMsgLen {
				return PortCounts{}, true, errShort
			}
			a := m[ifStatsMsgLen:]
			for len(a) >= nlaHdrLen {
				al := int(binary.NativeEndian.Uint16(a[0:]))
				if al < nlaHdrLen || al > len(a) {
					break
				}
				if binary.NativeEndian.Uint16(a[2:])&0x3fff == iflaStatsLink64 && al >= nlaHdrLen+16 {
					v := a[nlaHdrLen:]
					return PortCounts{RxPackets: binary.NativeEndian.Uint64(v[0:]), TxPackets: binary.NativeEndian.Uint64(v[8:])}, true, nil
				}
				a = a[min((al+3)&^3, len(a)):]
			}
			return PortCounts{}, true, fmt.Errorf("psample: RTM_GETSTATS: no IFLA_STATS_LINK_64")
		}
	}
	return PortCounts{}, false, nil
}

// Close closes the socket.
func (r *StatsReader) Close() error { return unix.Close(r.fd) }
