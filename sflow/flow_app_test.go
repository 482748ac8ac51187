package sflow

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
)

// Golden record bodies below are written field by field from
// spec/sflow_host.txt (2100, 2101), spec/sflow_http.txt (2102, 2103, 2206,
// 2207) and spec/sflow_application.txt (2202-2205).

func TestExtendedSocketIPv4Golden(t *testing.T) {
	s := ExtendedSocketIPv4{Protocol: 6, LocalIP: netip.MustParseAddr("198.18.0.1"), RemoteIP: netip.MustParseAddr("198.18.0.2"),
		LocalPort: 80, RemotePort: 40000}
	body := `
		00000006 // protocol TCP
		c6120001 // local_ip 198.18.0.1
		c6120002 // remote_ip 198.18.0.2
		00000050 // local_port 80
		00009c40 // remote_port 40000`
	checkRecordGolden(t, &s, unhex(t, body), true)
	// extended_proxy_socket_ipv4 is { extended_socket_ipv4 socket; }.
	checkRecordGolden(t, &ExtendedProxySocketIPv4{Socket: s}, unhex(t, body), true)
}

func TestExtendedSocketIPv6Golden(t *testing.T) {
	s := ExtendedSocketIPv6{Protocol: 17, LocalIP: netip.MustParseAddr("2001:db8::1"), RemoteIP: netip.MustParseAddr("2001:db8::2"),
		LocalPort: 53, RemotePort: 5353}
	body := `
		00000011                         // protocol UDP
		20010db8000000000000000000000001 // local_ip 2001:db8::1
		20010db8000000000000000000000002 // remote_ip 2001:db8::2
		00000035                         // local_port 53
		000014e9                         // remote_port 5353`
	checkRecordGolden(t, &s, unhex(t, body), true)
	checkRecordGolden(t, &ExtendedProxySocketIPv6{Socket: s}, unhex(t, body), true)
}

func TestAppOperationGolden(t *testing.T) {
	rec := &AppOperation{
		Context:     AppContext{Application: "mail.smtp", Operation: "send"},
		StatusDescr: "unknown client",
		ReqBytes:    1024, RespBytes: 1 << 32, DurationUS: 1500, Status: AppStatusTimeout,
	}
	checkRecordGolden(t, rec, unhex(t, `
		00000009                     // context.application length 9
		6d61696c2e736d7470 000000    // "mail.smtp" + padding
		00000004                     // context.operation length 4
		73656e64                     // "send"
		00000000                     // context.attributes "" (unknown)
		0000000e                     // status_descr length 14
		756e6b6e6f776e20636c69656e74 // "unknown client"
		0000                         // padding
		0000000000000400             // req_bytes 1024
		0000000100000000             // resp_bytes 2^32
		000005dc                     // uS 1500
		00000002                     // status TIMEOUT`), true)
}

func TestAppParentContextGolden(t *testing.T) {
	rec := &AppParentContext{Context: AppContext{Application: "db.oracle", Operation: "get.customer.name", Attributes: "cc=visa&loc=mobile"}}
	checkRecordGolden(t, rec, unhex(t, `
		00000009                             // application length 9
		64622e6f7261636c65 000000            // "db.oracle" + padding
		00000011                             // operation length 17
		6765742e637573746f6d65722e6e616d65 000000 // "get.customer.name" + padding
		00000012                             // attributes length 18
		63633d7669736126 6c6f633d6d6f62696c65 0000 // "cc=visa&loc=mobile" + padding`), true)
}

func TestAppInitiatorTargetGolden(t *testing.T) {
	checkRecordGolden(t, &AppInitiator{Actor: "customer-1"}, unhex(t, `
		0000000a             // actor length 10
		637573746f6d65722d31 // "customer-1"
		0000                 // padding`), true)
	checkRecordGolden(t, &AppTarget{Actor: "merchant-77"}, unhex(t, `
		0000000b               // actor length 11
		6d65726368616e742d3737 // "merchant-77"
		00                     // padding`), true)
}

func TestHTTPRequestGolden(t *testing.T) {
	rec := &HTTPRequest{
		Method: HTTPMethodPost, Protocol: 2000, URI: "/a", Host: "h.example", UserAgent: "ua",
		XFF: "198.18.0.9", AuthUser: "bob", MimeType: "text/plain",
		ReqBytes: 0, RespBytes: 0x0123456789, DurationUS: 250, Status: 503,
	}
	checkRecordGolden(t, rec, unhex(t, `
		00000004                // method POST
		000007d0                // protocol 2000 (HTTP/2.0)
		00000002 2f61 0000      // uri "/a" + padding
		00000009                // host length 9
		682e6578616d706c65 000000 // "h.example" + padding
		00000000                // referer "" (unknown)
		00000002 7561 0000      // useragent "ua" + padding
		0000000a                // xff length 10
		3139382e31382e302e39 0000 // "198.18.0.9" + padding
		00000003 626f62 00      // authuser "bob" + padding
		0000000a                // mime-type length 10
		746578742f706c61696e 0000 // "text/plain" + padding
		0000000000000000        // req_bytes 0
		0000000123456789        // resp_bytes
		000000fa                // uS 250
		000001f7                // status 503`), true)

	// status is an XDR int: a negative value is two's complement.
	neg := &HTTPRequest{Method: HTTPMethodOther, Status: -1}
	checkRecordGolden(t, neg, unhex(t, `
		00000000 // method OTHER
		00000000 // protocol unknown
		00000000 // uri ""
		00000000 // host ""
		00000000 // referer ""
		00000000 // useragent ""
		00000000 // xff ""
		00000000 // authuser ""
		00000000 // mime-type ""
		0000000000000000 // req_bytes
		0000000000000000 // resp_bytes
		00000000 // uS
		ffffffff // status -1`), true)
}

