package app

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The host agent's custom-metric messages (hsflowd mod_json.c,
// readJSON_rtmetric and readJSON_rtflow):
//
//	{"rtmetric":{"datasource":"web1",
//	  "metric1":{"type":"counter32","value":777},
//	  "metric2":{"type":"string","value":"helloworld"}}}
//
//	{"rtflow":{"datasource":"web1","sampling_rate":1,
//	  "field1":{"type":"int32","value":777},
//	  "field3":{"type":"mac","value":"020304050607"}}}
//
// Metrics and fields are encoded in message order. The host agent's rules
// are kept: names of letters, digits, '-' and '_', at most 64 bytes; a
// data source name does not start with a digit (numeric data sources are
// sFlow's own); string values at most 255 bytes. Unlike the host agent,
// which skips what it does not understand and may send a metric without
// its value (a numeric value given to a "string" metric), every defect
// rejects the whole message, counted by reason.

// rtName checks a metric, field or data source name.
func rtName(what, s string, datasource bool) error {
	if s == "" {
		return reject(ReasonBadName, "%s name is empty", what)
	}
	if len(s) > sflow.MaxRTNameLen {
		return reject(ReasonStringTooLong, "%s name is %d bytes, at most %d allowed", what, len(s), sflow.MaxRTNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return reject(ReasonBadName, "%s name %q: only letters, digits, '-' and '_' allowed", what, truncate(s, 64))
		}
	}
	if datasource && s[0] >= '0' && s[0] <= '9' {
		return reject(ReasonBadName, "datasource name %q must not start with a digit", s)
	}
	return nil
}

// rtMember is one member of an rtmetric/rtflow object, in order.
type rtMember struct {
	key string
	raw json.RawMessage
}

// rtMembers reads a JSON object's members in order (encoding/json's maps
// lose it), refusing duplicates.
func rtMembers(what string, b []byte) ([]rtMember, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, reject(ReasonNotJSON, "%s: %v", what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, reject(ReasonWrongType, "%s is not an object", what)
	}
	var ms []rtMember
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, reject(ReasonNotJSON, "%s: %v", what, err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, reject(ReasonNotJSON, "%s.%s: %v", what, truncate(key, 64), err)
		}
		if seen[key] {
			return nil, reject(ReasonBadMessage, "%s: %q appears twice", what, truncate(key, 64))
		}
		seen[key] = true
		ms = append(ms, rtMember{key: key, raw: raw})
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return nil, reject(ReasonNotJSON, "%s: %v", what, err)
	}
	return ms, nil
}

// rtTyped is a metric or field: {"type": ..., "value": ...}.
type rtTyped struct {
	Type  *string         `json:"type"`
	Value json.RawMessage `json:"value"`
}

func (t *rtTyped) parse(what string, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(t); err != nil {
		return classifyJSONError(err)
	}
	if t.Type == nil {
		return reject(ReasonMissingField, "%s: type is missing", what)
	}
	if t.Value == nil || string(t.Value) == "null" {
		return reject(ReasonMissingField, "%s: value is missing", what)
	}
	return nil
}

// rtValue is a JSON value: a string or a number (text).
type rtValue struct {
	str   string
	num   string
	isStr bool
}

func parseRTValue(what string, raw json.RawMessage) (rtValue, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return rtValue{}, reject(ReasonNotJSON, "%s: %v", what, err)
		}
		if len(s) > sflow.MaxRTValueLen {
			return rtValue{}, reject(ReasonStringTooLong, "%s: value is %d bytes, at most %d allowed", what, len(s), sflow.MaxRTValueLen)
		}
		return rtValue{str: s, isStr: true}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return rtValue{}, reject(ReasonNotJSON, "%s: %v", what, err)
	}
	n, ok := v.(json.Number)
	if !ok {
		return rtValue{}, reject(ReasonWrongType, "%s: value must be a number or a string", what)
	}
	return rtValue{num: n.String()}, nil
}

// uint parses an integer value of at most bits bits: a JSON number, or a
// string holding one (the host agent reads strings with strtoul/strtoull,
// base 0, so "0x1f" is accepted too).
func (v rtValue) uint(what string, bits int) (uint64, error) {
	s := v.num
	base := 10
	if v.isStr {
		s, base = strings.TrimSpace(v.str), 0
	}
	u, err := strconv.ParseUint(s, base, bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, reject(ReasonOutOfRange, "%s: %s does not fit %d bits", what, truncate(s, 32), bits)
		}
		if !v.isStr {
			return 0, reject(ReasonOutOfRange, "%s: %s is not a non-negative integer", what, truncate(s, 32))
		}
		return 0, reject(ReasonWrongType, "%s: %q is not an integer", what, truncate(s, 32))
	}
	return u, nil
}

// float parses a floating-point value (a number or a numeric string).
func (v rtValue) float(what string, bits int) (float64, error) {
	s := v.num
	if v.isStr {
		s = strings.TrimSpace(v.str)
	}
	f, err := strconv.ParseFloat(s, bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, reject(ReasonOutOfRange, "%s: %s does not fit a %d-bit float", what, truncate(s, 32), bits)
		}
		return 0, reject(ReasonWrongType, "%s: %q is not a number", what, truncate(s, 32))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, reject(ReasonOutOfRange, "%s: %s is not a finite number", what, truncate(s, 32))
	}
	return f, nil
}

func (v rtValue) string(what string) (string, error) {
	if !v.isStr {
		return "", reject(ReasonWrongType, "%s: a string value is required", what)
	}
	return v.str, nil
}

