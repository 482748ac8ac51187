// Package sonic reads a SONiC switch's sFlow configuration, ports and ASIC
// counters from its Redis databases, as host-sflow's mod_sonic does
// (src/Linux/mod_sonic.c), so that the agent can run in SONiC's sflow
// container in hsflowd's place:
//
//   - dbconfig.go: the Redis topology of database_config.json (instances,
//     database ids and key separators);
//   - config.go: CONFIG_DB's SFLOW|global, SFLOW_COLLECTOR|<name>,
//     DEVICE_METADATA|localhost and PORTCHANNEL_MEMBER|<lag>|<member>;
//   - ports.go: the ports (COUNTERS_DB COUNTERS_PORT_NAME_MAP), their
//     SONiC ifIndex (STATE_DB PORT_INDEX_TABLE, else port_util's rule),
//     speed and status (APPL_DB PORT_TABLE, LAG_TABLE);
//   - counters.go: COUNTERS:<oid>'s SAI_PORT_STAT_* as if_counters and
//     ethernet_counters, a LAG's as the sum of its members';
//   - lag.go: a LAG member's lag_port_stats from teamd's state (STATE_DB
//     and APPL_DB LAG_MEMBER_TABLE) and DEVICE_METADATA's mac;
//   - ready.go: STATE_DB SYSTEM_READY|SYSTEM_STATE;
//   - client.go: the connections, pipelined reads, keyspace notifications
//     and reconnection with backoff.
//
// /etc/hsflowd.auto is written by internal/autofile, the one writer of
// hsflowd's file.
//
// Every bad value is reported (Problem, counted by table) and skips only
// its own key or field; the rest is read.
package sonic
