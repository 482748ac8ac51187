package sonic

import (
	"net"
	"strconv"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The LAG members' LACP state (sonic-swss tlm_teamd/values_store.h: the
// fields of teamd's state dump that tlm_teamd copies into STATE_DB
// LAG_MEMBER_TABLE|<lag>|<member>; teamsyncd writes APPL_DB
// LAG_MEMBER_TABLE:<lag>:<member> status enabled/disabled).
const (
	lagMemberTable      = "LAG_MEMBER_TABLE"
	fieldActorState     = "runner.actor_lacpdu_info.state"
	fieldActorSystem    = "runner.actor_lacpdu_info.system"
	fieldPartnerState   = "runner.partner_lacpdu_info.state"
	fieldPartnerSystem  = "runner.partner_lacpdu_info.system"
	fieldRunnerSelected = "runner.selected"
	fieldMemberStatus   = "status"
)

// LACP is a LAG member's LACP state as teamd reports it.
type LACP struct {
	// Teamd is set when STATE_DB LAG_MEMBER_TABLE has the member (teamd
	// runs its LACP runner); the fields below are teamd's then.
	Teamd bool
	// ActorSystem and PartnerSystem are the LACPDUs' system MACs.
	ActorSystem, PartnerSystem [6]byte
	// ActorState and PartnerState are the LACPDUs' state bytes (802.1AX
	// Actor_State / Partner_State bits, sflow.LACPState*).
	ActorState, PartnerState uint8
	// Selected: teamd selected the port for the LAG's aggregator.
	Selected bool
	// Status is APPL_DB LAG_MEMBER_TABLE status: "enabled" while the
	// member carries the LAG's traffic, "disabled", or "" (absent).
	Status string
}

// readLACP reads member m of LAG lag from STATE_DB's (st, under key
// skey) and APPL_DB's (ap) LAG_MEMBER_TABLE entries; a bad value is
// reported and leaves its field unknown (zero).
func readLACP(st, ap map[string]string, skey, akey string, ps *problems) LACP {
	l := LACP{Teamd: st != nil, Status: ap[fieldMemberStatus]}
	if l.Status != "" && l.Status != "enabled" && l.Status != "disabled" {
		ps.add(ApplDB, akey, fieldMemberStatus, l.Status, "not enabled or disabled; unknown")
		l.Status = ""
	}
	if st == nil {
		return l
	}
	state := func(f string) uint8 {
		v, ok := st[f]
		if !ok {
			return 0
		}
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil {
			ps.add(StateDB, skey, f, v, "not an LACP state byte; 0 sent")
			return 0
		}
		return uint8(n)
	}
	mac := func(f string) [6]byte {
		v, ok := st[f]
		if !ok {
			return [6]byte{}
		}
		m, err := net.ParseMAC(v)
		if err != nil || len(m) != 6 {
			ps.add(StateDB, skey, f, v, "not a MAC address; zero sent")
			return [6]byte{}
		}
		return [6]byte(m)
	}
	l.ActorState, l.PartnerState = state(fieldActorState), state(fieldPartnerState)
	l.ActorSystem, l.PartnerSystem = mac(fieldActorSystem), mac(fieldPartnerSystem)
	switch v := st[fieldRunnerSelected]; v {
	case "true":
		l.Selected = true
	case "false", "":
	default:
		ps.add(StateDB, skey, fieldRunnerSelected, v, "not true or false; not selected")
	}
	return l
}

// LAGPortStats fills l with lag_port_stats (sFlow LAG counters, format
// 0:7; IEEE8023-LAG-MIB dot3adAggPortTable) of port p, a member of a LAG
// of st, and tells whether p is one. hsflowd's mod_sonic (compileLags)
// sends it for every PORTCHANNEL_MEMBER: actor system DEVICE_METADATA's
// mac, partner system zero, the LAG's SONiC ifIndex as attachedAggID, the
// states from the port's admin and oper status. Here teamd's own view
// (STATE_DB LAG_MEMBER_TABLE) is used where SONiC has it:
//   - actor and partner system: the LACPDUs' (teamd's actor system is the
//     LAG's MAC, which SONiC sets to the system's), else DEVICE_METADATA
//     mac and zero as hsflowd;
//   - attachedAggID: the LAG's SONiC ifIndex while teamd has the port
//     selected, or (no teamd state) while APPL_DB LAG_MEMBER_TABLE says
//     enabled or says nothing (hsflowd's); 0 otherwise (802.1AX: not
//     attached);
//   - states: teamd's actor and partner LACPDU state bytes as the oper
//     states, actor admin Aggregation|LACP_Activity (SONiC's teamd runs
//     LACP active), partner admin 0; without teamd: a static member's,
//     Aggregation, with Synchronization, Collecting and Distributing
//     while attached and its link is up;
//   - the LACPDU and marker counters are unavailable: neither Redis nor
//     teamd's state dump keeps them.
func LAGPortStats(st *State, p *Port, l *sflow.LAGPortStats) bool {
	if p.LAG == "" || p.IsLAG() {
		return false
	}
	lag, ok := st.PortByName(p.LAG)
	if !ok {
		return false
	}
	*l = sflow.LAGPortStats{}
	lc := p.LACP
	if lc.Teamd {
		l.ActorSystemID, l.PartnerOperSystemID = lc.ActorSystem, lc.PartnerSystem
	}
	if l.ActorSystemID == ([6]byte{}) && len(st.Config.MAC) == 6 {
		l.ActorSystemID = [6]byte(st.Config.MAC)
	}
	attached := lc.Status != "disabled"
	if lc.Teamd {
		attached = lc.Selected
	}
	if attached {
		l.AttachedAggID = lag.Index
	}
	if lc.Teamd {
		l.ActorAdminState = sflow.LACPStateAggregation | sflow.LACPStateActivity
		l.ActorOperState, l.PartnerOperState = lc.ActorState, lc.PartnerState
	} else {
		l.ActorAdminState, l.ActorOperState = sflow.LACPStateAggregation, sflow.LACPStateAggregation
		if attached && p.OperUp {
			l.ActorOperState |= sflow.LACPStateSynchronization | sflow.LACPStateCollecting | sflow.LACPStateDistributing
		}
	}
	l.SetUnavailable()
	return true
}
