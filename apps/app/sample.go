package app

import (
	"fmt"
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Client data sources: sflow_application.txt section 3 reserves indexes
// 200001-265535 for the client side of an application, one-to-one with the
// server data source (client index = 200000 + service port).
const clientIndexBase = 200000

// Maximum string lengths, in bytes, of the XDR structures
// (sflow_application.txt, sflow_http.txt). Longer strings are rejected, not
// truncated: an application that sends them has a bug worth seeing.
const (
	maxApplication = 32
	maxOperation   = 32
	maxAttributes  = 255
	maxStatusDescr = 64
	maxActor       = 64
	maxURI         = 255
	maxHost        = 64
	maxReferer     = 255
	maxUserAgent   = 128
	maxXFF         = 64
	maxAuthUser    = 32
	maxMimeType    = 64
)

// maxAppStatus is the largest status value sflow_application.txt lists
// (UNAUTHORIZED). The spec lets the list grow, but a local application
// sending another value is more likely broken than ahead of the spec, so
// the API rejects it.
const maxAppStatus = sflow.AppStatusUnauthorized

// FlowSample is one sampled transaction of an application, as the
// application reports it. The engine encodes it as an sFlow flow_sample of
// data source entLogicalEntry.ServicePort (server side) or
// entLogicalEntry.(200000+ServicePort) (client side). The records are
// carried by pointer: once submitted, the sample belongs to the engine.
type FlowSample struct {
	// AppName is the application's name (utf8string<32>), e.g. "http" or
	// "payment"; it names the application in the APM reports and fills
	// app_operation's context.application when that is empty.
	AppName string
	// ServicePort is the lowest port the application receives requests
	// on: the sub_agent_id and the data source index (spec section 3).
	// 0 = none: the application is identified by AppName, on a data
	// source index of its own from 150000 up (see registry.go).
	ServicePort uint16
	// Client marks a transaction the application made as a client of
	// another service (reported on the client data source).
	Client bool
	// IfIndex is the interface the request was received on (server) or
	// sent on (client); 0 = unknown.
	IfIndex uint32
	// SamplingRate is the application's 1-in-N rate (N >= 1).
	SamplingRate uint32
	// Seen is the number of transactions the application saw since its
	// previous flow sample of this data source, this one included; it is
	// added to the sample_pool. 0 means unknown: SamplingRate is added.
	Seen uint32

	// Operation (app_operation) or HTTP (http_request) is required.
	Operation     *sflow.AppOperation
	HTTP          *sflow.HTTPRequest
	ParentContext *sflow.AppParentContext
	Initiator     *sflow.AppInitiator
	Target        *sflow.AppTarget
	ProxyRequest  *sflow.ExtendedProxyRequest
	Socket4       *sflow.ExtendedSocketIPv4
	Socket6       *sflow.ExtendedSocketIPv6

	index uint32 // data source index, set by the engine at submission
}

// CounterSample is one set of counters of an application's server data
// source. The engine adds host_parent (the host's entPhysicalEntry.1).
type CounterSample struct {
	// AppName and ServicePort are as in FlowSample.
	AppName     string
	ServicePort uint16
	// At least one record is required. Operations.Application is set to
	// AppName when empty.
	Operations *sflow.AppOperations
	Resources  *sflow.AppResources
	Workers    *sflow.AppWorkers
	HTTP       *sflow.HTTPCounters

	index uint32 // data source index, set by the engine at submission
}

// Reason is why the engine refused a sample. Each reason has its own
// counter in Stats.
type Reason int

// Rejection reasons.
const (
	// ReasonNotJSON: the message is not one well-formed JSON value.
	ReasonNotJSON Reason = iota
	// ReasonTooLarge: the message is larger than MaxMessageSize.
	ReasonTooLarge
	// ReasonWrongType: a field has the wrong JSON type.
	ReasonWrongType
	// ReasonUnknownField: a field the format does not define.
	ReasonUnknownField
	// ReasonOutOfRange: a number outside its field's range.
	ReasonOutOfRange
	// ReasonStringTooLong: a string longer than the spec's maximum.
	ReasonStringTooLong
	// ReasonMissingField: a required field is absent.
	ReasonMissingField
	// ReasonBadAddress: an address that does not parse or is of the
	// wrong family.
	ReasonBadAddress
	// ReasonBadMessage: not exactly one of flow_sample,
	// counter_sample (counters_sample), rtmetric and rtflow; or a
	// duplicate rtmetric/rtflow name.
	ReasonBadMessage
	// ReasonQueueFull: the engine's queue was full (a flood); the sample
	// is also counted in its data source's drops.
	ReasonQueueFull
	// ReasonTooManySources: a new application beyond Config.MaxSources.
	ReasonTooManySources
	// ReasonBadName: an rtmetric/rtflow metric, field or data source
	// name outside the host agent's rules (letters, digits, '-', '_'; a
	// data source name not starting with a digit).
	ReasonBadName
	numReasons
)

var reasonNames = [numReasons]string{
	"not_json", "too_large", "wrong_type", "unknown_field", "out_of_range",
	"string_too_long", "missing_field", "bad_address", "bad_message",
	"queue_full", "too_many_sources", "bad_name",
}

// String returns the reason's metric label.
func (r Reason) String() string {
	if r >= 0 && r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// Reasons returns every rejection reason, for metrics.
func Reasons() []Reason {
	r := make([]Reason, numReasons)
	for i := range r {
		r[i] = Reason(i)
	}
	return r
}

// RejectError is the error of a refused sample.
type RejectError struct {
	Reason Reason
	Detail string
}

func (e *RejectError) Error() string {
	return "application sample rejected: " + e.Reason.String() + ": " + e.Detail
}

func reject(r Reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// strField is a string and its maximum length, for validation.
type strField struct {
	name string
	s    string
	max  int
}

func checkStrings(fields ...strField) error {
	for _, f := range fields {
		if len(f.s) > f.max {
			return reject(ReasonStringTooLong, "%s is %d bytes, at most %d allowed", f.name, len(f.s), f.max)
		}
	}
	return nil
}

func checkContext(prefix string, c *sflow.AppContext) error {
	return checkStrings(
		strField{prefix + ".application", c.Application, maxApplication},
		strField{prefix + ".operation", c.Operation, maxOperation},
		strField{prefix + ".attributes", c.Attributes, maxAttributes})
}

func checkApp(name string, port uint16) error {
	if name == "" {
		return reject(ReasonMissingField, "app_name is empty")
	}
	if err := checkStrings(strField{"app_name", name, maxApplication}); err != nil {
		return err
	}
	return nil
}

// Validate checks the sample against the spec's rules: the strings'
// maximum lengths, the ranges of the enumerations, socket address
// families, and the required records. Errors are *RejectError.
func (f *FlowSample) Validate() error {
	if err := checkApp(f.AppName, f.ServicePort); err != nil {
		return err
	}
	if f.SamplingRate == 0 {
		return reject(ReasonOutOfRange, "sampling_rate 0: must be at least 1")
	}
	if f.Operation == nil && f.HTTP == nil {
		return reject(ReasonMissingField, "a flow sample needs app_operation or http_request")
	}
	if o := f.Operation; o != nil {
		if err := checkContext("app_operation", &o.Context); err != nil {
			return err
		}
		if err := checkStrings(strField{"app_operation.status_descr", o.StatusDescr, maxStatusDescr}); err != nil {
			return err
		}
		if o.Status > maxAppStatus {
			return reject(ReasonOutOfRange, "app_operation.status %d: must be 0..%d", o.Status, maxAppStatus)
		}
	}
	if h := f.HTTP; h != nil {
		if err := checkStrings(
			strField{"http_request.uri", h.URI, maxURI},
			strField{"http_request.host", h.Host, maxHost},
			strField{"http_request.referer", h.Referer, maxReferer},
			strField{"http_request.useragent", h.UserAgent, maxUserAgent},
			strField{"http_request.xff", h.XFF, maxXFF},
			strField{"http_request.authuser", h.AuthUser, maxAuthUser},
			strField{"http_request.mime_type", h.MimeType, maxMimeType}); err != nil {
			return err
		}
		if h.Status < 0 || h.Status > 999 {
			return reject(ReasonOutOfRange, "http_request.status %d: must be 0..999", h.Status)
		}
	}
	if p := f.ParentContext; p != nil {
		if err := checkContext("app_parent_context", &p.Context); err != nil {
			return err
		}
	}
	if a := f.Initiator; a != nil {
		if err := checkStrings(strField{"app_initiator.actor", a.Actor, maxActor}); err != nil {
			return err
		}
	}
	if a := f.Target; a != nil {
		if err := checkStrings(strField{"app_target.actor", a.Actor, maxActor}); err != nil {
			return err
		}
	}
	if p := f.ProxyRequest; p != nil {
		if err := checkStrings(
			strField{"extended_proxy_request.uri", p.URI, maxURI},
			strField{"extended_proxy_request.host", p.Host, maxHost}); err != nil {
			return err
		}
	}
	if s := f.Socket4; s != nil {
		if err := checkSocket("extended_socket_ipv4", "IPv4", netip.Addr.Is4, s.LocalIP, s.RemoteIP, s.LocalPort, s.RemotePort, s.Protocol); err != nil {
			return err
		}
	}
	if s := f.Socket6; s != nil {
		if err := checkSocket("extended_socket_ipv6", "IPv6", netip.Addr.Is6, s.LocalIP, s.RemoteIP, s.LocalPort, s.RemotePort, s.Protocol); err != nil {
			return err
		}
	}
	return nil
}

// checkSocket checks an extended_socket record: both addresses unknown or
// of the record's family (inFamily), ports and protocol within their
// ranges.
func checkSocket(name, family string, inFamily func(netip.Addr) bool, local, remote netip.Addr, localPort, remotePort, protocol uint32) error {
	for _, a := range [2]struct {
		field string
		addr  netip.Addr
	}{{"local_ip", local}, {"remote_ip", remote}} {
		if a.addr.IsValid() && !inFamily(a.addr) {
			return reject(ReasonBadAddress, "%s.%s is not an %s address", name, a.field, family)
		}
	}
	if localPort > 65535 || remotePort > 65535 || protocol > 255 {
		return reject(ReasonOutOfRange, "%s: port above 65535 or protocol above 255", name)
	}
	return nil
}

// Validate checks the sample: application name, port, at least one
// counter record. Errors are *RejectError.
func (c *CounterSample) Validate() error {
	if err := checkApp(c.AppName, c.ServicePort); err != nil {
		return err
	}
	if c.Operations == nil && c.Resources == nil && c.Workers == nil && c.HTTP == nil {
		return reject(ReasonMissingField, "a counters sample needs app_operations, app_resources, app_workers or http_counters")
	}
	if o := c.Operations; o != nil {
		if err := checkStrings(strField{"app_operations.application", o.Application, maxApplication}); err != nil {
			return err
		}
	}
	return nil
}
