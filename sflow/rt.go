package sflow

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
)

// Custom-metric samples of the host agent (hsflowd's json module,
// InMon's enterprise 4300): named metrics (rtmetric) and named flow fields
// (rtflow). They are sample_records of their own, beside flow_sample and
// counters_sample, and the reference decoder (sflowtool) reads them as
// sampleType RTMETRIC and RTFLOW. Their layout, as hsflowd writes it and
// sflowtool reads it:
//
//	/* opaque = sample_data; enterprise = 4300; format = 1002 */
//	struct rtmetric {
//	   string datasource<64>;      /* "" = none */
//	   rtmetric_field metrics<>;
//	}
//	struct rtmetric_field {
//	   string name<64>;
//	   unsigned int type;          /* rtmetric types below */
//	   value;                      /* string<255>, unsigned int,
//	                                  unsigned hyper, float or double */
//	}
//
//	/* opaque = sample_data; enterprise = 4300; format = 1003 */
//	struct rtflow {
//	   string datasource<64>;
//	   unsigned int sampling_rate;
//	   unsigned int sample_pool;   /* hsflowd: reserved, 0 */
//	   rtflow_field fields<>;
//	}
//	struct rtflow_field {
//	   string name<64>;
//	   unsigned int type;          /* rtflow types below */
//	   value;                      /* string<255>, mac (6 bytes padded
//	                                  to 8), ip_v4, ip_v6, unsigned int,
//	                                  unsigned hyper, float or double */
//	}
var (
	FormatRTMetric = Format(4300, 1002)
	FormatRTFlow   = Format(4300, 1003)
)

// Length limits of the custom-metric strings (hsflowd's
// HSP_MAX_RTMETRIC_KEY_LEN and HSP_MAX_RTMETRIC_VAL_LEN).
const (
	MaxRTNameLen  = 64
	MaxRTValueLen = 255
)

// RTMetricType is the type of an rtmetric value.
type RTMetricType uint32

// rtmetric value types, in the host agent's numbering.
const (
	RTMetricString RTMetricType = iota
	RTMetricCounter32
	RTMetricCounter64
	RTMetricGauge32
	RTMetricGauge64
	RTMetricGaugeFloat
	RTMetricGaugeDouble
	numRTMetricTypes
)

var rtMetricTypeNames = [numRTMetricTypes]string{
	"string", "counter32", "counter64", "gauge32", "gauge64", "gaugeFloat", "gaugeDouble",
}

