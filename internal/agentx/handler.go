package agentx

import "fmt"

// ErrorStatus is res.error of a Response PDU: an SNMP error-status
// (RFC 3416 section 3) or an AgentX error (RFC 2741 section 6.2.16).
type ErrorStatus uint16

// SNMP error-status values (RFC 3416 section 3), as carried in res.error.
const (
	NoError             ErrorStatus = 0
	TooBig              ErrorStatus = 1
	NoSuchName          ErrorStatus = 2
	BadValue            ErrorStatus = 3
	ReadOnly            ErrorStatus = 4
	GenErr              ErrorStatus = 5
	NoAccess            ErrorStatus = 6
	WrongType           ErrorStatus = 7
	WrongLength         ErrorStatus = 8
	WrongEncoding       ErrorStatus = 9
	WrongValue          ErrorStatus = 10
	NoCreation          ErrorStatus = 11
	InconsistentValue   ErrorStatus = 12
	ResourceUnavailable ErrorStatus = 13
	CommitFailed        ErrorStatus = 14
	UndoFailed          ErrorStatus = 15
	AuthorizationError  ErrorStatus = 16
	NotWritable         ErrorStatus = 17
	InconsistentName    ErrorStatus = 18
)

// AgentX protocol errors (RFC 2741 section 6.2.16).
const (
	OpenFailed            ErrorStatus = 256
	NotOpen               ErrorStatus = 257
	IndexWrongType        ErrorStatus = 258
	IndexAlreadyAllocated ErrorStatus = 259
	IndexNoneAvailable    ErrorStatus = 260
	IndexNotAllocated     ErrorStatus = 261
	UnsupportedContext    ErrorStatus = 262
	DuplicateRegistration ErrorStatus = 263
	UnknownRegistration   ErrorStatus = 264
	UnknownAgentCaps      ErrorStatus = 265
	ParseError            ErrorStatus = 266
	RequestDenied         ErrorStatus = 267
	ProcessingError       ErrorStatus = 268
)

var errorStatusNames = map[ErrorStatus]string{
	NoError: "noError", TooBig: "tooBig", NoSuchName: "noSuchName",
	BadValue: "badValue", ReadOnly: "readOnly", GenErr: "genErr",
	NoAccess: "noAccess", WrongType: "wrongType", WrongLength: "wrongLength",
	WrongEncoding: "wrongEncoding", WrongValue: "wrongValue",
	NoCreation: "noCreation", InconsistentValue: "inconsistentValue",
	ResourceUnavailable: "resourceUnavailable", CommitFailed: "commitFailed",
	UndoFailed: "undoFailed", AuthorizationError: "authorizationError",
	NotWritable: "notWritable", InconsistentName: "inconsistentName",
	OpenFailed: "openFailed", NotOpen: "notOpen",
	IndexWrongType: "indexWrongType", IndexAlreadyAllocated: "indexAlreadyAllocated",
	IndexNoneAvailable: "indexNoneAvailable", IndexNotAllocated: "indexNotAllocated",
	UnsupportedContext: "unsupportedContext", DuplicateRegistration: "duplicateRegistration",
	UnknownRegistration: "unknownRegistration", UnknownAgentCaps: "unknownAgentCaps",
	ParseError: "parseError", RequestDenied: "requestDenied",
	ProcessingError: "processingError",
}

// String returns the RFC name of the error, e.g. "wrongValue".
func (e ErrorStatus) String() string {
	if s, ok := errorStatusNames[e]; ok {
		return s
	}
	return fmt.Sprintf("ErrorStatus(%d)", uint16(e))
}

// Handler serves the objects of the registered subtree. The Subagent calls
// it from one goroutine, in the order the master's requests arrive, so a
// Handler needs no locking against itself (it may need it against the rest
// of the program).
//
// A set is one transaction per RFC 2741 section 7.2.4: TestSet, then
// either CommitSet or nothing, then UndoSet if some other commit failed,
// and always CleanupSet last. TestSet must check the whole set (types,
// ranges, consistency) and reserve what CommitSet needs, so that
// CommitSet fails only in exceptional cases; nothing may change before
// CommitSet.
type Handler interface {
	// Get returns the object with exactly this name. When there is none,
	// it returns a Variable of type NoSuchObject (no such object type) or
	// NoSuchInstance (the object type exists, the instance does not). An
	// error makes the request fail with genErr.
	Get(oid OID) (Variable, error)
	// GetNext returns the first object whose name is > from (>= from when
	// include is true) and < end (end empty: no upper bound), or a
	// Variable of type EndOfMibView when there is none.
	GetNext(from OID, include bool, end OID) (Variable, error)
	// TestSet validates vbs as one set request of transaction tx. On
	// failure errIndex is the 1-based index in vbs of the failing varbind.
	TestSet(tx uint32, vbs []Variable) (errStatus ErrorStatus, errIndex int)
	// CommitSet applies the set validated by TestSet for tx.
	CommitSet(tx uint32) (ErrorStatus, int)
	// UndoSet reverts a committed tx.
	UndoSet(tx uint32) (ErrorStatus, int)
	// CleanupSet releases what TestSet reserved for tx; it ends every
	// transaction, successful or not.
	CleanupSet(tx uint32)
}
