package sflow

import (
	"net/netip"
	"strconv"
)

// Flow record formats of the host, HTTP and application structures
// (spec/sflow_host.txt, spec/sflow_http.txt, spec/sflow_application.txt).
var (
	FormatExtendedSocketIPv4      = Format(0, 2100)
	FormatExtendedSocketIPv6      = Format(0, 2101)
	FormatExtendedProxySocketIPv4 = Format(0, 2102)
	FormatExtendedProxySocketIPv6 = Format(0, 2103)
	FormatAppOperation            = Format(0, 2202)
	FormatAppParentContext        = Format(0, 2203)
	FormatAppInitiator            = Format(0, 2204)
	FormatAppTarget               = Format(0, 2205)
	FormatHTTPRequest             = Format(0, 2206)
	FormatExtendedProxyRequest    = Format(0, 2207)
)

func init() {
	registerFlow(FormatExtendedSocketIPv4, "extended_socket_ipv4", decodeExtendedSocketIPv4)
	registerFlow(FormatExtendedSocketIPv6, "extended_socket_ipv6", decodeExtendedSocketIPv6)
	registerFlow(FormatExtendedProxySocketIPv4, "extended_proxy_socket_ipv4", decodeExtendedProxySocketIPv4)
	registerFlow(FormatExtendedProxySocketIPv6, "extended_proxy_socket_ipv6", decodeExtendedProxySocketIPv6)
	registerFlow(FormatAppOperation, "app_operation", decodeAppOperation)
	registerFlow(FormatAppParentContext, "app_parent_context", decodeAppParentContext)
	registerFlow(FormatAppInitiator, "app_initiator", decodeAppInitiator)
	registerFlow(FormatAppTarget, "app_target", decodeAppTarget)
	registerFlow(FormatHTTPRequest, "http_request", decodeHTTPRequest)
	registerFlow(FormatExtendedProxyRequest, "extended_proxy_request", decodeExtendedProxyRequest)
}

// Maximum string lengths of the application and HTTP structures. Longer
// strings are truncated on encode and rejected on decode.
const (
	flowMaxAppApplication = 32  // typedef utf8string<32> application
	flowMaxAppOperation   = 32  // typedef utf8string<32> operation
	flowMaxAppAttributes  = 255 // typedef utf8string<255> attributes
	flowMaxAppStatusDescr = 64  // utf8string<64> status_descr
	flowMaxAppActor       = 64  // typedef utf8string<64> actor
	flowMaxHTTPURI        = 255 // string<255> uri
	flowMaxHTTPHost       = 64  // string<64> host
	flowMaxHTTPReferer    = 255 // string<255> referer
	flowMaxHTTPUserAgent  = 128 // string<128> useragent
	flowMaxHTTPXFF        = 64  // string<64> xff
	flowMaxHTTPAuthUser   = 32  // string<32> authuser
	flowMaxHTTPMimeType   = 64  // string<64> mime-type
)

// ExtendedSocketIPv4 is extended_socket_ipv4 (flow format 2100,
// sflow_host.txt): the IPv4 socket an application transaction used.
// Unknown integers are 0, an unknown (invalid) address encodes as 0.0.0.0.
type ExtendedSocketIPv4 struct {
	// Protocol is the IP protocol (TCP = 6, UDP = 17).
	Protocol   uint32     `json:"protocol"`
	LocalIP    netip.Addr `json:"local_ip"`
	RemoteIP   netip.Addr `json:"remote_ip"`
	LocalPort  uint32     `json:"local_port"`
	RemotePort uint32     `json:"remote_port"`
}

// Format implements Record.
func (*ExtendedSocketIPv4) Format() DataFormat { return FormatExtendedSocketIPv4 }

// Name implements Record.
func (*ExtendedSocketIPv4) Name() string { return "extended_socket_ipv4" }

