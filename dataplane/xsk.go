package dataplane

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"
)

// Monitor ports' AF_XDP sockets in the sampler's XSKMAP: the sockets
// themselves are package reader's (reader.Monitor); the keys are the
// loader's, one per RX queue of a port's counter slot (xskBase).

// openMonitor opens the AF_XDP sockets of a port attached in ModeMonitor
// (reader.OpenMonitor): one per RX queue, bound in the Dataplane's
// network namespace, each put in the XSKMAP. Receive hands out the first
// headerBytes bytes of each frame (1..MaxHeaderBytes). A port with more
// RX queues than Config.MaxQueues is refused.
func (d *Dataplane) openMonitor(ifindex int, headerBytes int, opts afxdp.Options) (*reader.Monitor, error) {
	if headerBytes < 1 || headerBytes > MaxHeaderBytes {
		return nil, fmt.Errorf("dataplane: monitor ifindex %d: header bytes %d not in 1..%d", ifindex, headerBytes, MaxHeaderBytes)
	}
	d.mu.Lock()
	p, ok := d.ports[ifindex]
	closed := d.closed
	d.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("dataplane: monitor ifindex %d: %w", ifindex, os.ErrClosed)
	case !ok:
		return nil, fmt.Errorf("dataplane: monitor ifindex %d: %w", ifindex, ErrNotAttached)
	case p.cfg.Mode != ModeMonitor:
		return nil, fmt.Errorf("dataplane: monitor ifindex %d: port is in %s mode", ifindex, p.cfg.Mode)
	}
	m, err := reader.OpenMonitor(&XSKMap{d: d, p: p, ifindex: ifindex}, ifindex, headerBytes, opts)
	if err != nil {
		return nil, err
	}
	d.log.Info("monitor sockets open", "ifindex", ifindex, "queues", m.Queues())
	return m, nil
}

// XSKMap is the sampler's XSKMAP as one attached port's AF_XDP sockets
// go in and out of it (reader.XSKMap): its keys belong to the port's
// attachment as it was when the XSKMap was made.
type XSKMap struct {
	d       *Dataplane
	p       *port // the attachment the keys belong to (identity, not value)
	ifindex int
}

// XSKMap is the XSKMAP of the attached port ifindex, to put the AF_XDP
// sockets of its RX queues in (a monitor port's: openMonitor does it).
func (d *Dataplane) XSKMap(ifindex int) (*XSKMap, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[ifindex]
	if !ok {
		return nil, fmt.Errorf("dataplane: xsk key of ifindex %d: %w", ifindex, ErrNotAttached)
	}
	return &XSKMap{d: d, p: p, ifindex: ifindex}, nil
}

// MaxQueues is Config.MaxQueues: how many RX queues of a port have a key.
func (x *XSKMap) MaxQueues() int { return x.d.cfg.MaxQueues }

// Key returns the XSKMAP key of RX queue queue of the port: the key to
// pass to Set for the AF_XDP socket bound to that queue.
func (x *XSKMap) Key(queue int) (uint32, error) {
	d := x.d
	if queue < 0 || queue >= d.cfg.MaxQueues {
		return 0, fmt.Errorf("dataplane: queue %d not in 0..%d", queue, d.cfg.MaxQueues-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ports[x.ifindex] != x.p {
		return 0, fmt.Errorf("dataplane: xsk key of ifindex %d: %w", x.ifindex, ErrNotAttached)
	}
	return d.xskBase(x.p.slot) + uint32(queue), nil
}

// Set puts an AF_XDP socket FD into the XSKMAP at queueKey (see Key); a
// negative fd removes the entry.
func (x *XSKMap) Set(queueKey uint32, fd int) error {
	if fd < 0 {
		if err := x.delete(queueKey); err != nil {
			return fmt.Errorf("dataplane: %w", err)
		}
		return nil
	}
	if err := x.d.objs.Xsks.Put(queueKey, uint32(fd)); err != nil {
		return fmt.Errorf("dataplane: setting xsk %d: %w", queueKey, err)
	}
	return nil
}

// Unset removes the entries at keys, unless the port was detached (or
// detached and attached again) since the XSKMap was made, or the
// Dataplane closed: its keys may belong to another attachment by then,
// and the kernel removes a socket from every XSKMAP when it is closed
// anyway.
func (x *XSKMap) Unset(keys []uint32) error {
	d := x.d
	d.mu.Lock() // keeps the attachment (and its keys) ours while deleting
	defer d.mu.Unlock()
	if d.closed || d.ports[x.ifindex] != x.p {
		return nil
	}
	var errs []error
	for _, key := range keys {
		if err := x.delete(key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Do runs fn in the Dataplane's network namespace.
func (x *XSKMap) Do(fn func() error) error { return x.d.inNetns(fn) }

// delete removes the XSKMAP entry at queueKey; an absent entry is no
// error.
func (x *XSKMap) delete(queueKey uint32) error {
	if err := x.d.objs.Xsks.Delete(queueKey); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("removing xsk %d: %w", queueKey, err)
	}
	return nil
}
