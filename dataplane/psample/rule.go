package psample

// The rule that makes a port's samples, as switch software installs it
// (hsflowd's mod_dent, SONiC's sflowmgrd, `tc filter add dev swp1 ingress
// matchall skip_sw action sample rate N group G trunc H`):
//
//	a matchall filter, protocol all, chain 0, priority 1 (ruleprio),
//	handle 0x73667073 ("sfps", rulehandle), on the ingress or egress side
//	of the port's clsact (or ingress) qdisc, skip_sw when the port
//	offloads tc (the ASIC samples, the kernel only relays);
//	one action, sample (tc_act/tc_sample.h): rate N, psample group G,
//	truncation H, and an action cookie (TCA_ACT_COOKIE, up to 16 bytes)
//	that says the rule is ours: "sfps", the owner's 8-byte id, a flag byte
//	(cookieOwnQdisc: the owner created the qdisc).
//
// A change of rate, group or truncation replaces the filter's sample
// action by its index (Install): the kernel swaps the parameters under the
// running filter, so no frame passes unsampled, and the group lives on
// (the action takes the new group before it drops the old), so its
// sequence continues.
//
// A filter outlives its process, so ownership is as for the dataplane's
// cls_bpf filters (dataplane/clsact): each Owner binds the abstract
// unix socket "@sflowswitchd-psample/<id hex>" for its lifetime; the
// kernel frees the name when the process dies, however it dies. A rule
// whose owner's name is free is stale: RemoveStale deletes it (and the
// qdisc its owner created, once empty). Rules of live owners, and every
// rule without our cookie, are left alone.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Our filter's place (see the top of this file).
const (
	RulePrio   = 1
	RuleHandle = 0x73667073 // "sfps"
)

// The sides of a clsact qdisc (TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS /
// TC_H_MIN_EGRESS)).
const (
	parentIngress = 0xFFFFFFF2
	parentEgress  = 0xFFFFFFF3
)

// cookie layout.
const (
	cookieMagic    = "sfps"
	cookieLen      = len(cookieMagic) + 8 + 1
	cookieOwnQdisc = 1
)

// Rule is the sampling rule of one port and direction.
type Rule struct {
	IfIndex int
	Egress  bool
	// Rate samples 1 in Rate packets (act_sample: at random, each packet
	// with probability 1/Rate).
	Rate uint32
	// Group is the psample group the samples are sent to.
	Group uint32
	// TruncSize is the most bytes of each packet sent (0: all).
	TruncSize uint32
	// SkipSW installs the filter in the hardware only (skip_sw): for a
	// port that offloads tc. The kernel refuses it where the driver
	// cannot offload the rule.
	SkipSW bool
	// Pipe is the sample action's verdict "pipe" (TC_ACT_PIPE) rather
	// than "continue" (TC_ACT_UNSPEC), as a rule is read back. The
	// agent's rules continue: act_sample's verdict is the filter's result
	// (tcf_action_exec returns the last action's), and a result of 0 or
	// more ends the classification (tcf_classify: "if (err >= 0) return
	// err"), so after a pipe rule at priority 1 none of the port's own
	// filters would run; TC_ACT_UNSPEC (-1) makes tcf_classify go on to
	// the next filter, and ends as "pass" when none matches. hsflowd's
	// mod_dent writes its rules the same way ("action sample ...
	// continue"). Earlier versions of the agent wrote pipe: Install
	// replaces such a rule. Set only by tests that write one.
	Pipe bool
}

func (r Rule) parent() uint32 {
	if r.Egress {
		return parentEgress
	}
	return parentIngress
}

// Side names a direction for messages.
func Side(egress bool) string {
	if egress {
		return "egress"
	}
	return "ingress"
}

// Owner installs and removes rules in the network namespace it was made
// in (the calling thread's: every method must run there).
type Owner struct {
	id [8]byte
	fd int
}

func ownerAddr(id [8]byte) *unix.SockaddrUnix {
	return &unix.SockaddrUnix{Name: "@sflowswitchd-psample/" + hex.EncodeToString(id[:])}
}