// AppendXDR implements Record.
func (s *ExtendedSocketIPv4) AppendXDR(b []byte) []byte {
	b = appendUint32(b, s.Protocol)
	b = appendIPv4(b, s.LocalIP)
	b = appendIPv4(b, s.RemoteIP)
	b = appendUint32(b, s.LocalPort)
	return appendUint32(b, s.RemotePort)
}

func (s *ExtendedSocketIPv4) decode(r *reader) {
	s.Protocol = r.uint32()
	s.LocalIP = r.ipv4()
	s.RemoteIP = r.ipv4()
	s.LocalPort = r.uint32()
	s.RemotePort = r.uint32()
}

func decodeExtendedSocketIPv4(r *reader) Record {
	s := &ExtendedSocketIPv4{}
	s.decode(r)
	return s
}

// ExtendedSocketIPv6 is extended_socket_ipv6 (flow format 2101,
// sflow_host.txt). Unknown integers are 0, an unknown (invalid) address
// encodes as ::.
type ExtendedSocketIPv6 struct {
	// Protocol is the IP protocol (TCP = 6, UDP = 17).
	Protocol   uint32     `json:"protocol"`
	LocalIP    netip.Addr `json:"local_ip"`
	RemoteIP   netip.Addr `json:"remote_ip"`
	LocalPort  uint32     `json:"local_port"`
	RemotePort uint32     `json:"remote_port"`
}

// Format implements Record.
func (*ExtendedSocketIPv6) Format() DataFormat { return FormatExtendedSocketIPv6 }

// Name implements Record.
func (*ExtendedSocketIPv6) Name() string { return "extended_socket_ipv6" }

// AppendXDR implements Record.
func (s *ExtendedSocketIPv6) AppendXDR(b []byte) []byte {
	b = appendUint32(b, s.Protocol)
	b = appendIPv6(b, s.LocalIP)
	b = appendIPv6(b, s.RemoteIP)
	b = appendUint32(b, s.LocalPort)
	return appendUint32(b, s.RemotePort)
}

func (s *ExtendedSocketIPv6) decode(r *reader) {
	s.Protocol = r.uint32()
	s.LocalIP = r.ipv6()
	s.RemoteIP = r.ipv6()
	s.LocalPort = r.uint32()
	s.RemotePort = r.uint32()
}

func decodeExtendedSocketIPv6(r *reader) Record {
	s := &ExtendedSocketIPv6{}
	s.decode(r)
	return s
}

// ExtendedProxySocketIPv4 is extended_proxy_socket_ipv4 (flow format
// 2102, sflow_http.txt): the IPv4 connection a proxy or load balancer
// used to reach the downstream server.
type ExtendedProxySocketIPv4 struct {
	Socket ExtendedSocketIPv4 `json:"socket"`
}

// Format implements Record.
func (*ExtendedProxySocketIPv4) Format() DataFormat { return FormatExtendedProxySocketIPv4 }

// Name implements Record.
func (*ExtendedProxySocketIPv4) Name() string { return "extended_proxy_socket_ipv4" }

// AppendXDR implements Record.
func (p *ExtendedProxySocketIPv4) AppendXDR(b []byte) []byte { return p.Socket.AppendXDR(b) }

func decodeExtendedProxySocketIPv4(r *reader) Record {
	p := &ExtendedProxySocketIPv4{}
	p.Socket.decode(r)
	return p
}

// ExtendedProxySocketIPv6 is extended_proxy_socket_ipv6 (flow format
// 2103, sflow_http.txt).
type ExtendedProxySocketIPv6 struct {
	Socket ExtendedSocketIPv6 `json:"socket"`
}

// Format implements Record.
func (*ExtendedProxySocketIPv6) Format() DataFormat { return FormatExtendedProxySocketIPv6 }

// Name implements Record.
func (*ExtendedProxySocketIPv6) Name() string { return "extended_proxy_socket_ipv6" }

// AppendXDR implements Record.
func (p *ExtendedProxySocketIPv6) AppendXDR(b []byte) []byte { return p.Socket.AppendXDR(b) }

func decodeExtendedProxySocketIPv6(r *reader) Record {
	p := &ExtendedProxySocketIPv6{}
	p.Socket.decode(r)
	return p
}

