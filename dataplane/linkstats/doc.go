// Package linkstats reads the counters of one interface for sFlow's
// counter records. ReadCounters (or a Reader, for pollers) returns the
// 64-bit netlink link statistics, speed and duplex from ethtool,
// admin/oper status and promiscuity of one interface, for sFlow
// if_counters. ReadEthernetCounters returns the dot3 counters of sFlow
// ethernet_counters where the driver exposes them in its ethtool
// statistics. A Reader also reads a bond member's LACP counters
// (lag_port_stats) and a bridge's per-VLAN counters (vlan_counters).
// Counters Linux does not keep are UnknownCounter, the value sFlow v5
// prescribes for an unavailable counter.
//
// The functions take a netns.NsHandle so that tests can read a lab
// namespace without moving the process; a handle <= 0 means the namespace
// of the calling thread.
package linkstats