// NewOwner draws an owner id and binds its name.
func NewOwner() (*Owner, error) {
	o := &Owner{fd: -1}
	if _, err := rand.Read(o.id[:]); err != nil {
		return nil, fmt.Errorf("psample: owner id: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("psample: unix socket: %w", err)
	}
	if err := unix.Bind(fd, ownerAddr(o.id)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("psample: binding the owner's name: %w", err)
	}
	o.fd = fd
	return o, nil
}

// Close releases the owner's name (its rules become stale: remove them
// first).
func (o *Owner) Close() error {
	if o.fd < 0 {
		return nil
	}
	err := unix.Close(o.fd)
	o.fd = -1
	return err
}

// alive reports whether the owner of id lives (its name is bound).
func alive(id [8]byte) (bool, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("psample: unix socket: %w", err)
	}
	defer unix.Close(fd)
	err = unix.Bind(fd, ownerAddr(id))
	if errors.Is(err, unix.EADDRINUSE) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("psample: probing an owner's name: %w", err)
	}
	return false, nil
}

// Installed is a rule found on a port: ours or another program's.
type Installed struct {
	Rule
	// Ours: the cookie is ours (Owner set); OwnQdisc: its owner created
	// the qdisc.
	Ours     bool
	Owner    [8]byte
	OwnQdisc bool
	// Prio and Handle are the filter's; ActIndex its sample action's
	// index (in the namespace's table of sample actions).
	Prio     uint16
	Handle   uint32
	ActIndex uint32
}

// Install adds r, or changes ours in place (rate, group, truncation).
// The port's clsact qdisc is created when it has neither clsact nor (for
// an ingress rule) an ingress qdisc; the cookie records it, so that the
// last of our rules removed removes it.
//
// A matchall filter cannot be changed (cls_matchall's change refuses an
// existing filter: EEXIST), so a change replaces the filter's sample
// action by its index (RTM_NEWACTION, NLM_F_REPLACE: tcf_sample_init
// swaps rate, group and truncation under the running filter; no frame
// passes unsampled). Where that is refused (an offloaded rule whose
// driver cannot change it), the filter is deleted and added again: the
// frames between are counted in the pool and not sampled.
func (o *Owner) Install(r Rule) error {
	cur, err := ourRule(r.IfIndex, r.Egress)
	if err != nil {
		return err
	}
	switch {
	case cur != nil && cur.Ours:
		if cur.Rate == r.Rate && cur.Group == r.Group && cur.TruncSize == r.TruncSize && cur.SkipSW == r.SkipSW && cur.Pipe == r.Pipe {
			return nil
		}
		if cur.SkipSW == r.SkipSW && cur.ActIndex != 0 {
			if err := o.replaceAction(cur.ActIndex, r, cur.OwnQdisc); err == nil {
				return nil
			}
		}
		f := &netlink.MatchAll{FilterAttrs: netlink.FilterAttrs{LinkIndex: r.IfIndex, Parent: r.parent(), Priority: RulePrio,
			Handle: RuleHandle, Protocol: unix.ETH_P_ALL}}
		if err := netlink.FilterDel(f); err != nil {
			return fmt.Errorf("psample: replacing the %s rule of ifindex %d: %w", Side(r.Egress), r.IfIndex, err)
		}
		return o.write(r, cur.OwnQdisc)
	case cur != nil:
		return fmt.Errorf("psample: %s of ifindex %d: priority %d handle %#x holds another program's filter", Side(r.Egress), r.IfIndex, RulePrio, RuleHandle)
	}
	own, err := ensureQdisc(r.IfIndex, r.Egress)
	if err != nil {
		return err
	}
	if !own {
		// The qdisc may be one this owner made for its rule on the
		// other side: that rule's cookie says so, and this one must too,
		// so that whichever goes last removes it.
		if other, err := ourRule(r.IfIndex, !r.Egress); err == nil && other != nil && other.Ours && other.Owner == o.id {
			own = other.OwnQdisc
		}
	}
	if err := o.write(r, own); err != nil {
		if own {
			_, _ = removeQdiscIfEmpty(r.IfIndex) // undo: ours, nothing of ours on it
		}
		return err
	}
	return nil
}

