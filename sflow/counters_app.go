package sflow

// Counter record formats of the HTTP and application structures
// (spec/sflow_http.txt, spec/sflow_application.txt). Flow records 2202,
// 2203 and 2206 are different structures (app_operation,
// app_parent_context, http_request): structure numbers are per context.
var (
	FormatHTTPCounters  = Format(0, 2201)
	FormatAppOperations = Format(0, 2202)
	FormatAppResources  = Format(0, 2203)
	FormatAppWorkers    = Format(0, 2206)
)

func init() {
	registerCounter(FormatHTTPCounters, "http_counters", decodeHTTPCounters)
	registerCounter(FormatAppOperations, "app_operations", decodeAppOperations)
	registerCounter(FormatAppResources, "app_resources", decodeAppResources)
	registerCounter(FormatAppWorkers, "app_workers", decodeAppWorkers)
}

// HTTPCounters is http_counters (counter format 2201): counts of HTTP
// requests by method and of responses by status class.
type HTTPCounters struct {
	MethodOptionCount  uint32 `json:"method_option_count"`
	MethodGetCount     uint32 `json:"method_get_count"`
	MethodHeadCount    uint32 `json:"method_head_count"`
	MethodPostCount    uint32 `json:"method_post_count"`
	MethodPutCount     uint32 `json:"method_put_count"`
	MethodDeleteCount  uint32 `json:"method_delete_count"`
	MethodTraceCount   uint32 `json:"method_trace_count"`
	MethodConnectCount uint32 `json:"method_connect_count"`
	MethodOtherCount   uint32 `json:"method_other_count"`
	Status1XXCount     uint32 `json:"status_1XX_count"`
	Status2XXCount     uint32 `json:"status_2XX_count"`
	Status3XXCount     uint32 `json:"status_3XX_count"`
	Status4XXCount     uint32 `json:"status_4XX_count"`
	Status5XXCount     uint32 `json:"status_5XX_count"`
	StatusOtherCount   uint32 `json:"status_other_count"`
}

// Format implements Record.
func (*HTTPCounters) Format() DataFormat { return FormatHTTPCounters }

// Name implements Record.
func (*HTTPCounters) Name() string { return "http_counters" }

// fields returns pointers to the counters in wire order.
func (h *HTTPCounters) fields() [15]*uint32 {
	return [15]*uint32{
		&h.MethodOptionCount, &h.MethodGetCount, &h.MethodHeadCount,
		&h.MethodPostCount, &h.MethodPutCount, &h.MethodDeleteCount,
		&h.MethodTraceCount, &h.MethodConnectCount, &h.MethodOtherCount,
		&h.Status1XXCount, &h.Status2XXCount, &h.Status3XXCount,
		&h.Status4XXCount, &h.Status5XXCount, &h.StatusOtherCount,
	}
}

// AppendXDR implements Record.
func (h *HTTPCounters) AppendXDR(b []byte) []byte {
	for _, p := range h.fields() {
		b = appendUint32(b, *p)
	}
	return b
}

func decodeHTTPCounters(r *reader) Record {
	h := &HTTPCounters{}
	for _, p := range h.fields() {
		*p = r.uint32()
	}
	return h
}

// maxApplicationName is the maximum length of the spec's application type
// (typedef utf8string<32> application).
const maxApplicationName = 32

// AppOperations is app_operations (counter format 2202): counts of the
// application's operations by status code.
type AppOperations struct {
	// Application is the hierarchical application name, '.' separated,
	// most general first (e.g. "mail.smtp"); utf8string<32>, truncated on
	// encoding.
	Application string `json:"application"`
	AppStatusCounts
}

// AppStatusCounts are app_operations' counters: one per value of the
// spec's status enumeration, SUCCESS to UNAUTHORIZED, in wire order. The
// application JSON API reads and writes them as they are (apps/app).
type AppStatusCounts struct {
	Success        uint32 `json:"success"`
	Other          uint32 `json:"other"`
	Timeout        uint32 `json:"timeout"`
	InternalError  uint32 `json:"internal_error"`
	BadRequest     uint32 `json:"bad_request"`
	Forbidden      uint32 `json:"forbidden"`
	TooLarge       uint32 `json:"too_large"`
	NotImplemented uint32 `json:"not_implemented"`
	NotFound       uint32 `json:"not_found"`
	Unavailable    uint32 `json:"unavailable"`
	Unauthorized   uint32 `json:"unauthorized"`
}

// Format implements Record.
func (*AppOperations) Format() DataFormat { return FormatAppOperations }

// Name implements Record.
func (*AppOperations) Name() string { return "app_operations" }