// parseRTMetric parses the object of an rtmetric message.
func parseRTMetric(b []byte) (*sflow.RTMetricSample, error) {
	ms, err := rtMembers("rtmetric", b)
	if err != nil {
		return nil, err
	}
	s := &sflow.RTMetricSample{}
	for _, m := range ms {
		if m.key == "datasource" {
			if s.Datasource, err = rtDatasource(m.raw); err != nil {
				return nil, err
			}
			continue
		}
		v, err := rtMetricValue(m)
		if err != nil {
			return nil, err
		}
		s.Metrics = append(s.Metrics, v)
	}
	if len(s.Metrics) == 0 {
		return nil, reject(ReasonMissingField, "rtmetric has no metric")
	}
	return s, nil
}

func rtDatasource(raw json.RawMessage) (string, error) {
	var ds string
	if err := json.Unmarshal(raw, &ds); err != nil {
		return "", reject(ReasonWrongType, "datasource must be a string")
	}
	return ds, rtName("datasource", ds, true)
}

func rtMetricValue(m rtMember) (sflow.RTValue, error) {
	what := "rtmetric " + truncate(m.key, 64)
	if err := rtName("rtmetric", m.key, false); err != nil {
		return sflow.RTValue{}, err
	}
	var t rtTyped
	if err := t.parse(what, m.raw); err != nil {
		return sflow.RTValue{}, err
	}
	typ, ok := sflow.ParseRTMetricType(*t.Type)
	if !ok {
		return sflow.RTValue{}, reject(ReasonOutOfRange, "%s: type %q is not one of string, counter32, counter64, gauge32, gauge64, gaugeFloat, gaugeDouble", what, truncate(*t.Type, 32))
	}
	val, err := parseRTValue(what, t.Value)
	if err != nil {
		return sflow.RTValue{}, err
	}
	v := sflow.RTValue{Name: m.key, Type: uint32(typ)}
	switch typ {
	case sflow.RTMetricString:
		v.Str, err = val.string(what)
	case sflow.RTMetricCounter32, sflow.RTMetricGauge32:
		v.Uint, err = val.uint(what, 32)
	case sflow.RTMetricCounter64, sflow.RTMetricGauge64:
		v.Uint, err = val.uint(what, 64)
	case sflow.RTMetricGaugeFloat:
		v.Float, err = val.float(what, 32)
	case sflow.RTMetricGaugeDouble:
		v.Float, err = val.float(what, 64)
	}
	return v, err
}

// parseRTFlow parses the object of an rtflow message.
func parseRTFlow(b []byte) (*sflow.RTFlowSample, error) {
	ms, err := rtMembers("rtflow", b)
	if err != nil {
		return nil, err
	}
	s := &sflow.RTFlowSample{SamplingRate: 1}
	for _, m := range ms {
		switch m.key {
		case "datasource":
			if s.Datasource, err = rtDatasource(m.raw); err != nil {
				return nil, err
			}
			continue
		case "sampling_rate":
			var r uint32
			if err := json.Unmarshal(m.raw, &r); err != nil {
				return nil, classifyJSONError(err)
			}
			if r == 0 {
				return nil, reject(ReasonOutOfRange, "rtflow sampling_rate 0: must be at least 1")
			}
			s.SamplingRate = r
			continue
		}
		v, err := rtFlowValue(m)
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, v)
	}
	if len(s.Fields) == 0 {
		return nil, reject(ReasonMissingField, "rtflow has no field")
	}
	return s, nil
}

func rtFlowValue(m rtMember) (sflow.RTValue, error) {
	what := "rtflow " + truncate(m.key, 64)
	if err := rtName("rtflow", m.key, false); err != nil {
		return sflow.RTValue{}, err
	}
	var t rtTyped
	if err := t.parse(what, m.raw); err != nil {
		return sflow.RTValue{}, err
	}
	typ, ok := sflow.ParseRTFlowType(*t.Type)
	if !ok {
		return sflow.RTValue{}, reject(ReasonOutOfRange, "%s: type %q is not one of string, mac, ip, ip6, int32, int64, float, double", what, truncate(*t.Type, 32))
	}
	val, err := parseRTValue(what, t.Value)
	if err != nil {
		return sflow.RTValue{}, err
	}
	v := sflow.RTValue{Name: m.key, Type: uint32(typ)}
	switch typ {
	case sflow.RTFlowString:
		v.Str, err = val.string(what)
	case sflow.RTFlowMAC:
		var s string
		if s, err = val.string(what); err == nil {
			v.MAC, err = parseRTMAC(what, s)
		}
	case sflow.RTFlowIP, sflow.RTFlowIP6:
		var s string
		if s, err = val.string(what); err == nil {
			a, perr := netip.ParseAddr(s)
			if perr != nil || a.Zone() != "" || (typ == sflow.RTFlowIP) != a.Is4() {
				return v, reject(ReasonBadAddress, "%s: %q is not an %s address", what, truncate(s, 64), map[bool]string{true: "IPv4", false: "IPv6"}[typ == sflow.RTFlowIP])
			}
			v.Addr = a
		}
	case sflow.RTFlowInt32:
		v.Uint, err = val.uint(what, 32)
	case sflow.RTFlowInt64:
		v.Uint, err = val.uint(what, 64)
	case sflow.RTFlowFloat:
		v.Float, err = val.float(what, 32)
	case sflow.RTFlowDouble:
		v.Float, err = val.float(what, 64)
	}
	return v, err
}

// parseRTMAC reads a MAC address as the host agent does: 12 hex digits,
// optionally separated by '.', '-' or ':'.
func parseRTMAC(what, s string) ([6]byte, error) {
	var m [6]byte
	digits := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == ':' {
			return -1
		}
		return r
	}, s)
	b, err := hex.DecodeString(digits)
	if err != nil || len(b) != 6 {
		return m, reject(ReasonBadAddress, "%s: %q is not a MAC address (12 hex digits)", what, truncate(s, 64))
	}
	copy(m[:], b)
	return m, nil
}