// replaceAction changes the sample action of index idx in place.
func (o *Owner) replaceAction(idx uint32, r Rule, ownQdisc bool) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWACTION, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddData(&nl.TcActionMsg{Family: nl.FAMILY_ALL})
	tab := nl.NewRtAttr(nl.TCA_ACT_TAB, nil)
	act := tab.AddRtAttr(1, nil)
	act.AddRtAttr(nl.TCA_ACT_KIND, nl.ZeroTerminated("sample"))
	o.sampleOptions(act, r, idx)
	act.AddRtAttr(nl.TCA_ACT_COOKIE, o.cookie(ownQdisc))
	req.AddData(tab)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("psample: tc actions replace action sample index %d rate %d: %w", idx, r.Rate, err)
	}
	return nil
}

// sampleOptions adds the sample action's options (TCA_ACT_OPTIONS) of r
// to act; index 0 asks for a new action.
func (o *Owner) sampleOptions(act *nl.RtAttr, r Rule, index uint32) {
	aopts := act.AddRtAttr(nl.TCA_ACT_OPTIONS, nil)
	gen := nl.TcGen{Index: index, Action: int32(netlink.TC_ACT_UNSPEC)}
	if r.Pipe {
		gen.Action = int32(netlink.TC_ACT_PIPE)
	}
	aopts.AddRtAttr(nl.TCA_ACT_SAMPLE_PARMS, gen.Serialize())
	aopts.AddRtAttr(nl.TCA_ACT_SAMPLE_RATE, nl.Uint32Attr(r.Rate))
	aopts.AddRtAttr(nl.TCA_ACT_SAMPLE_PSAMPLE_GROUP, nl.Uint32Attr(r.Group))
	if r.TruncSize != 0 {
		aopts.AddRtAttr(nl.TCA_ACT_SAMPLE_TRUNC_SIZE, nl.Uint32Attr(r.TruncSize))
	}
}

// write sends the RTM_NEWTFILTER of r (create or replace).
func (o *Owner) write(r Rule, ownQdisc bool) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWTFILTER, unix.NLM_F_CREATE|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(r.IfIndex), Handle: RuleHandle, Parent: r.parent(),
		Info: netlink.MakeHandle(RulePrio, nl.Swap16(unix.ETH_P_ALL))})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("matchall")))
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	var flags uint32
	if r.SkipSW {
		flags |= nl.TCA_CLS_FLAGS_SKIP_SW
	}
	opts.AddRtAttr(nl.TCA_MATCHALL_FLAGS, nl.Uint32Attr(flags))
	acts := opts.AddRtAttr(nl.TCA_MATCHALL_ACT, nil)
	act := acts.AddRtAttr(1, nil)
	act.AddRtAttr(nl.TCA_ACT_KIND, nl.ZeroTerminated("sample"))
	o.sampleOptions(act, r, 0)
	act.AddRtAttr(nl.TCA_ACT_COOKIE, o.cookie(ownQdisc))
	req.AddData(opts)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("psample: tc filter %s ifindex %d matchall action sample rate %d group %d trunc %d%s: %w",
			Side(r.Egress), r.IfIndex, r.Rate, r.Group, r.TruncSize, map[bool]string{true: " skip_sw"}[r.SkipSW], err)
	}
	return nil
}

func (o *Owner) cookie(ownQdisc bool) []byte {
	c := append([]byte(cookieMagic), o.id[:]...)
	var f byte
	if ownQdisc {
		f |= cookieOwnQdisc
	}
	return append(c, f)
}