// String returns the type's name in the host agent's JSON messages.
func (t RTMetricType) String() string {
	if t < numRTMetricTypes {
		return rtMetricTypeNames[t]
	}
	return "unknown(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// ParseRTMetricType returns the type named s (case-sensitive, as the host
// agent compares them).
func ParseRTMetricType(s string) (RTMetricType, bool) {
	for i, n := range rtMetricTypeNames {
		if n == s {
			return RTMetricType(i), true
		}
	}
	return 0, false
}

// RTFlowType is the type of an rtflow field.
type RTFlowType uint32

// rtflow field types, in the host agent's numbering.
const (
	RTFlowString RTFlowType = iota
	RTFlowMAC
	RTFlowIP
	RTFlowIP6
	RTFlowInt32
	RTFlowInt64
	RTFlowFloat
	RTFlowDouble
	numRTFlowTypes
)

var rtFlowTypeNames = [numRTFlowTypes]string{
	"string", "mac", "ip", "ip6", "int32", "int64", "float", "double",
}

// String returns the type's name in the host agent's JSON messages.
func (t RTFlowType) String() string {
	if t < numRTFlowTypes {
		return rtFlowTypeNames[t]
	}
	return "unknown(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// ParseRTFlowType returns the type named s (case-sensitive).
func ParseRTFlowType(s string) (RTFlowType, bool) {
	for i, n := range rtFlowTypeNames {
		if n == s {
			return RTFlowType(i), true
		}
	}
	return 0, false
}

// RTValue is one named value of an rtmetric or rtflow sample. Which value
// field is used depends on the type: Str for string; Uint for the integer
// types (32-bit types use its low 32 bits); Float for float and double
// (a float holds a float32 value); MAC for mac; Addr for ip and ip6.
type RTValue struct {
	Name  string
	Type  uint32
	Str   string
	Uint  uint64
	Float float64
	MAC   [6]byte
	Addr  netip.Addr
}

// RTMetricSample is an rtmetric sample (4300:1002): named metrics of a
// data source identified by name.
type RTMetricSample struct {
	Datasource string
	Metrics    []RTValue
}

// SampleFormat implements Sample.
func (s *RTMetricSample) SampleFormat() DataFormat { return FormatRTMetric }

func (s *RTMetricSample) appendBody(b []byte) []byte {
	b = appendString(b, s.Datasource, MaxRTNameLen)
	b = appendUint32(b, uint32(len(s.Metrics)))
	for i := range s.Metrics {
		b = appendRTMetricValue(b, &s.Metrics[i])
	}
	return b
}

func appendRTMetricValue(b []byte, v *RTValue) []byte {
	b = appendString(b, v.Name, MaxRTNameLen)
	b = appendUint32(b, v.Type)
	switch RTMetricType(v.Type) {
	case RTMetricString:
		b = appendString(b, v.Str, MaxRTValueLen)
	case RTMetricCounter32, RTMetricGauge32:
		b = appendUint32(b, uint32(v.Uint))
	case RTMetricCounter64, RTMetricGauge64:
		b = appendUint64(b, v.Uint)
	case RTMetricGaugeFloat:
		b = appendFloat32(b, math.Float32bits(float32(v.Float)))
	case RTMetricGaugeDouble:
		b = appendUint64(b, math.Float64bits(v.Float))
	}
	return b
}

// RTFlowSample is an rtflow sample (4300:1003): one sampled event of a
// data source identified by name, described by named fields.
type RTFlowSample struct {
	Datasource   string
	SamplingRate uint32
	SamplePool   uint32
	Fields       []RTValue
}

// SampleFormat implements Sample.
func (s *RTFlowSample) SampleFormat() DataFormat { return FormatRTFlow }

func (s *RTFlowSample) appendBody(b []byte) []byte {
	b = appendString(b, s.Datasource, MaxRTNameLen)
	b = appendUint32(b, s.SamplingRate)
	b = appendUint32(b, s.SamplePool)
	b = appendUint32(b, uint32(len(s.Fields)))
	for i := range s.Fields {
		b = appendRTFlowValue(b, &s.Fields[i])
	}
	return b
}

func appendRTFlowValue(b []byte, v *RTValue) []byte {
	b = appendString(b, v.Name, MaxRTNameLen)
	b = appendUint32(b, v.Type)
	switch RTFlowType(v.Type) {
	case RTFlowString:
		b = appendString(b, v.Str, MaxRTValueLen)
	case RTFlowMAC:
		b = appendMAC(b, v.MAC)
	case RTFlowIP:
		b = appendIPv4(b, v.Addr)
	case RTFlowIP6:
		b = appendIPv6(b, v.Addr)
	case RTFlowInt32:
		b = appendUint32(b, uint32(v.Uint))
	case RTFlowInt64:
		b = appendUint64(b, v.Uint)
	case RTFlowFloat:
		b = appendFloat32(b, math.Float32bits(float32(v.Float)))
	case RTFlowDouble:
		b = appendUint64(b, math.Float64bits(v.Float))
	}
	return b
}

// rtMinValue is the smallest encoded rtmetric/rtflow value: an empty name
// and the type word.
const rtMinValue = 8

// decodeRTMetricSample reads an rtmetric body. A type the format does not
// define makes the sample undecodable (its value's size is unknown), as in
// the reference decoder.
func decodeRTMetricSample(r *reader) *RTMetricSample {
	s := &RTMetricSample{Datasource: r.string(MaxRTNameLen)}
	n := r.count(rtMinValue)
	if r.err != nil {
		return s
	}
	s.Metrics = make([]RTValue, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		v := RTValue{Name: r.string(MaxRTNameLen)}
		start := r.off
		v.Type = r.uint32()
		switch RTMetricType(v.Type) {
		case RTMetricString:
			v.Str = r.string(MaxRTValueLen)
		case RTMetricCounter32, RTMetricGauge32:
			v.Uint = uint64(r.uint32())
		case RTMetricCounter64, RTMetricGauge64:
			v.Uint = r.uint64()
		case RTMetricGaugeFloat:
			v.Float = float64(r.float32())
		case RTMetricGaugeDouble:
			v.Float = math.Float64frombits(r.uint64())
		default:
			r.failAt(start, fmt.Errorf("%w: rtmetric %d type %d", ErrBadValue, i, v.Type))
		}
		s.Metrics = append(s.Metrics, v)
	}
	return s
}

// decodeRTFlowSample reads an rtflow body.
func decodeRTFlowSample(r *reader) *RTFlowSample {
	s := &RTFlowSample{Datasource: r.string(MaxRTNameLen)}
	s.SamplingRate = r.uint32()
	s.SamplePool = r.uint32()
	n := r.count(rtMinValue)
	if r.err != nil {
		return s
	}
	s.Fields = make([]RTValue, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		v := RTValue{Name: r.string(MaxRTNameLen)}
		start := r.off
		v.Type = r.uint32()
		switch RTFlowType(v.Type) {
		case RTFlowString:
			v.Str = r.string(MaxRTValueLen)
		case RTFlowMAC:
			v.MAC = r.mac()
		case RTFlowIP:
			v.Addr = r.ipv4()
		case RTFlowIP6:
			v.Addr = r.ipv6()
		case RTFlowInt32:
			v.Uint = uint64(r.uint32())
		case RTFlowInt64:
			v.Uint = r.uint64()
		case RTFlowFloat:
			v.Float = float64(r.float32())
		case RTFlowDouble:
			v.Float = math.Float64frombits(r.uint64())
		default:
			r.failAt(start, fmt.Errorf("%w: rtflow field %d type %d", ErrBadValue, i, v.Type))
		}
		s.Fields = append(s.Fields, v)
	}
	return s
}