// AppStatus is the status enumeration of sflow_application.txt: the
// outcome of a sampled application operation. The list may grow, so other
// values are carried unchanged.
type AppStatus uint32

// status values (sflow_application.txt "enum status").
const (
	AppStatusSuccess        AppStatus = 0
	AppStatusOther          AppStatus = 1
	AppStatusTimeout        AppStatus = 2
	AppStatusInternalError  AppStatus = 3
	AppStatusBadRequest     AppStatus = 4
	AppStatusForbidden      AppStatus = 5
	AppStatusTooLarge       AppStatus = 6
	AppStatusNotImplemented AppStatus = 7
	AppStatusNotFound       AppStatus = 8
	AppStatusUnavailable    AppStatus = 9
	AppStatusUnauthorized   AppStatus = 10
)

var appStatusNames = [...]string{"SUCCESS", "OTHER", "TIMEOUT", "INTERNAL_ERROR", "BAD_REQUEST",
	"FORBIDDEN", "TOO_LARGE", "NOT_IMPLEMENTED", "NOT_FOUND", "UNAVAILABLE", "UNAUTHORIZED"}

// String returns the spec's name of the status (e.g. "NOT_FOUND"), or the
// number for a value the spec does not list.
func (s AppStatus) String() string {
	if int(s) < len(appStatusNames) {
		return appStatusNames[s]
	}
	return strconv.FormatUint(uint64(s), 10)
}

// AppContext is the operation context structure of sflow_application.txt
// ("struct context"). Hierarchical names use '.' with the most general
// part on the left (e.g. "mail.smtp", "get.customer.name"). Strings are
// UTF-8; longer ones are truncated on a character boundary on encode, and
// the empty string means unknown.
type AppContext struct {
	// Application is utf8string<32>.
	Application string `json:"application"`
	// Operation is utf8string<32>.
	Operation string `json:"operation"`
	// Attributes are name=value pairs as an HTTP query string
	// (e.g. "cc=visa&loc=mobile"), utf8string<255>.
	Attributes string `json:"attributes"`
}

func (c *AppContext) appendXDR(b []byte) []byte {
	b = appendString(b, c.Application, flowMaxAppApplication)
	b = appendString(b, c.Operation, flowMaxAppOperation)
	return appendString(b, c.Attributes, flowMaxAppAttributes)
}

func (c *AppContext) decode(r *reader) {
	c.Application = r.string(flowMaxAppApplication)
	c.Operation = r.string(flowMaxAppOperation)
	c.Attributes = r.string(flowMaxAppAttributes)
}

// AppOperation is app_operation (flow format 2202,
// sflow_application.txt): one sampled application operation.
type AppOperation struct {
	Context AppContext `json:"context"`
	// StatusDescr is additional text on the status, utf8string<64>.
	StatusDescr string `json:"status_descr"`
	// ReqBytes and RespBytes are the request and response body sizes
	// (headers excluded); 0 means unknown.
	ReqBytes  uint64 `json:"req_bytes"`
	RespBytes uint64 `json:"resp_bytes"`
	// DurationUS is the spec's uS: the operation's duration in
	// microseconds.
	DurationUS uint32    `json:"uS"`
	Status     AppStatus `json:"status"`
}

// Format implements Record.
func (*AppOperation) Format() DataFormat { return FormatAppOperation }

// Name implements Record.
func (*AppOperation) Name() string { return "app_operation" }

// AppendXDR implements Record.
func (o *AppOperation) AppendXDR(b []byte) []byte {
	b = o.Context.appendXDR(b)
	b = appendString(b, o.StatusDescr, flowMaxAppStatusDescr)
	b = appendUint64(b, o.ReqBytes)
	b = appendUint64(b, o.RespBytes)
	b = appendUint32(b, o.DurationUS)
	return appendUint32(b, uint32(o.Status))
}