// counts returns pointers to the status counters in wire order.
func (a *AppOperations) counts() [11]*uint32 {
	return [11]*uint32{
		&a.Success, &a.Other, &a.Timeout, &a.InternalError, &a.BadRequest,
		&a.Forbidden, &a.TooLarge, &a.NotImplemented, &a.NotFound,
		&a.Unavailable, &a.Unauthorized,
	}
}

// AppendXDR implements Record.
func (a *AppOperations) AppendXDR(b []byte) []byte {
	b = appendString(b, a.Application, maxApplicationName)
	for _, p := range a.counts() {
		b = appendUint32(b, *p)
	}
	return b
}

func decodeAppOperations(r *reader) Record {
	a := &AppOperations{Application: r.string(maxApplicationName)}
	for _, p := range a.counts() {
		*p = r.uint32()
	}
	return a
}

// AppResources is app_resources (counter format 2203): resources used by
// the application, totals over all its processes and threads (see
// getrusage and getrlimit). The spec gives no unknown values; by the
// sflow_version_5.txt rule an unknown limit or gauge is 0.
type AppResources struct {
	// UserTime is the time spent executing application user instructions
	// in milliseconds.
	UserTime uint32 `json:"user_time"`
	// SystemTime is the time spent in the operating system on behalf of
	// the application in milliseconds.
	SystemTime uint32 `json:"system_time"`
	// MemUsed is the memory used in bytes.
	MemUsed uint64 `json:"mem_used"`
	// MemMax is the maximum memory in bytes.
	MemMax uint64 `json:"mem_max"`
	// FDOpen is the number of open file descriptors.
	FDOpen uint32 `json:"fd_open"`
	// FDMax is the maximum number of file descriptors.
	FDMax uint32 `json:"fd_max"`
	// ConnOpen is the number of open network connections.
	ConnOpen uint32 `json:"conn_open"`
	// ConnMax is the maximum number of network connections.
	ConnMax uint32 `json:"conn_max"`
}

// Format implements Record.
func (*AppResources) Format() DataFormat { return FormatAppResources }

// Name implements Record.
func (*AppResources) Name() string { return "app_resources" }

// AppendXDR implements Record.
func (a *AppResources) AppendXDR(b []byte) []byte {
	b = appendUint32(b, a.UserTime)
	b = appendUint32(b, a.SystemTime)
	b = appendUint64(b, a.MemUsed)
	b = appendUint64(b, a.MemMax)
	b = appendUint32(b, a.FDOpen)
	b = appendUint32(b, a.FDMax)
	b = appendUint32(b, a.ConnOpen)
	return appendUint32(b, a.ConnMax)
}

func decodeAppResources(r *reader) Record {
	return &AppResources{
		UserTime:   r.uint32(),
		SystemTime: r.uint32(),
		MemUsed:    r.uint64(),
		MemMax:     r.uint64(),
		FDOpen:     r.uint32(),
		FDMax:      r.uint32(),
		ConnOpen:   r.uint32(),
		ConnMax:    r.uint32(),
	}
}

// AppWorkers is app_workers (counter format 2206): the application's
// workers (threads, processes, or requests in progress in an asynchronous
// server).
type AppWorkers struct {
	// WorkersActive is the number of active workers.
	WorkersActive uint32 `json:"workers_active"`
	// WorkersIdle is the number of idle workers.
	WorkersIdle uint32 `json:"workers_idle"`
	// WorkersMax is the maximum number of workers.
	WorkersMax uint32 `json:"workers_max"`
	// ReqDelayed counts client requests delayed for lack of resources.
	ReqDelayed uint32 `json:"req_delayed"`
	// ReqDropped counts client requests dropped for lack of resources.
	ReqDropped uint32 `json:"req_dropped"`
}

// Format implements Record.
func (*AppWorkers) Format() DataFormat { return FormatAppWorkers }

// Name implements Record.
func (*AppWorkers) Name() string { return "app_workers" }

// AppendXDR implements Record.
func (a *AppWorkers) AppendXDR(b []byte) []byte {
	b = appendUint32(b, a.WorkersActive)
	b = appendUint32(b, a.WorkersIdle)
	b = appendUint32(b, a.WorkersMax)
	b = appendUint32(b, a.ReqDelayed)
	return appendUint32(b, a.ReqDropped)
}

func decodeAppWorkers(r *reader) Record {
	return &AppWorkers{
		WorkersActive: r.uint32(),
		WorkersIdle:   r.uint32(),
		WorkersMax:    r.uint32(),
		ReqDelayed:    r.uint32(),
		ReqDropped:    r.uint32(),
	}
}
