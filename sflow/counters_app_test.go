package sflow

import (
	"errors"
	"strings"
	"testing"
)

func ctrTestHTTPCounters() *HTTPCounters {
	h := &HTTPCounters{}
	for i, p := range h.fields() {
		*p = 0x31 + uint32(i)
	}
	return h
}

func ctrTestAppOperations() *AppOperations {
	return &AppOperations{
		Application: "mail.smtp",
		AppStatusCounts: AppStatusCounts{
			Success: 0x41, Other: 0x42, Timeout: 0x43, InternalError: 0x44, BadRequest: 0x45,
			Forbidden: 0x46, TooLarge: 0x47, NotImplemented: 0x48, NotFound: 0x49, Unavailable: 0x4a,
			Unauthorized: 0x4b,
		},
	}
}

func ctrTestAppResources() *AppResources {
	return &AppResources{UserTime: 0x51, SystemTime: 0x52, MemUsed: 1<<32 + 3, MemMax: 2<<32 + 4, FDOpen: 0x55, FDMax: 0x56, ConnOpen: 0x57, ConnMax: 0x58}
}

func ctrTestAppWorkers() *AppWorkers {
	return &AppWorkers{WorkersActive: 0x61, WorkersIdle: 0x62, WorkersMax: 0x63, ReqDelayed: 0x64, ReqDropped: 0x65}
}

// ctrAppTestRecords returns one of each HTTP / application counter record.
func ctrAppTestRecords() []Record {
	return []Record{ctrTestHTTPCounters(), ctrTestAppOperations(), ctrTestAppResources(), ctrTestAppWorkers()}
}

func TestHTTPCountersGolden(t *testing.T) {
	rec := &HTTPCounters{
		MethodOptionCount: 0x31, MethodGetCount: 0x32, MethodHeadCount: 0x33, MethodPostCount: 0x34,
		MethodPutCount: 0x35, MethodDeleteCount: 0x36, MethodTraceCount: 0x37, MethodConnectCount: 0x38,
		MethodOtherCount: 0x39, Status1XXCount: 0x3a, Status2XXCount: 0x3b, Status3XXCount: 0x3c,
		Status4XXCount: 0x3d, Status5XXCount: 0x3e, StatusOtherCount: 0x3f,
	}
	checkRecordGolden(t, rec, unhex(t, `
		00000031 // method_option_count
		00000032 // method_get_count
		00000033 // method_head_count
		00000034 // method_post_count
		00000035 // method_put_count
		00000036 // method_delete_count
		00000037 // method_trace_count
		00000038 // method_connect_count
		00000039 // method_other_count
		0000003a // status_1XX_count
		0000003b // status_2XX_count
		0000003c // status_3XX_count
		0000003d // status_4XX_count
		0000003e // status_5XX_count
		0000003f // status_other_count`), false)
}

func TestAppOperationsGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestAppOperations(), unhex(t, `
		00000009 6d61696c 2e736d74 70000000 // application "mail.smtp", 3 bytes padding
		00000041 // success
		00000042 // other
		00000043 // timeout
		00000044 // internal_error
		00000045 // bad_request
		00000046 // forbidden
		00000047 // too_large
		00000048 // not_implemented
		00000049 // not_found
		0000004a // unavailable
		0000004b // unauthorized`), false)

	// application is utf8string<32>: a longer name is cut to 32 bytes
	// without splitting a UTF-8 sequence ("é" is 2 bytes: 31 x "a" + "é"
	// would be 33, so the "é" is dropped).
	long := &AppOperations{Application: strings.Repeat("a", 31) + "é"}
	checkRecordGolden(t, long, unhex(t, `
		0000001f `+strings.Repeat("61", 31)+` 00 // application: 31 bytes + 1 padding
		00000000 00000000 00000000 00000000 00000000 00000000 // success .. forbidden
		00000000 00000000 00000000 00000000 00000000          // too_large .. unauthorized`), false)
}

func TestAppResourcesGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestAppResources(), unhex(t, `
		00000051          // user_time ms
		00000052          // system_time ms
		00000001 00000003 // mem_used
		00000002 00000004 // mem_max
		00000055          // fd_open
		00000056          // fd_max
		00000057          // conn_open
		00000058          // conn_max`), false)
}

func TestAppWorkersGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestAppWorkers(), unhex(t, `
		00000061 // workers_active
		00000062 // workers_idle
		00000063 // workers_max
		00000064 // req_delayed
		00000065 // req_dropped`), false)
}

func TestAppCountersDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		f    DataFormat
		body []byte
		want error
	}{
		{"app_operations application of 33 bytes", FormatAppOperations, append(unhex(t, `00000021`), make([]byte, 36+44)...), ErrTooLong},
		{"app_operations truncated", FormatAppOperations, ctrTestAppOperations().AppendXDR(nil)[:40], ErrShort},
		{"http_counters with a trailing word", FormatHTTPCounters, make([]byte, 64), ErrLength},
		{"app_workers short", FormatAppWorkers, make([]byte, 16), ErrShort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(ctrCounterDatagram(c.f, c.body))
			var de *DecodeError
			if !errors.Is(err, c.want) || !errors.As(err, &de) {
				t.Fatalf("got %v, want a DecodeError wrapping %v", err, c.want)
			}
			t.Log(err)
		})
	}
}

func TestCountersAppTestdata(t *testing.T) {
	ctrCheckTestdata(t, "counters_app")
}

// ctrAppSflowtoolView renders HTTP and application counter records as
// sflowtool does (readCounters_http, readCounters_APP*), or returns nil.
// sflowtool spells one key "http_methd_connect_count".
func ctrAppSflowtoolView(rec Record) map[string]string {
	switch r := rec.(type) {
	case *HTTPCounters:
		return map[string]string{
			"http_method_option_count": ctrU(r.MethodOptionCount),
			"http_method_get_count":    ctrU(r.MethodGetCount),
			"http_method_head_count":   ctrU(r.MethodHeadCount),
			"http_method_post_count":   ctrU(r.MethodPostCount),
			"http_method_put_count":    ctrU(r.MethodPutCount),
			"http_method_delete_count": ctrU(r.MethodDeleteCount),
			"http_method_trace_count":  ctrU(r.MethodTraceCount),
			"http_methd_connect_count": ctrU(r.MethodConnectCount),
			"http_method_other_count":  ctrU(r.MethodOtherCount),
			"http_status_1XX_count":    ctrU(r.Status1XXCount),
			"http_status_2XX_count":    ctrU(r.Status2XXCount),
			"http_status_3XX_count":    ctrU(r.Status3XXCount),
			"http_status_4XX_count":    ctrU(r.Status4XXCount),
			"http_status_5XX_count":    ctrU(r.Status5XXCount),
			"http_status_other_count":  ctrU(r.StatusOtherCount),
		}
	case *AppOperations:
		return map[string]string{
			"application":            r.Application,
			"status_OK":              ctrU(r.Success),
			"errors_OTHER":           ctrU(r.Other),
			"errors_TIMEOUT":         ctrU(r.Timeout),
			"errors_INTERNAL_ERROR":  ctrU(r.InternalError),
			"errors_BAD_REQUEST":     ctrU(r.BadRequest),
			"errors_FORBIDDEN":       ctrU(r.Forbidden),
			"errors_TOO_LARGE":       ctrU(r.TooLarge),
			"errors_NOT_IMPLEMENTED": ctrU(r.NotImplemented),
			"errors_NOT_FOUND":       ctrU(r.NotFound),
			"errors_UNAVAILABLE":     ctrU(r.Unavailable),
			"errors_UNAUTHORIZED":    ctrU(r.Unauthorized),
		}
	case *AppResources:
		return map[string]string{
			"user_time": ctrU(r.UserTime), "system_time": ctrU(r.SystemTime),
			"memory_used": ctrU(r.MemUsed), "memory_max": ctrU(r.MemMax),
			"files_open": ctrU(r.FDOpen), "files_max": ctrU(r.FDMax),
			"connections_open": ctrU(r.ConnOpen), "connections_max": ctrU(r.ConnMax),
		}
	case *AppWorkers:
		return map[string]string{
			"workers_active": ctrU(r.WorkersActive), "workers_idle": ctrU(r.WorkersIdle), "workers_max": ctrU(r.WorkersMax),
			"requests_delayed": ctrU(r.ReqDelayed), "requests_dropped": ctrU(r.ReqDropped),
		}
	}
	return nil
}
