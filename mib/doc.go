// Package mib is the SFLOW-MIB (sFlow.org, version 1.3;
// mib/modules/SFLOW-MIB.txt) bound to the running agent: it is the
// sampling configuration model of sflowswitchd. It holds the rows of
// sFlowRcvrTable, sFlowFsTable and sFlowCpTable, serves them to SNMP
// managers through an AgentX subagent (it implements agentx.Handler) and,
// after every change, derives the agent's whole configuration and hands it
// to Config.Apply (agent.Agent.Apply in the daemon).
//
// # Rows
//
// The receiver table has a fixed number of rows (Config.Receivers). Every
// data source the daemon announces (SetPorts: ifIndex.N of each sampled
// port) has Config.Instances flow sampler rows and as many counter poller
// rows; the host (entPhysicalEntry.1) has counter poller rows only. Rows
// are never created by SNMP: a SET to a row that does not exist fails with
// noCreation.
//
// # Static receivers
//
// Receivers from the daemon's configuration (SetStatic) occupy rows 1..R,
// owned by "sflowswitchd.conf"; instance r of every data source is bound to
// static receiver r. They never time out (sFlowRcvrTimeout reads
// 2147483647, the largest Integer32). SNMP cannot change them: a SET to any
// column of a static receiver row, or of a sampler or poller bound to one,
// fails with notWritable (RFC 3416 section 4.2.5: the object "can not be
// modified no matter what new value is specified"), and binding another
// sampler to a static receiver fails with inconsistentValue.
//
// # Ownership (SFLOW-MIB sFlowRcvrOwner, sFlowRcvrTimeout, SFlowReceiver)
//
// A manager claims a free receiver (owner "") by setting sFlowRcvrOwner and
// a positive sFlowRcvrTimeout in one SET; a claim without a timeout, or of
// a receiver another owner holds, fails with inconsistentValue. Other
// columns of a receiver can be set only while it is (or, within the same
// SET, becomes) owned. The timeout counts down in seconds (Tick, Run); when
// it reaches 0, or when the owner is set to "" (or the timeout to 0), the
// receiver returns to its defaults and every sampler and poller bound to it
// is released (receiver 0) and reset to its defaults. A sampler or poller
// can be bound only to an owned receiver; while bound, setting its
// receiver to anything other than 0 or the current value fails with
// inconsistentValue (the SFlowReceiver "bad value"), and its other columns
// can be set only while it is bound.
//
// # Values
//
// sFlowFsPacketSamplingRate: any value >= 0 is exact (0 = off; the agent
// realizes every integer rate by sub-sampling). sFlowFsMaximumHeaderSize:
// adjusted to the closest value in 20..256 (agent.MaxHeaderBytes; 20 bytes
// is the agent's minimum), negative values are wrongValue.
// sFlowCpInterval: any value >= 0 is exact. sFlowRcvrDatagramVersion:
// values above 5 read back 5 (the highest supported version below the
// request), values below 5 are wrongValue, as the MIB says.
// sFlowRcvrMaximumDatagramSize: 200..65507, else wrongValue.
// sFlowRcvrAddressType: ipv4(1) or ipv6(2), else wrongValue.
// sFlowRcvrAddress: 4 or 16 octets (wrongLength otherwise); a size that
// does not match the address type is inconsistentValue (INET-ADDRESS-MIB,
// InetAddress). sFlowRcvrPort: 1..65535. sFlowRcvrOwner: at most 127
// octets (OwnerString, wrongLength), valid UTF-8 (wrongValue).
//
// A SET is one transaction (agentx.Handler): TestSet validates every
// varbind and stages the new state, CommitSet installs it and calls
// Config.Apply (commitFailed and rollback if that fails), UndoSet restores
// the previous state. A SET with one bad varbind changes nothing.
package mib