func TestExtendedProxyRequestGolden(t *testing.T) {
	checkRecordGolden(t, &ExtendedProxyRequest{URI: "/backend", Host: "b:8080"}, unhex(t, `
		00000008         // uri length 8
		2f6261636b656e64 // "/backend"
		00000006         // host length 6
		623a38303830     // "b:8080"
		0000             // padding`), true)
}

// TestFlowAppStringTruncation checks that strings longer than the spec's
// maximum are cut on encode (at a UTF-8 boundary) and refused on decode.
func TestFlowAppStringTruncation(t *testing.T) {
	uri := strings.Repeat("a", 300)
	host := strings.Repeat("h", 63) + "é" // 65 bytes; string<64> cannot split the é
	want := unhex(t, `000000ff // uri length 255 (string<255>)`)
	want = append(want, strings.Repeat("a", 255)...)
	want = append(want, 0) // padding
	want = append(want, unhex(t, `0000003f // host length 63: the 2-byte é does not fit in 64`)...)
	want = append(want, strings.Repeat("h", 63)...)
	want = append(want, 0) // padding
	checkRecordGolden(t, &ExtendedProxyRequest{URI: uri, Host: host}, want, true)

	// A 33-byte application (utf8string<32>) on the wire is an error.
	body := unhex(t, `00000021`)
	body = append(body, strings.Repeat("x", 33)...)
	body = append(body, 0, 0, 0)
	body = append(body, unhex(t, `00000000 00000000 // operation, attributes`)...)
	_, err := Decode(flowDatagramWithBody(FormatAppParentContext, body))
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("33-byte application: got %v, want ErrTooLong", err)
	}
}

// flowAppToolView renders a decoded application record under sflowtool's
// JSON keys. extended_proxy_request (2207) is not decoded by sflowtool.
func flowAppToolView(rec Record) (map[string]string, bool) {
	u := func(v any) string { return fmt.Sprint(v) }
	socket4 := func(p string, s *ExtendedSocketIPv4) map[string]string {
		return map[string]string{p + "_ip_protocol": u(s.Protocol), p + "_local_ip": s.LocalIP.String(),
			p + "_remote_ip": s.RemoteIP.String(), p + "_local_port": u(s.LocalPort), p + "_remote_port": u(s.RemotePort)}
	}
	socket6 := func(p string, s *ExtendedSocketIPv6) map[string]string {
		return map[string]string{p + "_ip_protocol": u(s.Protocol), p + "_local_ip": flowToolIPv6(s.LocalIP),
			p + "_remote_ip": flowToolIPv6(s.RemoteIP), p + "_local_port": u(s.LocalPort), p + "_remote_port": u(s.RemotePort)}
	}
	switch r := rec.(type) {
	case *ExtendedSocketIPv4:
		return socket4("socket4", r), true
	case *ExtendedSocketIPv6:
		return socket6("socket6", r), true
	case *ExtendedProxySocketIPv4:
		return socket4("proxy_socket4", &r.Socket), true
	case *ExtendedProxySocketIPv6:
		return socket6("proxy_socket6", &r.Socket), true
	case *HTTPRequest:
		return map[string]string{
			"http_method": u(uint32(r.Method)), "http_protocol": u(r.Protocol), "http_uri": r.URI, "http_host": r.Host,
			"http_referrer": r.Referer, "http_useragent": r.UserAgent, "http_xff": r.XFF, "http_authuser": r.AuthUser,
			"http_mimetype": r.MimeType, "http_request_bytes": u(r.ReqBytes), "http_bytes": u(r.RespBytes),
			"http_duration_uS": u(r.DurationUS), "http_status": u(r.Status),
		}, true
	case *AppOperation:
		return map[string]string{
			"application": r.Context.Application, "operation": r.Context.Operation, "attributes": r.Context.Attributes,
			"status_descr": r.StatusDescr, "request_bytes": u(r.ReqBytes), "response_bytes": u(r.RespBytes),
			"duration_uS": u(r.DurationUS), "status": r.Status.String(),
		}, true
	case *AppParentContext:
		return map[string]string{
			"server_context_application": r.Context.Application, "server_context_operation": r.Context.Operation,
			"server_context_attributes": r.Context.Attributes,
		}, true
	case *AppInitiator:
		return map[string]string{"actor_initiator": r.Actor}, true
	case *AppTarget:
		return map[string]string{"actor_target": r.Actor}, true
	}
	return nil, false
}

