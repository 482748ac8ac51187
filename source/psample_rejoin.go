package source

// Re-joining the psample family when it is made anew. Unloading and
// loading the psample module (a driver reload, a warm reboot of the switch
// software) unregisters the generic-netlink family, which drops every
// socket's membership of its "packets" group, and registers it again,
// usually under new ids: a reader left alone would read nothing, silently.
// WatchFamily follows generic netlink's own announcements (nlctrl's
// "notify" group: CTRL_CMD_NEWFAMILY, CTRL_CMD_DELFAMILY) and, in case
// one is missed, resolves the family every interval; each reader then
// opens a new socket joined to the new group, and counts as lost the
// samples the new groups numbered before it joined.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// generic netlink's controller (linux/genetlink.h).
const (
	genlCtrlNewFamily = 1 // CTRL_CMD_NEWFAMILY
	genlCtrlDelFamily = 2 // CTRL_CMD_DELFAMILY
	genlCtrlAttrName  = 2 // CTRL_ATTR_FAMILY_NAME
	genlHdrLen        = 4
)

// WatchFamily re-joins the readers whenever the psample family is made
// anew, until ctx ends: at once on generic netlink's announcement, and
// within every (the check when no announcement came). While the family is
// gone FamilyGone is set and logged once.
func (p *Psample) WatchFamily(ctx context.Context, every time.Duration) {
	cur, err := psample.GetFamily()
	if err != nil {
		p.FamilyGone.Store(true)
	}
	notify, nerr := openCtrlNotify()
	if nerr != nil {
		p.log.Warn("psample: generic netlink's announcements unavailable: the family is checked every interval", "every", every, "err", nerr)
	} else {
		defer unix.Close(notify)
	}
	buf := make([]byte, 16384)
	last := time.Now()
	for ctx.Err() == nil {
		if notify >= 0 && nerr == nil {
			if psampleAnnounced(notify, buf, min(every, 500*time.Millisecond)) {
				cur = p.checkFamily(cur)
				continue
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(every, 500*time.Millisecond)):
			}
		}
		cur = p.checkFamilyEvery(cur, every, &last)
	}
}

// checkFamilyEvery resolves the family when every passed since *last.
func (p *Psample) checkFamilyEvery(cur psample.Family, every time.Duration, last *time.Time) psample.Family {
	if time.Since(*last) < every {
		return cur
	}
	*last = time.Now()
	return p.checkFamily(cur)
}

// checkFamily resolves the family and has the readers re-join when it
// came back or changed; it returns the family now.
func (p *Psample) checkFamily(cur psample.Family) psample.Family {
	f, err := psample.GetFamily()
	if err != nil {
		if !p.FamilyGone.Swap(true) {
			p.log.Error("psample: the psample family is gone (module unloaded?): no samples until it returns", "err", err)
		}
		return cur
	}
	gone := p.FamilyGone.Swap(false)
	if !gone && f == cur && p.joined(f) {
		return cur
	}
	p.Rejoins.Add(1)
	p.log.Warn("psample: the psample family was made anew: the readers re-join it; samples numbered before count as lost",
		"family", f.ID, "packets_group", f.Packets, "was_family", cur.ID, "was_group", cur.Packets)
	p.mu.Lock()
	for _, r := range p.readers {
		if r.conn.Load() == nil {
			continue // a follower: its samples come through the first reader
		}
		r.rejoin.Store(true)
		_ = r.Wake() // a reader that cannot be woken re-joins at its next second
	}
	p.mu.Unlock()
	return f
}

// joined tells whether the readers' sockets are of family f.
func (p *Psample) joined(f psample.Family) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.readers {
		if c := r.conn.Load(); c != nil && c.Family() != f { // followers have none
			return false
		}
	}
	return true
}

// reopen replaces the reader's socket with one joined to the family as
// it is now (the reader's own goroutine).
func (r *PsampleReader) reopen() {
	var conn *psample.Conn
	err := netnsutil.Do(r.p.ns, func() (err error) {
		conn, err = r.p.open()
		return err
	})
	if err != nil {
		r.Stats.RejoinErrors.Add(1)
		r.p.log.Error("psample: re-joining the family", "worker", r.id, "err", err)
		return
	}
	conn.OnGroup = r.groupChanged
	conn.OnLost = r.tapLost
	old := r.conn.Swap(conn)
	if err := old.Close(); err != nil {
		r.p.log.Debug("psample: closing the socket of the old family", "err", err)
	}
	r.listen.Reset()
	r.listenEg.Reset()
	r.freshIn, r.freshEg = true, true
}

// numberedBefore returns, for the first sample of a group after a rejoin
// (fresh), the samples its group numbered before it: lost.
func (r *PsampleReader) numberedBefore(fresh *bool, seq uint32) uint64 {
	if !*fresh {
		return 0
	}
	*fresh = false
	r.Stats.Lost.Add(uint64(seq))
	return uint64(seq)
}

// openCtrlNotify opens a generic-netlink socket joined to nlctrl's
// "notify" group, non-blocking.
func openCtrlNotify() (int, error) {
	f, err := netlink.GenlFamilyGet("nlctrl")
	if err != nil {
		return -1, fmt.Errorf("resolving nlctrl: %w", err)
	}
	var grp uint32
	for _, g := range f.Groups {
		if g.Name == "notify" {
			grp = g.ID
		}
	}
	if grp == 0 {
		return -1, errors.New("nlctrl has no notify group")
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
	if err != nil {
		return -1, fmt.Errorf("generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(grp)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("joining nlctrl/notify: %w", err)
	}
	return fd, nil
}

// psampleAnnounced waits up to timeout for generic netlink's announcements
// and tells whether one was of the psample family coming or going (an
// overrun counts as one: what it hid may have been).
func psampleAnnounced(fd int, buf []byte, timeout time.Duration) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, int(timeout/time.Millisecond)); err != nil || n == 0 {
		return false
	}
	seen := false
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.ENOBUFS) {
			seen = true
			continue
		}
		if err != nil || n <= 0 {
			return seen
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			data := b[unix.NLMSG_HDRLEN:l]
			if len(data) >= genlHdrLen && (data[0] == genlCtrlNewFamily || data[0] == genlCtrlDelFamily) &&
				familyName(data[genlHdrLen:]) == psample.FamilyName {
				seen = true
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

// familyName reads CTRL_ATTR_FAMILY_NAME from attributes b.
func familyName(b []byte) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == genlCtrlAttrName {
			v := b[4:l]
			for i, c := range v {
				if c == 0 {
					v = v[:i]
					break
				}
			}
			return string(v)
		}
		b = b[(l+3)&^3:]
	}
	return ""
}
