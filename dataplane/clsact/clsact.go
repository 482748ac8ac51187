// Package clsact attaches the TC sampler on kernels without TCX links
// (before Linux 6.6): a cls_bpf filter in direct-action mode on the
// port's clsact qdisc, managed through netlink. Unlike a BPF link, a
// filter belongs to nobody: it outlives the process that added it. So the
// code here takes care of what the kernel does for links: it never touches
// what an operator has, it removes exactly what it added, and at start it
// removes what a killed earlier run left behind (RemoveStale).
//
// Our filter, on the ingress side of the port's clsact (or ingress) qdisc:
//
//	kind bpf, direct-action, protocol all, chain 0,
//	priority 1 (FilterPrio), handle 0x73666c77 (FilterHandle, "sflw"),
//	name "sflowswitchd/<owner id>" or "sflowswitchd/<owner id>/qdisc"
//	(TCA_BPF_NAME; "/qdisc" when the owner created the qdisc),
//	program tc_sampler.
//
// A port sampled at egress (package dataplane/egress) has the same filter
// on the egress side of its clsact qdisc, with the program tc_out_sampler;
// everything below holds for it as for the ingress one. When both sides carry our
// filters on a qdisc the owner created, both say "/qdisc", and whichever
// is removed last removes the qdisc once no filter is left on it.
//
// "First in the chain": classification starts at chain 0 and walks its
// filters by increasing priority; 1 is the smallest priority there is (0
// asks the kernel to pick one, and it picks from 0x8000 up, below any
// filter already at or above 0x8000, never 1). So the sampler sees every
// frame that reaches TC ingress before any other filter can drop, redirect
// or reclassify it, and it returns TC_ACT_UNSPEC (in direct-action mode:
// "no verdict, go on"), so the next filter sees the frame as if the
// sampler were not there. Filters of one priority share one classifier
// instance, which must have one kind and one protocol:
//   - another cls_bpf filter of protocol all at priority 1 (an operator's,
//     or a tool's that also wants to be first): ours joins its instance,
//     and cls_bpf puts a new filter at the head of its list (cls_bpf_change,
//     list_add_rcu), so ours still runs first (a filter the operator adds
//     there later runs before ours);
//   - a filter of another kind (flower, u32, matchall) or protocol at
//     priority 1: the kernel refuses ours (EINVAL). Nothing can run before
//     that filter, so the port is refused at TC (hook tc: an error naming
//     the filter; hook auto: the port is sampled with XDP instead, which
//     runs before TC).
//
// On kernels with TCX, TCX programs run before the clsact qdisc; the
// sampler uses a TCX link there (TCModeClsact aside).
//
// Ownership: each sampler loader (dataplane.Dataplane) has a random
// owner id and, for its lifetime, binds the abstract unix socket "@sflowswitchd/<owner id>" in its network
// namespace. The kernel releases the name when the process dies, however it
// dies, so a filter whose owner's name is free is stale, and one whose
// owner's name is taken belongs to a live sflowswitchd and is left alone.
package clsact

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// Our filter's place and name (see the top of this file).
const (
	FilterPrio         = 1
	FilterHandle       = 0x73666c77 // "sflw"
	tcFilterNamePrefix = "sflowswitchd/"
	QdiscTag           = "/qdisc"
	ownerIDLen         = 16 // hex digits
)

// FilterName is the TCA_BPF_NAME of a filter of owner id; ownQdisc
// records that the owner created the port's clsact qdisc.
func FilterName(id string, ownQdisc bool) string {
	if ownQdisc {
		return tcFilterNamePrefix + id + QdiscTag
	}
	return tcFilterNamePrefix + id
}

// ParseFilterName is the inverse of FilterName; ok is false for any
// other name.
func ParseFilterName(name string) (id string, ownQdisc, ok bool) {
	rest, found := strings.CutPrefix(name, tcFilterNamePrefix)
	if !found {
		return "", false, false
	}
	rest, ownQdisc = strings.CutSuffix(rest, QdiscTag)
	if len(rest) != ownerIDLen {
		return "", false, false
	}
	if _, err := hex.DecodeString(rest); err != nil {
		return "", false, false
	}
	return rest, ownQdisc, true
}