func TestFlowAppTestdata(t *testing.T) {
	d := checkAgainstFlowTool(t, "flow_app")
	recs := d.Samples[0].(*FlowSample).Records
	want := []DataFormat{FormatHTTPRequest, FormatExtendedSocketIPv4, FormatExtendedSocketIPv6,
		FormatExtendedProxySocketIPv4, FormatExtendedProxySocketIPv6, FormatExtendedProxyRequest,
		FormatAppOperation, FormatAppParentContext, FormatAppInitiator, FormatAppTarget}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, f := range want {
		if recs[i].Format() != f {
			t.Errorf("record %d is %s, want %s", i, recs[i].Format(), f)
		}
	}
	// sflowtool skips 2207 by its length. Hand reading of flow_app.bin at
	// offset 0x17c: format 0x89f (2207), length 0x2c, uri length 0x13
	// "/backend/index.html", host length 0x0d "backend.local".
	p, ok := recs[5].(*ExtendedProxyRequest)
	if !ok || p.URI != "/backend/index.html" || p.Host != "backend.local" {
		t.Errorf("extended_proxy_request = %+v, want uri /backend/index.html host backend.local", recs[5])
	}
}

// TestFlowAppGoflow2FrameSkip checks that goflow2, which does not know the
// host/HTTP/application records, frames them correctly (skips each by its
// length and keeps the body bytes) in a datagram our encoder built.
func TestFlowAppGoflow2FrameSkip(t *testing.T) {
	recs := []Record{
		&HTTPRequest{Method: HTTPMethodGet, Protocol: 1001, URI: "/index.html", Host: "example.com", Status: 200},
		&ExtendedSocketIPv4{Protocol: 6, LocalIP: netip.MustParseAddr("198.18.0.1"), RemoteIP: netip.MustParseAddr("198.18.0.2"), LocalPort: 80, RemotePort: 40000},
		&ExtendedSocketIPv6{Protocol: 6, LocalIP: netip.MustParseAddr("2001:db8::1"), RemoteIP: netip.MustParseAddr("2001:db8::2"), LocalPort: 80, RemotePort: 40000},
		&ExtendedProxySocketIPv4{Socket: ExtendedSocketIPv4{Protocol: 6, LocalPort: 8080}},
		&ExtendedProxySocketIPv6{Socket: ExtendedSocketIPv6{Protocol: 6, LocalPort: 8080}},
		&ExtendedProxyRequest{URI: "/b", Host: "backend"},
		&AppOperation{Context: AppContext{Application: "payment", Operation: "charge"}, Status: AppStatusNotFound},
		&AppParentContext{Context: AppContext{Application: "web"}},
		&AppInitiator{Actor: "c-1"},
		&AppTarget{Actor: "m-2"},
		&ExtendedSwitch{SrcVLAN: 1, DstVLAN: 2}, // a known record after them proves the framing
	}
	s := &FlowSample{SequenceNumber: 5, Source: DataSource{SourceEntLogicalEntry, 8080}, SamplingRate: 100, SamplePool: 1000,
		Output: IfIndex(IfIndexInternal), Records: recs}
	d := &Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SubAgentID: 8080, SequenceNumber: 1, Samples: []Sample{s}}
	p := goflowDecode(t, d.AppendXDR(nil))
	fs, ok := p.Samples[0].(goflow.FlowSample)
	if !ok || fs.Header.SourceIdType != SourceEntLogicalEntry || fs.Header.SourceIdValue != 8080 || fs.Output != IfIndexInternal {
		t.Fatalf("goflow2 sample %+v", p.Samples[0])
	}
	if len(fs.Records) != len(recs) {
		t.Fatalf("goflow2 read %d records, want %d", len(fs.Records), len(recs))
	}
	for i, gr := range fs.Records[:len(recs)-1] {
		raw, ok := gr.Data.(goflow.RawRecord)
		if !ok || gr.Header.DataFormat != uint32(recs[i].Format()) || !bytes.Equal(raw.Data, recs[i].AppendXDR(nil)) {
			t.Errorf("record %d (%s): goflow2 %d %+v", i, recs[i].Name(), gr.Header.DataFormat, gr.Data)
		}
	}
	if sw, ok := fs.Records[len(recs)-1].Data.(goflow.ExtendedSwitch); !ok || sw.SrcVlan != 1 || sw.DstVlan != 2 {
		t.Errorf("extended_switch after the application records: %+v", fs.Records[len(recs)-1].Data)
	}
}

func TestAppEnumNames(t *testing.T) {
	for s, want := range map[AppStatus]string{AppStatusSuccess: "SUCCESS", AppStatusUnauthorized: "UNAUTHORIZED", 42: "42"} {
		if s.String() != want {
			t.Errorf("AppStatus(%d) = %q, want %q", uint32(s), s.String(), want)
		}
	}
	for m, want := range map[HTTPMethod]string{HTTPMethodOther: "OTHER", HTTPMethodConnect: "CONNECT", 9: "9"} {
		if m.String() != want {
			t.Errorf("HTTPMethod(%d) = %q, want %q", uint32(m), m.String(), want)
		}
	}
}
