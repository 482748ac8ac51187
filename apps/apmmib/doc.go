// Package apmmib serves the APM-MIB (RFC 3729, apm = rmon 23 =
// 1.3.6.1.2.1.16.23) from an apm.Engine through an AgentX subagent: it
// implements agentx.Handler, read-only.
//
// Served objects (every other name under apm is noSuchObject):
//
//	apmAppDirTable        apm.1.1   apmAppDirConfig, Boundary1..6
//	apmNameTable          apm.1.8   apmNameMachineName, apmNameUserName
//	apmReportControlTable apm.1.9   DataSource .. Status (columns 2..15)
//	apmReportTable        apm.1.10  TransactionCount .. B7 (columns 3..14)
//
// Types on the wire follow the SYNTAX clauses: Unsigned32 is sent as
// Gauge32 (RFC 2578 section 7.1.11: same encoding), enumerations, RowStatus
// and StorageType as Integer, TimeStamp as TimeTicks, OwnerString and
// SnmpAdminString as OCTET STRING, DataSourceOrZero as an OBJECT IDENTIFIER
// (0.0 for no data source).
//
// Decisions where the MIB leaves a choice:
//   - The engine has no apmAppDirTable name column to serve: the MIB has
//     none (names of user-defined applications live in
//     apmUserDefinedAppTable, which also needs a parent protocol this
//     engine does not know), so AppDirEntry.Name is not exposed.
//   - apmReportControlStartTime is the sysUpTime of the report's start,
//     counted from Options.Start (the agent's sysUpTime zero), in
//     hundredths of a second modulo 2^32; a start before Options.Start
//     reads 0.
//   - apmReportControlStorageType is permanent(4): rows come from the
//     daemon's configuration, and the MIB says of permanent rows that "no
//     objects in this row need to be writable". apmReportControlStatus is
//     active(1) (the engine holds only active rows).
//     apmReportControlDroppedFrames is 0: the engine is fed transactions,
//     not frames, and never sheds them.
//   - apmNameTable lists the client IDs referenced by the kept reports
//     (the rows a manager needs to interpret apmReportTable). The engine
//     never remaps a client ID, so each ID has exactly one entry, whose
//     apmNameMappingStartTime is Options.Start (the 11-octet UTC form of
//     DateAndTime); machine and user names are unknown (empty strings, as
//     the DESCRIPTIONs ask).
//   - Sets are refused: notWritable for accessible objects and names the
//     handler does not serve, noAccess for not-accessible (index) columns
//     (RFC 3416 section 4.2.5), reported for the first varbind.
package apmmib
