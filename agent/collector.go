package agent

import (
	"fmt"
	"net/netip"
)

// ReservedCollectorPorts are UDP ports a collector on this host (a
// loopback address) may not use: the agent's own SNMP (161, traps 162) and
// AgentX (705) ports. Sending sFlow there feeds snmpd garbage.
var ReservedCollectorPorts = []uint16{161, 162, 705}

// CheckCollectorAddress reports why ap cannot be a collector: it must be a
// unicast address (not unspecified, multicast or the limited broadcast
// 255.255.255.255) with a non-zero port, and not a reserved port of this
// host on a loopback address. Subnet-directed broadcasts depend on the
// host's addresses: they are refused by the kernel, since collector
// sockets never have SO_BROADCAST (the sender's dial).
func CheckCollectorAddress(ap netip.AddrPort) error {
	a := ap.Addr().Unmap()
	switch {
	case !ap.IsValid() || ap.Port() == 0:
		return fmt.Errorf("collector %s: no address or port", ap)
	case a.IsUnspecified():
		return fmt.Errorf("collector %s: unspecified address, not a collector", ap)
	case a.IsMulticast():
		return fmt.Errorf("collector %s: multicast address, want unicast", ap)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("collector %s: broadcast address, want unicast", ap)
	case a.IsLoopback():
		for _, p := range ReservedCollectorPorts {
			if ap.Port() == p {
				return fmt.Errorf("collector %s: port %d is this host's SNMP/AgentX port", ap, p)
			}
		}
	}
	return nil
}
