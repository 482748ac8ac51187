package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// MaxMessageSize is the largest JSON message the API takes (64 KiB).
const MaxMessageSize = 64 << 10

// The JSON message format (README.md) is that of the host agents'
// application modules (hsflowd's json module: flow_sample and
// counters_sample with app_name, service_port, client, sampling_rate,
// app_operation, app_parent_context, app_initiator, app_target,
// extended_socket_ipv4/6, app_operations, app_resources, app_workers),
// extended with http_request, extended_proxy_request, http_counters, and
// the optional if_index and seen. Field names follow the spec's structure
// members.

type jsonMessage struct {
	FlowSample *jsonFlow `json:"flow_sample,omitempty"`
	// CounterSample is the host agent's key (hsflowd mod_json.c reads
	// "counter_sample"); CountersSample is this API's original spelling,
	// kept as an alias.
	CounterSample  *jsonCounters   `json:"counter_sample,omitempty"`
	CountersSample *jsonCounters   `json:"counters_sample,omitempty"`
	RTMetric       json.RawMessage `json:"rtmetric,omitempty"`
	RTFlow         json.RawMessage `json:"rtflow,omitempty"`
}

type jsonFlow struct {
	AppName              *string                     `json:"app_name"`
	ServicePort          *uint32                     `json:"service_port,omitempty"`
	Client               bool                        `json:"client,omitempty"`
	IfIndex              uint32                      `json:"if_index,omitempty"`
	SamplingRate         *uint32                     `json:"sampling_rate,omitempty"`
	Seen                 uint32                      `json:"seen,omitempty"`
	AppOperation         *jsonOperation              `json:"app_operation,omitempty"`
	AppParentContext     *jsonContext                `json:"app_parent_context,omitempty"`
	AppInitiator         *jsonActor                  `json:"app_initiator,omitempty"`
	AppTarget            *jsonActor                  `json:"app_target,omitempty"`
	HTTPRequest          *jsonHTTP                   `json:"http_request,omitempty"`
	ExtendedProxyRequest *sflow.ExtendedProxyRequest `json:"extended_proxy_request,omitempty"`
	ExtendedSocketIPv4   *jsonSocket                 `json:"extended_socket_ipv4,omitempty"`
	ExtendedSocketIPv6   *jsonSocket                 `json:"extended_socket_ipv6,omitempty"`
}

type jsonOperation struct {
	Operation   string `json:"operation,omitempty"`
	Attributes  string `json:"attributes,omitempty"`
	StatusDescr string `json:"status_descr,omitempty"`
	Status      uint32 `json:"status"`
	ReqBytes    uint64 `json:"req_bytes"`
	RespBytes   uint64 `json:"resp_bytes"`
	US          uint32 `json:"uS"`
}

type jsonContext struct {
	Application string `json:"application"`
	Operation   string `json:"operation"`
	Attributes  string `json:"attributes"`
}

type jsonActor struct {
	Actor string `json:"actor"`
}

type jsonHTTP struct {
	Method    string `json:"method"`
	Protocol  uint32 `json:"protocol"`
	URI       string `json:"uri"`
	Host      string `json:"host,omitempty"`
	Referer   string `json:"referer,omitempty"`
	UserAgent string `json:"useragent,omitempty"`
	XFF       string `json:"xff,omitempty"`
	AuthUser  string `json:"authuser,omitempty"`
	MimeType  string `json:"mime_type,omitempty"`
	ReqBytes  uint64 `json:"req_bytes"`
	RespBytes uint64 `json:"resp_bytes"`
	US        uint32 `json:"uS"`
	Status    int32  `json:"status"`
}

type jsonSocket struct {
	Protocol   uint32 `json:"protocol"`
	LocalIP    string `json:"local_ip"`
	RemoteIP   string `json:"remote_ip"`
	LocalPort  uint32 `json:"local_port"`
	RemotePort uint32 `json:"remote_port"`
}