// Owner is a sampler loader's claim on its clsact filters: the id in their
// names and the abstract socket that says the owner lives.
type Owner struct {
	id string
	fd int
}

// ownerAddr is the abstract unix socket name of owner id.
func ownerAddr(id string) *unix.SockaddrUnix {
	return &unix.SockaddrUnix{Name: "@" + tcFilterNamePrefix + id}
}

// bindOwner binds the abstract name of id in the calling thread's network
// namespace. It returns unix.EADDRINUSE when a live process holds it.
func bindOwner(id string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("unix socket: %w", err)
	}
	if err := unix.Bind(fd, ownerAddr(id)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// NewOwner draws an owner id and binds its name (in the calling thread's
// network namespace).
func NewOwner() (*Owner, error) {
	var b [ownerIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("owner id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	fd, err := bindOwner(id)
	if err != nil {
		return nil, fmt.Errorf("binding the owner socket of the TC filters: %w", err)
	}
	return &Owner{id: id, fd: fd}, nil
}

// OwnerFromFD takes over the owner socket fd that the previous program of
// this process handed over across exec: its bound name says its id.
func OwnerFromFD(fd int) (*Owner, error) {
	unix.CloseOnExec(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("the handed-over owner socket %d: %w", fd, err)
	}
	u, ok := sa.(*unix.SockaddrUnix)
	if !ok {
		return nil, fmt.Errorf("the handed-over owner socket %d is not a unix socket", fd)
	}
	id, found := strings.CutPrefix(strings.TrimPrefix(u.Name, "@"), tcFilterNamePrefix)
	if _, err := hex.DecodeString(id); !found || err != nil || len(id) != ownerIDLen {
		return nil, fmt.Errorf("the handed-over socket %d is bound to %q, not an owner name", fd, u.Name)
	}
	return &Owner{id: id, fd: fd}, nil
}

// ID is the owner id, the one in its filters' names.
func (o *Owner) ID() string { return o.id }

// FD is the owner's socket, to hand over across exec (OwnerFromFD).
func (o *Owner) FD() int { return o.fd }

// BindOwner takes the name of owner id (pinned state's filters) in the
// calling thread's network namespace. Its error matches unix.EADDRINUSE
// when a live process holds it.
func BindOwner(id string) (*Owner, error) {
	fd, err := bindOwner(id)
	if err != nil {
		return nil, err
	}
	return &Owner{id: id, fd: fd}, nil
}

// Close releases the owner's name: its filters become stale.
func (o *Owner) Close() error {
	if o == nil {
		return nil
	}
	return unix.Close(o.fd)
}

// ownerAlive reports whether the owner id still lives: its abstract name
// is bound. Runs in the namespace where the filters are.
func ownerAlive(id string) (bool, error) {
	fd, err := bindOwner(id)
	switch {
	case errors.Is(err, unix.EADDRINUSE):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, unix.Close(fd)
}

// devIndex is a netlink.Link that is only an ifindex, for the tc calls.
func devIndex(ifindex int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}
}

// Side is a side of the clsact qdisc: where the filter goes.
type Side struct {
	name   string // "ingress" or "egress"
	parent uint32 // netlink.HANDLE_MIN_INGRESS or HANDLE_MIN_EGRESS
	prog   string // the name of our program there
}

var (
	Ingress = Side{name: "ingress", parent: netlink.HANDLE_MIN_INGRESS, prog: bpf.TcSamplerProgTcSampler}
	Egress  = Side{name: "egress", parent: netlink.HANDLE_MIN_EGRESS, prog: bpf.TcEgressProgTcOutSampler}
)

// IngressQdisc returns the port's clsact or ingress qdisc, nil if it has
// none.
func IngressQdisc(ifindex int) (netlink.Qdisc, error) {
	qs, err := netlink.QdiscList(devIndex(ifindex))
	if err != nil {
		return nil, fmt.Errorf("listing qdiscs: %w", err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			return q, nil
		}
	}
	return nil, nil
}

// clsactQdisc is the clsact qdisc of ifindex, as created and deleted.
func clsactQdisc(ifindex int) *netlink.Clsact {
	return &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: ifindex,
		Handle:    netlink.MakeHandle(0xffff, 0),
		Parent:    netlink.HANDLE_CLSACT,
	}}
}

// ourFilter is our filter on side of ifindex, as added, replaced and
// deleted.
func ourFilter(side Side, ifindex, fd int, name string) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex,
			Parent:    side.parent,
			Handle:    FilterHandle,
			Priority:  FilterPrio,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           fd,
		Name:         name,
		DirectAction: true,
	}
}