// Remove deletes our rule on the port's side, if there is one (another
// program's is left alone), and the qdisc our rules' owner created once
// nothing is left on it. A port that has gone took its rules with it.
func (o *Owner) Remove(ifindex int, egress bool) error {
	cur, err := ourRule(ifindex, egress)
	if err != nil {
		if errors.Is(err, ErrNoPort) {
			return nil
		}
		return err
	}
	if cur == nil || !cur.Ours || cur.Owner != o.id {
		return nil
	}
	return removeRule(cur)
}

// removeRule deletes rule r, and its owner's qdisc once empty.
func removeRule(r *Installed) error {
	f := &netlink.MatchAll{FilterAttrs: netlink.FilterAttrs{LinkIndex: r.IfIndex, Parent: r.parent(), Priority: RulePrio,
		Handle: RuleHandle, Protocol: unix.ETH_P_ALL}}
	if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("psample: deleting the %s rule of ifindex %d: %w", Side(r.Egress), r.IfIndex, err)
	}
	if r.OwnQdisc {
		if _, err := removeQdiscIfEmpty(r.IfIndex); err != nil {
			return err
		}
	}
	return nil
}

// RemoveStale deletes every rule of ours, on every port of the namespace,
// whose owner is dead (a daemon killed), with the qdiscs they created once
// empty. It returns how many it removed.
func RemoveStale() (int, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return 0, fmt.Errorf("psample: listing links: %w", err)
	}
	n := 0
	var errs []error
	for _, l := range links {
		for _, egress := range []bool{false, true} {
			cur, err := ourRule(l.Attrs().Index, egress)
			if err != nil {
				if !errors.Is(err, ErrNoPort) {
					errs = append(errs, err)
				}
				continue
			}
			if cur == nil || !cur.Ours {
				continue
			}
			live, err := alive(cur.Owner)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if live {
				continue
			}
			if err := removeRule(cur); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Rules lists the matchall + sample rules on a port's side (anyone's).
func Rules(ifindex int, egress bool) ([]Installed, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETTFILTER, unix.NLM_F_DUMP)
	parent := uint32(parentIngress)
	if egress {
		parent = parentEgress
	}
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: parent})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWTFILTER)
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil, ErrNoPort
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil, nil // no qdisc: no filter
		}
		return nil, fmt.Errorf("psample: listing the %s filters of ifindex %d: %w", Side(egress), ifindex, err)
	}
	var out []Installed
	for _, m := range msgs {
		if r, ok := parseFilter(m, egress); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// ourRule is the rule at our priority and handle on the port's side, or
// nil.
func ourRule(ifindex int, egress bool) (*Installed, error) {
	rs, err := Rules(ifindex, egress)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		if rs[i].Prio == RulePrio && rs[i].Handle == RuleHandle {
			return &rs[i], nil
		}
	}
	return nil, nil
}

// parseFilter reads a RTM_NEWTFILTER message: ok for a matchall filter
// whose first action is sample.
func parseFilter(m []byte, egress bool) (Installed, bool) {
	if len(m) < nl.SizeofTcMsg {
		return Installed{}, false
	}
	tm := nl.DeserializeTcMsg(m)
	r := Installed{Rule: Rule{IfIndex: int(tm.Ifindex), Egress: egress}, Prio: uint16(tm.Info >> 16), Handle: tm.Handle}
	attrs, err := nl.ParseRouteAttr(m[nl.SizeofTcMsg:])
	if err != nil {
		return Installed{}, false
	}
	kind, sample := "", false
	for _, a := range attrs {
		switch a.Attr.Type {
		case nl.TCA_KIND:
			kind = string(bytes.TrimRight(a.Value, "\x00"))
		case nl.TCA_OPTIONS:
			sample = r.parseMatchall(a.Value)
		}
	}
	return r, kind == "matchall" && sample
}