func decodeAppOperation(r *reader) Record {
	o := &AppOperation{}
	o.Context.decode(r)
	o.StatusDescr = r.string(flowMaxAppStatusDescr)
	o.ReqBytes = r.uint64()
	o.RespBytes = r.uint64()
	o.DurationUS = r.uint32()
	o.Status = AppStatus(r.uint32())
	return o
}

// AppParentContext is app_parent_context (flow format 2203,
// sflow_application.txt, where the struct is spelled
// "app_parent_content"): the server operation that caused a sampled
// client operation.
type AppParentContext struct {
	Context AppContext `json:"context"`
}

// Format implements Record.
func (*AppParentContext) Format() DataFormat { return FormatAppParentContext }

// Name implements Record.
func (*AppParentContext) Name() string { return "app_parent_context" }

// AppendXDR implements Record.
func (p *AppParentContext) AppendXDR(b []byte) []byte { return p.Context.appendXDR(b) }

func decodeAppParentContext(r *reader) Record {
	p := &AppParentContext{}
	p.Context.decode(r)
	return p
}

// AppInitiator is app_initiator (flow format 2204,
// sflow_application.txt): the business-level actor that initiated the
// request (e.g. a customer id), utf8string<64>.
type AppInitiator struct {
	Actor string `json:"actor"`
}

// Format implements Record.
func (*AppInitiator) Format() DataFormat { return FormatAppInitiator }

// Name implements Record.
func (*AppInitiator) Name() string { return "app_initiator" }

// AppendXDR implements Record.
func (a *AppInitiator) AppendXDR(b []byte) []byte { return appendString(b, a.Actor, flowMaxAppActor) }

func decodeAppInitiator(r *reader) Record {
	return &AppInitiator{Actor: r.string(flowMaxAppActor)}
}

// AppTarget is app_target (flow format 2205, sflow_application.txt): the
// actor targeted by the request (e.g. a payment's recipient),
// utf8string<64>.
type AppTarget struct {
	Actor string `json:"actor"`
}

// Format implements Record.
func (*AppTarget) Format() DataFormat { return FormatAppTarget }

// Name implements Record.
func (*AppTarget) Name() string { return "app_target" }

// AppendXDR implements Record.
func (a *AppTarget) AppendXDR(b []byte) []byte { return appendString(b, a.Actor, flowMaxAppActor) }

func decodeAppTarget(r *reader) Record {
	return &AppTarget{Actor: r.string(flowMaxAppActor)}
}

// HTTPMethod is the http_method enumeration of sflow_http.txt. The list
// may grow, so other values are carried unchanged.
type HTTPMethod uint32

// http_method values (sflow_http.txt "enum http_method").
const (
	HTTPMethodOther   HTTPMethod = 0
	HTTPMethodOptions HTTPMethod = 1
	HTTPMethodGet     HTTPMethod = 2
	HTTPMethodHead    HTTPMethod = 3
	HTTPMethodPost    HTTPMethod = 4
	HTTPMethodPut     HTTPMethod = 5
	HTTPMethodDelete  HTTPMethod = 6
	HTTPMethodTrace   HTTPMethod = 7
	HTTPMethodConnect HTTPMethod = 8
)

var httpMethodNames = [...]string{"OTHER", "OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT"}

// String returns the spec's name of the method (e.g. "GET"), or the number
// for a value the spec does not list.
func (m HTTPMethod) String() string {
	if int(m) < len(httpMethodNames) {
		return httpMethodNames[m]
	}
	return strconv.FormatUint(uint64(m), 10)
}