// FilterAt returns the cls_bpf filter at our priority and handle on side
// of ifindex, nil if there is none.
func FilterAt(side Side, ifindex int) (*netlink.BpfFilter, error) {
	fs, err := netlink.FilterList(devIndex(ifindex), side.parent)
	if err != nil {
		return nil, fmt.Errorf("listing %s filters: %w", side.name, err)
	}
	for _, f := range fs {
		a := f.Attrs()
		if bf, ok := f.(*netlink.BpfFilter); ok && a.Priority == FilterPrio && a.Handle == FilterHandle {
			return bf, nil
		}
	}
	return nil, nil
}

// removeQdiscIfEmpty deletes ifindex's clsact qdisc when neither side has
// a filter left. Only for a qdisc our filter's owner created.
func removeQdiscIfEmpty(ifindex int) (bool, error) {
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := netlink.FilterList(devIndex(ifindex), parent)
		if err != nil {
			return false, fmt.Errorf("listing filters: %w", err)
		}
		if len(fs) > 0 {
			return false, nil
		}
	}
	q, err := IngressQdisc(ifindex)
	if err != nil || q == nil || q.Type() != "clsact" {
		return false, err
	}
	if err := netlink.QdiscDel(clsactQdisc(ifindex)); err != nil {
		return false, fmt.Errorf("deleting the clsact qdisc: %w", err)
	}
	return true, nil
}

// LinkGone reports whether err says the device no longer exists (it took
// its qdiscs and filters with it).
func LinkGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) || errors.As(err, &nf)
}

// linkExists reports whether ifindex names a device in the current
// namespace. (A tc dump of a device that is gone is empty, not an error.)
func linkExists(ifindex int) (bool, error) {
	_, err := netlink.LinkByIndex(ifindex)
	if LinkGone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("link %d: %w", ifindex, err)
	}
	return true, nil
}

// Filter is a port's sampler attached as our cls_bpf filter; it has the
// Update and Close of a BPF link.
type Filter struct {
	ns       netns.NsHandle // the loader's namespace (netlink calls run there)
	side     Side
	ifindex  int
	name     string
	progID   ebpf.ProgramID // the program in the filter, to remove only ours
	ownQdisc bool
	log      *slog.Logger
}

// Filters adds, adopts and removes the filters of one owner in one
// network namespace (the sampler loader's).
type Filters struct {
	NS    netns.NsHandle // where a filter's Update and Close run
	Owner *Owner
	Log   *slog.Logger
}