type jsonCounters struct {
	AppName       *string             `json:"app_name"`
	ServicePort   *uint32             `json:"service_port,omitempty"`
	AppOperations *jsonStatusCounts   `json:"app_operations,omitempty"`
	AppResources  *sflow.AppResources `json:"app_resources,omitempty"`
	AppWorkers    *jsonWorkers        `json:"app_workers,omitempty"`
	HTTPCounters  *sflow.HTTPCounters `json:"http_counters,omitempty"`
}

// maxMethodName bounds the http_request method string.
const maxMethodName = 32

// Message is one parsed API message: exactly one of Flow, Counters,
// RTMetric and RTFlow.
type Message struct {
	Flow     *FlowSample
	Counters *CounterSample
	RTMetric *sflow.RTMetricSample
	RTFlow   *sflow.RTFlowSample
}

// ParseJSON parses and validates one API message. It is strict: the
// message must be one JSON object of at most MaxMessageSize bytes, with
// no unknown field, every value of its field's type and range, and strings
// within the spec's lengths. Errors are *RejectError.
func ParseJSON(b []byte) (Message, error) {
	if len(b) > MaxMessageSize {
		return Message{}, reject(ReasonTooLarge, "message of %d bytes, at most %d allowed", len(b), MaxMessageSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m jsonMessage
	if err := dec.Decode(&m); err != nil {
		return Message{}, classifyJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Message{}, reject(ReasonNotJSON, "data after the JSON object")
	}
	kinds := 0
	for _, present := range []bool{m.FlowSample != nil, m.CounterSample != nil, m.CountersSample != nil, m.RTMetric != nil, m.RTFlow != nil} {
		if present {
			kinds++
		}
	}
	if kinds != 1 {
		return Message{}, reject(ReasonBadMessage, "a message holds exactly one of flow_sample, counter_sample (or counters_sample), rtmetric and rtflow")
	}
	switch {
	case m.FlowSample != nil:
		f, err := m.FlowSample.sample()
		if err != nil {
			return Message{}, err
		}
		if err := f.Validate(); err != nil {
			return Message{}, err
		}
		return Message{Flow: f}, nil
	case m.RTMetric != nil:
		s, err := parseRTMetric(m.RTMetric)
		return Message{RTMetric: s}, err
	case m.RTFlow != nil:
		s, err := parseRTFlow(m.RTFlow)
		return Message{RTFlow: s}, err
	}
	jc := m.CounterSample
	if jc == nil {
		jc = m.CountersSample
	}
	c, err := jc.sample()
	if err != nil {
		return Message{}, err
	}
	if err := c.Validate(); err != nil {
		return Message{}, err
	}
	return Message{Counters: c}, nil
}

// classifyJSONError maps encoding/json's errors to rejection reasons.
func classifyJSONError(err error) *RejectError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Type != nil && isNumericKind(te.Type.Kind()) && strings.HasPrefix(te.Value, "number") {
			return reject(ReasonOutOfRange, "%s: %s does not fit %v", te.Field, te.Value, te.Type)
		}
		return reject(ReasonWrongType, "%s: %s where %v expected", te.Field, te.Value, te.Type)
	}
	// encoding/json reports unknown fields with an untyped error.
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return reject(ReasonUnknownField, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return reject(ReasonNotJSON, "%v", err)
}

func isNumericKind(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Float64
}

// appHeader returns the application's name and service port; an absent
// service_port is 0: the application is identified by its name alone (as
// in the host agent, whose modules send no port).
func appHeader(name *string, port *uint32) (string, uint16, error) {
	if name == nil {
		return "", 0, reject(ReasonMissingField, "app_name is missing")
	}
	if port == nil {
		return *name, 0, nil
	}
	if *port == 0 || *port > 65535 {
		return "", 0, reject(ReasonOutOfRange, "service_port %d: must be 1..65535", *port)
	}
	return *name, uint16(*port), nil
}

func (j *jsonFlow) sample() (*FlowSample, error) {
	name, port, err := appHeader(j.AppName, j.ServicePort)
	if err != nil {
		return nil, err
	}
	f := &FlowSample{AppName: name, ServicePort: port, Client: j.Client, IfIndex: j.IfIndex, SamplingRate: 1, Seen: j.Seen}
	if j.SamplingRate != nil {
		f.SamplingRate = *j.SamplingRate
	}
	if o := j.AppOperation; o != nil {
		f.Operation = &sflow.AppOperation{
			Context:     sflow.AppContext{Application: name, Operation: o.Operation, Attributes: o.Attributes},
			StatusDescr: o.StatusDescr, ReqBytes: o.ReqBytes, RespBytes: o.RespBytes,
			DurationUS: o.US, Status: sflow.AppStatus(o.Status),
		}
	}
	if c := j.AppParentContext; c != nil {
		f.ParentContext = &sflow.AppParentContext{Context: sflow.AppContext(*c)}
	}
	if a := j.AppInitiator; a != nil {
		f.Initiator = &sflow.AppInitiator{Actor: a.Actor}
	}
	if a := j.AppTarget; a != nil {
		f.Target = &sflow.AppTarget{Actor: a.Actor}
	}
	if h := j.HTTPRequest; h != nil {
		if h.Method == "" {
			return nil, reject(ReasonMissingField, "http_request.method is empty")
		}
		if len(h.Method) > maxMethodName {
			return nil, reject(ReasonStringTooLong, "http_request.method is %d bytes, at most %d allowed", len(h.Method), maxMethodName)
		}
		f.HTTP = &sflow.HTTPRequest{
			Method: MethodFromString(h.Method), Protocol: h.Protocol,
			URI: h.URI, Host: h.Host, Referer: h.Referer, UserAgent: h.UserAgent,
			XFF: h.XFF, AuthUser: h.AuthUser, MimeType: h.MimeType,
			ReqBytes: h.ReqBytes, RespBytes: h.RespBytes, DurationUS: h.US, Status: h.Status,
		}
	}
	f.ProxyRequest = j.ExtendedProxyRequest
	if s := j.ExtendedSocketIPv4; s != nil {
		local, remote, err := s.addrs("extended_socket_ipv4")
		if err != nil {
			return nil, err
		}
		f.Socket4 = &sflow.ExtendedSocketIPv4{Protocol: s.Protocol, LocalIP: local, RemoteIP: remote, LocalPort: s.LocalPort, RemotePort: s.RemotePort}
	}
	if s := j.ExtendedSocketIPv6; s != nil {
		local, remote, err := s.addrs("extended_socket_ipv6")
		if err != nil {
			return nil, err
		}
		f.Socket6 = &sflow.ExtendedSocketIPv6{Protocol: s.Protocol, LocalIP: local, RemoteIP: remote, LocalPort: s.LocalPort, RemotePort: s.RemotePort}
	}
	return f, nil
}

// addrs parses the socket's addresses; an empty string is the unknown
// address. Validate checks the families.
func (s *jsonSocket) addrs(name string) (local, remote netip.Addr, err error) {
	parse := func(field, v string) (netip.Addr, error) {
		if v == "" {
			return netip.Addr{}, nil
		}
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, reject(ReasonBadAddress, "%s.%s %q is not an IP address", name, field, truncate(v, 64))
		}
		return a, nil
	}
	if local, err = parse("local_ip", s.LocalIP); err != nil {
		return
	}
	remote, err = parse("remote_ip", s.RemoteIP)
	return
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (j *jsonCounters) sample() (*CounterSample, error) {
	name, port, err := appHeader(j.AppName, j.ServicePort)
	if err != nil {
		return nil, err
	}
	c := &CounterSample{AppName: name, ServicePort: port, Resources: j.AppResources, Workers: (*sflow.AppWorkers)(j.AppWorkers), HTTP: j.HTTPCounters}
	if o := j.AppOperations; o != nil {
		c.Operations = &sflow.AppOperations{Application: name, AppStatusCounts: sflow.AppStatusCounts(*o)}
	}
	return c, nil
}

// MethodFromString returns the http_method of an HTTP method name
// (sflow_http.txt: OPTIONS, GET, HEAD, POST, PUT, DELETE, TRACE, CONNECT;
// any other method is OTHER).
func MethodFromString(m string) sflow.HTTPMethod {
	switch m {
	case "GET":
		return sflow.HTTPMethodGet
	case "POST":
		return sflow.HTTPMethodPost
	case "HEAD":
		return sflow.HTTPMethodHead
	case "PUT":
		return sflow.HTTPMethodPut
	case "DELETE":
		return sflow.HTTPMethodDelete
	case "OPTIONS":
		return sflow.HTTPMethodOptions
	case "TRACE":
		return sflow.HTTPMethodTrace
	case "CONNECT":
		return sflow.HTTPMethodConnect
	}
	return sflow.HTTPMethodOther
}

// AppendFlowJSON appends f as an API message. Fields the API cannot carry
// are dropped: an unknown http_method value is sent as OTHER, and
// app_operation's context.application is app_name.
func AppendFlowJSON(b []byte, f *FlowSample) ([]byte, error) {
	name := f.AppName
	rate := f.SamplingRate
	j := &jsonFlow{AppName: &name, ServicePort: optPort(f.ServicePort), Client: f.Client, IfIndex: f.IfIndex, SamplingRate: &rate, Seen: f.Seen}
	if o := f.Operation; o != nil {
		j.AppOperation = &jsonOperation{Operation: o.Context.Operation, Attributes: o.Context.Attributes,
			StatusDescr: o.StatusDescr, Status: uint32(o.Status), ReqBytes: o.ReqBytes, RespBytes: o.RespBytes, US: o.DurationUS}
	}
	if p := f.ParentContext; p != nil {
		c := jsonContext(p.Context)
		j.AppParentContext = &c
	}
	if a := f.Initiator; a != nil {
		j.AppInitiator = &jsonActor{Actor: a.Actor}
	}
	if a := f.Target; a != nil {
		j.AppTarget = &jsonActor{Actor: a.Actor}
	}
	if h := f.HTTP; h != nil {
		m := h.Method
		if m > sflow.HTTPMethodConnect {
			m = sflow.HTTPMethodOther
		}
		j.HTTPRequest = &jsonHTTP{Method: m.String(), Protocol: h.Protocol, URI: h.URI, Host: h.Host,
			Referer: h.Referer, UserAgent: h.UserAgent, XFF: h.XFF, AuthUser: h.AuthUser, MimeType: h.MimeType,
			ReqBytes: h.ReqBytes, RespBytes: h.RespBytes, US: h.DurationUS, Status: h.Status}
	}
	j.ExtendedProxyRequest = f.ProxyRequest
	if s := f.Socket4; s != nil {
		j.ExtendedSocketIPv4 = &jsonSocket{Protocol: s.Protocol, LocalIP: addrString(s.LocalIP), RemoteIP: addrString(s.RemoteIP), LocalPort: s.LocalPort, RemotePort: s.RemotePort}
	}
	if s := f.Socket6; s != nil {
		j.ExtendedSocketIPv6 = &jsonSocket{Protocol: s.Protocol, LocalIP: addrString(s.LocalIP), RemoteIP: addrString(s.RemoteIP), LocalPort: s.LocalPort, RemotePort: s.RemotePort}
	}
	return appendJSON(b, &jsonMessage{FlowSample: j})
}

// AppendCountersJSON appends c as an API message.
func AppendCountersJSON(b []byte, c *CounterSample) ([]byte, error) {
	name := c.AppName
	j := &jsonCounters{AppName: &name, ServicePort: optPort(c.ServicePort), AppResources: c.Resources, AppWorkers: (*jsonWorkers)(c.Workers), HTTPCounters: c.HTTP}
	if o := c.Operations; o != nil {
		j.AppOperations = (*jsonStatusCounts)(&o.AppStatusCounts)
	}
	return appendJSON(b, &jsonMessage{CounterSample: j})
}

// optPort is the service_port of a message: absent when 0 (none).
func optPort(p uint16) *uint32 {
	if p == 0 {
		return nil
	}
	v := uint32(p)
	return &v
}

func appendJSON(b []byte, m *jsonMessage) ([]byte, error) {
	out, err := json.Marshal(m)
	if err != nil {
		return b, fmt.Errorf("app: encode JSON message: %w", err)
	}
	return append(b, out...), nil
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