// HTTPRequest is http_request (flow format 2206, sflow_http.txt, the
// December 2011 version that carries the xff field): one sampled HTTP
// request. Unknown strings are empty and unknown numbers 0.
type HTTPRequest struct {
	Method HTTPMethod `json:"method"`
	// Protocol is the HTTP version as major*1000+minor (HTTP/1.1 = 1001).
	Protocol uint32 `json:"protocol"`
	// URI is the URI exactly as it came from the client, string<255>.
	URI string `json:"uri"`
	// Host is the request's Host header, string<64>.
	Host string `json:"host"`
	// Referer is the Referer header, string<255>.
	Referer string `json:"referer"`
	// UserAgent is the User-Agent header, string<128>.
	UserAgent string `json:"useragent"`
	// XFF is the X-Forwarded-For header, string<64>.
	XFF string `json:"xff"`
	// AuthUser is the RFC 1413 identity of the user, string<32>.
	AuthUser string `json:"authuser"`
	// MimeType is the response's MIME type, string<64>.
	MimeType string `json:"mime_type"`
	// ReqBytes and RespBytes are the request and response Content-Length.
	ReqBytes  uint64 `json:"req_bytes"`
	RespBytes uint64 `json:"resp_bytes"`
	// DurationUS is the spec's uS: the request's duration in microseconds.
	DurationUS uint32 `json:"uS"`
	// Status is the HTTP status code (an XDR int).
	Status int32 `json:"status"`
}

// Format implements Record.
func (*HTTPRequest) Format() DataFormat { return FormatHTTPRequest }

// Name implements Record.
func (*HTTPRequest) Name() string { return "http_request" }

// AppendXDR implements Record.
func (h *HTTPRequest) AppendXDR(b []byte) []byte {
	b = appendUint32(b, uint32(h.Method))
	b = appendUint32(b, h.Protocol)
	b = appendString(b, h.URI, flowMaxHTTPURI)
	b = appendString(b, h.Host, flowMaxHTTPHost)
	b = appendString(b, h.Referer, flowMaxHTTPReferer)
	b = appendString(b, h.UserAgent, flowMaxHTTPUserAgent)
	b = appendString(b, h.XFF, flowMaxHTTPXFF)
	b = appendString(b, h.AuthUser, flowMaxHTTPAuthUser)
	b = appendString(b, h.MimeType, flowMaxHTTPMimeType)
	b = appendUint64(b, h.ReqBytes)
	b = appendUint64(b, h.RespBytes)
	b = appendUint32(b, h.DurationUS)
	return appendInt32(b, h.Status)
}

func decodeHTTPRequest(r *reader) Record {
	h := &HTTPRequest{}
	h.Method = HTTPMethod(r.uint32())
	h.Protocol = r.uint32()
	h.URI = r.string(flowMaxHTTPURI)
	h.Host = r.string(flowMaxHTTPHost)
	h.Referer = r.string(flowMaxHTTPReferer)
	h.UserAgent = r.string(flowMaxHTTPUserAgent)
	h.XFF = r.string(flowMaxHTTPXFF)
	h.AuthUser = r.string(flowMaxHTTPAuthUser)
	h.MimeType = r.string(flowMaxHTTPMimeType)
	h.ReqBytes = r.uint64()
	h.RespBytes = r.uint64()
	h.DurationUS = r.uint32()
	h.Status = r.int32()
	return h
}

// ExtendedProxyRequest is extended_proxy_request (flow format 2207,
// sflow_http.txt): the URI and Host a proxy sent downstream. Include it
// only when the proxy rewrote either of them.
type ExtendedProxyRequest struct {
	// URI is the URI in the downstream request, string<255>.
	URI string `json:"uri"`
	// Host is the Host in the downstream request, string<64>.
	Host string `json:"host"`
}

// Format implements Record.
func (*ExtendedProxyRequest) Format() DataFormat { return FormatExtendedProxyRequest }

// Name implements Record.
func (*ExtendedProxyRequest) Name() string { return "extended_proxy_request" }

// AppendXDR implements Record.
func (p *ExtendedProxyRequest) AppendXDR(b []byte) []byte {
	b = appendString(b, p.URI, flowMaxHTTPURI)
	return appendString(b, p.Host, flowMaxHTTPHost)
}

func decodeExtendedProxyRequest(r *reader) Record {
	p := &ExtendedProxyRequest{}
	p.URI = r.string(flowMaxHTTPURI)
	p.Host = r.string(flowMaxHTTPHost)
	return p
}