// Attach adds prog as our filter on side of ifindex's clsact qdisc,
// creating the qdisc if the port has neither a clsact nor an ingress
// qdisc. ownQdisc says this owner created the qdisc already (for the
// port's other side). An ingress qdisc (no egress side) takes no egress
// filter. Must run in the port's netns.
func (fs Filters) Attach(prog *ebpf.Program, ifindex int, side Side, ownQdisc bool) (*Filter, error) {
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return nil, errors.New("program info without an ID (kernel older than 4.13?)")
	}
	q, err := IngressQdisc(ifindex)
	if err != nil {
		return nil, err
	}
	if q != nil && side == Egress {
		if q.Type() != "clsact" {
			return nil, fmt.Errorf("the port has an ingress qdisc, which has no egress side: the egress sampler needs a clsact qdisc there (or TCX, Linux 6.6)")
		}
	}
	if q != nil && side == Ingress {
		if b := q.Attrs().IngressBlock; b != nil && *b != 0 {
			// A shared block holds the filters of every port bound to
			// it; the port's own program (its ifindex and counters
			// compiled in) cannot go there.
			return nil, fmt.Errorf("TC ingress of this port is the shared filter block %d (ingress_block): the sampler's per-port filter cannot be added to it (sample this port with -hook xdp)", *b)
		}
	}
	f := &Filter{ns: fs.NS, side: side, ifindex: ifindex, progID: id, log: fs.Log, ownQdisc: ownQdisc && q != nil}
	if q == nil {
		err := netlink.QdiscAdd(clsactQdisc(ifindex))
		switch {
		case err == nil:
			f.ownQdisc = true
		case errors.Is(err, unix.EEXIST):
			// Someone added one meanwhile: it is theirs.
		default:
			return nil, fmt.Errorf("adding a clsact qdisc: %w", err)
		}
	}
	f.name = FilterName(fs.Owner.id, f.ownQdisc)
	if err := netlink.FilterAdd(ourFilter(side, ifindex, prog.FD(), f.name)); err != nil {
		err = f.explain(err)
		if f.ownQdisc {
			if _, qerr := removeQdiscIfEmpty(ifindex); qerr != nil {
				err = errors.Join(err, qerr)
			}
		}
		return nil, err
	}
	return f, nil
}

// explain turns the kernel's refusals of our filter into what the
// operator can do about them.
func (f *Filter) explain(err error) error {
	switch {
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("adding the sampler's cls_bpf filter: TC %s already has a filter at priority %d, handle %#x (another sflowswitchd sampling this port?): %w",
			f.side.name, FilterPrio, FilterHandle, err)
	case errors.Is(err, unix.EINVAL) && f.side == Egress:
		return fmt.Errorf("adding the egress sampler's cls_bpf filter at priority %d: TC egress has a filter of another kind or protocol at that priority, so the sampler cannot be first in the chain (move that filter): %w",
			FilterPrio, err)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("adding the sampler's cls_bpf filter at priority %d: TC ingress has a filter of another kind or protocol at that priority, so the sampler cannot be first in the chain (move that filter, or sample this port with -hook xdp): %w",
			FilterPrio, err)
	}
	return fmt.Errorf("adding the sampler's cls_bpf filter: %w", err)
}

// OwnQdisc reports whether the filter's owner created the port's clsact
// qdisc.
func (f *Filter) OwnQdisc() bool { return f.ownQdisc }

// Update replaces the filter's program in place (the kernel swaps it in
// the filter list at once: no frame goes unsampled).
func (f *Filter) Update(prog *ebpf.Program) error {
	info, err := prog.Info()
	if err != nil {
		return fmt.Errorf("program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return errors.New("program info without an ID")
	}
	err = netnsutil.Do(f.ns, func() error {
		return netlink.FilterReplace(ourFilter(f.side, f.ifindex, prog.FD(), f.name))
	})
	if err != nil {
		return fmt.Errorf("replacing the cls_bpf filter's program: %w", err)
	}
	f.progID = id
	return nil
}

// Close removes our filter, if it is still there with our program, and the
// clsact qdisc if we created it and no filter is left on it. A device that
// is gone took both with it.
func (f *Filter) Close() error {
	return netnsutil.Do(f.ns, func() error {
		if ok, err := linkExists(f.ifindex); !ok || err != nil {
			return err
		}
		cur, err := FilterAt(f.side, f.ifindex)
		if LinkGone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case cur == nil:
			// The qdisc was deleted under us (tc qdisc del), or the filter.
			f.log.Warn("the sampler's cls_bpf filter was already gone", "ifindex", f.ifindex, "side", f.side.name)
		case ebpf.ProgramID(cur.Id) != f.progID || cur.Name != f.name:
			f.log.Warn("filter at the sampler's priority and handle is no longer ours: left alone",
				"ifindex", f.ifindex, "side", f.side.name, "name", cur.Name, "prog_id", cur.Id)
			return nil
		default:
			err := netlink.FilterDel(ourFilter(f.side, f.ifindex, -1, ""))
			if LinkGone(err) {
				return nil
			}
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("deleting the sampler's cls_bpf filter: %w", err)
			}
		}
		if !f.ownQdisc {
			return nil
		}
		removed, err := removeQdiscIfEmpty(f.ifindex)
		if LinkGone(err) {
			return nil
		}
		if err == nil && !removed {
			f.log.Info("clsact qdisc created by the sampler kept: other filters use it", "ifindex", f.ifindex)
		}
		return err
	})
}