// parseMatchall reads matchall's options into r; true when its first
// action is sample.
func (r *Installed) parseMatchall(b []byte) bool {
	opts, err := nl.ParseRouteAttr(b)
	if err != nil {
		return false
	}
	found := false
	for _, o := range opts {
		switch o.Attr.Type {
		case nl.TCA_MATCHALL_FLAGS:
			if len(o.Value) >= 4 {
				r.SkipSW = binary.NativeEndian.Uint32(o.Value)&nl.TCA_CLS_FLAGS_SKIP_SW != 0
			}
		case nl.TCA_MATCHALL_ACT:
			acts, err := nl.ParseRouteAttr(o.Value)
			if err != nil || len(acts) == 0 {
				return false
			}
			found = r.parseAction(acts[0].Value)
		}
	}
	return found
}

// parseAction reads one action; true when it is sample.
func (r *Installed) parseAction(b []byte) bool {
	as, err := nl.ParseRouteAttr(b)
	if err != nil {
		return false
	}
	var kind string
	var opts []byte
	for _, a := range as {
		switch a.Attr.Type {
		case nl.TCA_ACT_KIND:
			kind = string(bytes.TrimRight(a.Value, "\x00"))
		case nl.TCA_ACT_OPTIONS:
			opts = a.Value
		case nl.TCA_ACT_COOKIE:
			if len(a.Value) == cookieLen && string(a.Value[:4]) == cookieMagic {
				r.Ours = true
				copy(r.Owner[:], a.Value[4:12])
				r.OwnQdisc = a.Value[12]&cookieOwnQdisc != 0
			}
		}
	}
	if kind != "sample" {
		return false
	}
	so, err := nl.ParseRouteAttr(opts)
	if err != nil {
		return false
	}
	for _, a := range so {
		if len(a.Value) < 4 {
			continue
		}
		v := binary.NativeEndian.Uint32(a.Value)
		switch a.Attr.Type {
		case nl.TCA_ACT_SAMPLE_RATE:
			r.Rate = v
		case nl.TCA_ACT_SAMPLE_PSAMPLE_GROUP:
			r.Group = v
		case nl.TCA_ACT_SAMPLE_TRUNC_SIZE:
			r.TruncSize = v
		case nl.TCA_ACT_SAMPLE_PARMS: // struct tc_sample: tc_gen, index first, action at 8
			r.ActIndex = v
			if len(a.Value) >= 12 {
				r.Pipe = int32(binary.NativeEndian.Uint32(a.Value[8:])) == int32(netlink.TC_ACT_PIPE)
			}
		}
	}
	return true
}

// ensureQdisc gives the port a qdisc our rule can go on: its clsact, or
// for an ingress rule its ingress qdisc; otherwise a new clsact (own).
func ensureQdisc(ifindex int, egress bool) (own bool, err error) {
	qs, err := netlink.QdiscList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}})
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return false, ErrNoPort
		}
		return false, fmt.Errorf("psample: listing the qdiscs of ifindex %d: %w", ifindex, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_INGRESS { // clsact and ingress both sit at ffff:fff1
			continue
		}
		if q.Type() == "clsact" || (q.Type() == "ingress" && !egress) {
			return false, nil
		}
		return false, fmt.Errorf("psample: ifindex %d has an ingress qdisc: its egress side cannot take a rule (replace it with clsact)", ifindex)
	}
	q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscAdd(q); err != nil {
		return false, fmt.Errorf("psample: adding a clsact qdisc to ifindex %d: %w", ifindex, err)
	}
	return true, nil
}

// removeQdiscIfEmpty deletes the port's clsact qdisc when no filter is
// left on either side.
func removeQdiscIfEmpty(ifindex int) (bool, error) {
	for _, parent := range []uint32{parentIngress, parentEgress} {
		fs, err := netlink.FilterList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}, parent)
		if err != nil {
			if errors.Is(err, unix.ENODEV) || errors.Is(err, syscall.EINVAL) {
				return false, nil
			}
			return false, fmt.Errorf("psample: listing the filters of ifindex %d: %w", ifindex, err)
		}
		if len(fs) > 0 {
			return false, nil
		}
	}
	q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
		return false, fmt.Errorf("psample: deleting the clsact qdisc of ifindex %d: %w", ifindex, err)
	}
	return true, nil
}
