// Package agentx is an AgentX (RFC 2741) subagent: it attaches to an SNMP
// master agent (net-snmp's snmpd), registers one subtree (the SFLOW-MIB,
// 1.3.6.1.4.1.14706, for sflowswitchd) and answers the master's Get,
// GetNext, GetBulk and set transactions (TestSet, CommitSet, UndoSet,
// CleanupSet) through a Handler.
//
// Wire format: pdu.go, oid.go and varbind.go encode and decode every PDU a
// subagent sends or receives. Received PDUs are decoded in the byte order
// their NETWORK_BYTE_ORDER flag says; we always send network byte order.
// Decoding is strict and never panics.
//
// Session: Subagent (subagent.go) dials the master, sends Open and
// Register, serves requests in arrival order from one goroutine (so set
// transactions of the session are serialized as RFC 2741 section 7.2
// requires), pings the master every Config.PingInterval, and on any loss
// reconnects with exponential backoff (100 ms doubling to 5 s, jittered)
// and registers again. GetBulk is answered by repeated GetNext (RFC 2741
// section 7.2.3.3).
//
// # Configuring net-snmp's snmpd as master
//
// The master must have AgentX enabled and a socket the daemon can reach.
// In snmpd.conf:
//
//	# be an AgentX master
//	master          agentx
//	# the socket (this is net-snmp's default; Config.Address must match)
//	agentXSocket    unix:/var/agentx/master
//	# socket and directory permissions and owner (the daemon runs as root
//	# here; use a group for a non-root daemon)
//	agentXPerms     0660 0750 root root
//	# how long the master waits for a subagent answer, and retries
//	agentXTimeout   5
//	agentXRetries   1
//	# SNMP access to the sFlow subtree; SETs need a read-write view,
//	# e.g. for SNMPv2c from localhost only:
//	view            sflowView included .1.3.6.1.4.1.14706
//	rwcommunity     private 127.0.0.1 -V sflowView
//	rocommunity     public  default   -V sflowView
//
// For TCP use "agentXSocket tcp:127.0.0.1:705" and Config{Network: "tcp",
// Address: "127.0.0.1:705"}; never expose that port beyond the host, the
// AgentX protocol has no authentication.
//
// net-snmp's master splits GetBulk into GetNext requests and sends every
// varbind of a set that falls into our registration in one TestSet; it
// maps our res.index (1-based within that TestSet) back to the index in
// the manager's request.
package agentx