// RemoveOwnerFilters deletes the filters of owner id from every link of
// the current netns (pinned state being replaced or cleaned up), with the
// clsact qdiscs it created that are then empty; it returns how many.
func RemoveOwnerFilters(id string, log *slog.Logger) (int, error) {
	qs, err := netlink.QdiscList(nil)
	if err != nil {
		return 0, fmt.Errorf("listing qdiscs: %w", err)
	}
	n := 0
	var errs []error
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_INGRESS {
			continue
		}
		ifindex := q.Attrs().LinkIndex
		f, err := FilterAt(Ingress, ifindex)
		if err != nil || f == nil {
			continue
		}
		fid, ownQdisc, ok := ParseFilterName(f.Name)
		if !ok || fid != id {
			continue
		}
		if name, err := bpf.ProgramName(uint32(f.Id)); err != nil || name != bpf.TcSamplerProgTcSampler {
			continue
		}
		err = netlink.FilterDel(ourFilter(Ingress, ifindex, -1, ""))
		if err != nil && !LinkGone(err) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("deleting filter %s of ifindex %d: %w", f.Name, ifindex, err))
			continue
		}
		n++
		if ownQdisc {
			if _, err := removeQdiscIfEmpty(ifindex); err != nil && !LinkGone(err) {
				errs = append(errs, err)
			}
		}
		log.Info("removed TC filter of pinned state", "ifindex", ifindex, "name", f.Name)
	}
	return n, errors.Join(errs...)
}

// RemoveStale removes our filters whose owner is dead (SIGKILL, crash:
// a filter outlives its process) from every link of the current netns,
// with the clsact qdisc their owner created if it is then empty. A filter
// is ours only if all of these hold: kind bpf at our priority and handle
// on the ingress side, a name FilterName makes, and its program named
// tc_sampler; anything else is someone else's and never touched. Filters
// of a live owner (another sflowswitchd in this namespace) stay.
func RemoveStale(log *slog.Logger) error {
	qs, err := netlink.QdiscList(nil)
	if err != nil {
		return fmt.Errorf("listing qdiscs: %w", err)
	}
	ports, found, removed := 0, 0, 0
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_INGRESS {
			continue
		}
		ports++
		sides := []Side{Ingress}
		if q.Type() == "clsact" {
			sides = append(sides, Egress)
		}
		for _, side := range sides {
			f, r, err := removeStaleFilter(log, side, q.Attrs().LinkIndex)
			if err != nil {
				return err
			}
			found += f
			removed += r
		}
	}
	log.Info("startup TC cleanup", "ingress_qdiscs", ports, "ours_found", found, "stale_removed", removed)
	return nil
}

// removeStaleFilter removes our filter on side of ifindex if its owner is
// dead (RemoveStale). found and removed count it.
func removeStaleFilter(log *slog.Logger, side Side, ifindex int) (found, removed int, err error) {
	f, err := FilterAt(side, ifindex)
	if LinkGone(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ifindex %d: %w", ifindex, err)
	}
	if f == nil {
		return 0, 0, nil
	}
	id, ownQdisc, ok := ParseFilterName(f.Name)
	if !ok {
		log.Info("cls_bpf filter at the sampler's priority and handle is not ours: left alone", "ifindex", ifindex, "side", side.name, "name", f.Name, "prog_id", f.Id)
		return 0, 0, nil
	}
	prog, err := bpf.ProgramName(uint32(f.Id))
	if err != nil {
		log.Warn("cannot inspect the program of a TC filter named like ours: left alone", "ifindex", ifindex, "side", side.name, "name", f.Name, "prog_id", f.Id, "err", err)
		return 0, 0, nil
	}
	if prog != side.prog {
		log.Warn("TC filter named like ours runs another program: left alone", "ifindex", ifindex, "side", side.name, "name", f.Name, "prog", prog, "prog_id", f.Id)
		return 0, 0, nil
	}
	alive, err := ownerAlive(id)
	if err != nil {
		log.Warn("cannot tell whether a TC filter's owner lives: left alone", "ifindex", ifindex, "side", side.name, "name", f.Name, "err", err)
		return 1, 0, nil
	}
	if alive {
		log.Info("TC filter of a live sflowswitchd left alone", "ifindex", ifindex, "side", side.name, "name", f.Name, "prog_id", f.Id)
		return 1, 0, nil
	}
	err = netlink.FilterDel(ourFilter(side, ifindex, -1, ""))
	if LinkGone(err) || errors.Is(err, unix.ENOENT) {
		return 1, 0, nil
	}
	if err != nil {
		return 1, 0, fmt.Errorf("deleting stale %s filter %s of ifindex %d: %w", side.name, f.Name, ifindex, err)
	}
	qdisc := "kept (not created by its owner)"
	if ownQdisc {
		gone, err := removeQdiscIfEmpty(ifindex)
		switch {
		case err != nil && !LinkGone(err):
			return 1, 1, fmt.Errorf("ifindex %d: %w", ifindex, err)
		case gone:
			qdisc = "removed"
		default:
			qdisc = "kept (other filters use it)"
		}
	}
	log.Info("removed stale TC filter", "ifindex", ifindex, "side", side.name, "name", f.Name, "prog_id", f.Id, "clsact_qdisc", qdisc)
	return 1, 1, nil
}

// Adopt finds our filter on side of ifindex, which must carry this
// owner's id (pinned state's, taken over).
func (fs Filters) Adopt(side Side, ifindex int, ownQdisc bool) (*Filter, error) {
	cur, err := FilterAt(side, ifindex)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, errors.New("its clsact filter is gone")
	}
	id, own, ok := ParseFilterName(cur.Name)
	if !ok || id != fs.Owner.id {
		return nil, fmt.Errorf("the filter at its priority and handle is not the pinned state's (%q)", cur.Name)
	}
	return &Filter{ns: fs.NS, side: side, ifindex: ifindex, name: cur.Name, progID: ebpf.ProgramID(cur.Id),
		ownQdisc: own || ownQdisc, log: fs.Log}, nil
}

// RemoveLeft deletes this owner's filter on side of ifindex, if one
// outlived its process (its owner id is the state's, which this owner now
// holds, so RemoveStale left it).
func (fs Filters) RemoveLeft(side Side, ifindex int) {
	f, err := FilterAt(side, ifindex)
	if err != nil || f == nil {
		return
	}
	if id, _, ok := ParseFilterName(f.Name); !ok || id != fs.Owner.id {
		return
	}
	err = netlink.FilterDel(ourFilter(side, ifindex, -1, ""))
	if err != nil && !LinkGone(err) && !errors.Is(err, unix.ENOENT) {
		fs.Log.Warn("removing the "+side.name+" filter of the previous program", "ifindex", ifindex, "err", err)
		return
	}
	fs.Log.Info(side.name+" filter of the previous program removed", "ifindex", ifindex, "name", f.Name)
}

// Attached reports whether our filter with our program is on side of
// ifindex's clsact (or ingress) qdisc, whoever added it.
func Attached(side Side, ifindex int) (bool, error) {
	q, err := IngressQdisc(ifindex)
	switch {
	case LinkGone(err):
		return false, nil
	case err != nil:
		return false, err
	case q == nil:
		return false, nil
	}
	f, err := FilterAt(side, ifindex)
	switch {
	case LinkGone(err):
		return false, nil
	case err != nil:
		return false, err
	case f == nil:
		return false, nil
	}
	if _, _, ok := ParseFilterName(f.Name); !ok {
		return false, nil
	}
	if name, err := bpf.ProgramName(uint32(f.Id)); err != nil || name != side.prog {
		if errors.Is(err, os.ErrNotExist) {
			// Detached meanwhile: nothing is attached.
			return false, nil
		}
		return false, err
	}
	return true, nil
}
