package decode

import (
	"bytes"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// marshalJSON renders the datagram as one JSON object for people and
// scripts (the `sflowswitchd decode` output):
//
//	{"version":5,"agent_address":"10.0.0.1","sub_agent_id":0,
//	 "sequence_number":1,"uptime_ms":123456,"samples":[
//	  {"type":"flow_sample","sequence_number":7,
//	   "source_id":{"type":0,"index":3},"sampling_rate":1024,
//	   "sample_pool":51200,"drops":0,"input":{"format":0,"value":3},
//	   "output":{"format":0,"value":5},"records":[
//	    {"format":"0:1","name":"sampled_header",...record fields...}]}]}
//
// Records are rendered generically from their Go structs (json tags give
// the keys, declaration order the order), so every record type of the
// package is covered without per-record code. Byte slices and byte arrays
// become hex strings, 6-byte arrays and net.HardwareAddr MAC text
// (aa:bb:cc:dd:ee:ff), netip.Addr its text form (null for the spec's
// "unknown" address type), NaN and infinite floats the strings "NaN",
// "+Inf" and "-Inf" (JSON has no such numbers, and they can arrive in a
// decoded float field). A value implementing json.Marshaler or
// encoding.TextMarshaler is rendered by it. sflow.Record fields whose key
// collides with "format" or "name" are prefixed with "record_".
func marshalJSON(d *sflow.Datagram) ([]byte, error) {
	var e jsonEncoder
	e.buf = append(e.buf, `{"version":`...)
	e.uint(sflow.Version)
	e.buf = append(e.buf, `,"agent_address":`...)
	e.addr(d.AgentAddress)
	e.buf = append(e.buf, `,"sub_agent_id":`...)
	e.uint(uint64(d.SubAgentID))
	e.buf = append(e.buf, `,"sequence_number":`...)
	e.uint(uint64(d.SequenceNumber))
	e.buf = append(e.buf, `,"uptime_ms":`...)
	e.uint(uint64(d.Uptime))
	e.buf = append(e.buf, `,"samples":[`...)
	for i, s := range d.Samples {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.sample(s); err != nil {
			return nil, fmt.Errorf("sflow: sample %d to JSON: %w", i, err)
		}
	}
	e.buf = append(e.buf, "]}"...)
	return e.buf, nil
}

// jsonEncoder appends JSON to buf. It is used for display, not on the
// sampling path, so it favours clarity over allocation counts.
type jsonEncoder struct {
	buf []byte
}

func (e *jsonEncoder) uint(v uint64) { e.buf = strconv.AppendUint(e.buf, v, 10) }

func (e *jsonEncoder) str(s string) {
	// json.Marshal escapes <, > and & for HTML; URLs in HTTP records read
	// better without that, so use an Encoder with HTML escaping off.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	e.buf = append(e.buf, bytes.TrimRight(b.Bytes(), "\n")...)
}

func (e *jsonEncoder) addr(a netip.Addr) {
	if !a.IsValid() {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.buf = append(e.buf, '"')
	e.buf = a.AppendTo(e.buf)
	e.buf = append(e.buf, '"')
}

func (e *jsonEncoder) source(d sflow.DataSource) {
	e.buf = append(e.buf, `{"type":`...)
	e.uint(uint64(d.Type))
	e.buf = append(e.buf, `,"index":`...)
	e.uint(uint64(d.Index))
	e.buf = append(e.buf, '}')
}

func (e *jsonEncoder) iface(i sflow.Interface) {
	e.buf = append(e.buf, `{"format":`...)
	e.uint(uint64(i.Format))
	e.buf = append(e.buf, `,"value":`...)
	e.uint(uint64(i.Value))
	e.buf = append(e.buf, '}')
}

func (e *jsonEncoder) sample(s sflow.Sample) error {
	f := s.SampleFormat()
	e.buf = append(e.buf, `{"type":`...)
	e.str(sflow.SampleTypeName(f))
	switch s := s.(type) {
	case *sflow.FlowSample:
		e.buf = append(e.buf, `,"sequence_number":`...)
		e.uint(uint64(s.SequenceNumber))
		e.buf = append(e.buf, `,"source_id":`...)
		e.source(s.Source)
		e.buf = append(e.buf, `,"sampling_rate":`...)
		e.uint(uint64(s.SamplingRate))
		e.buf = append(e.buf, `,"sample_pool":`...)
		e.uint(uint64(s.SamplePool))
		e.buf = append(e.buf, `,"drops":`...)
		e.uint(uint64(s.Drops))
		e.buf = append(e.buf, `,"input":`...)
		e.iface(s.Input)
		e.buf = append(e.buf, `,"output":`...)
		e.iface(s.Output)
		if err := e.records(s.Records); err != nil {
			return err
		}
	case *sflow.CounterSample:
		e.buf = append(e.buf, `,"sequence_number":`...)
		e.uint(uint64(s.SequenceNumber))
		e.buf = append(e.buf, `,"source_id":`...)
		e.source(s.Source)
		if err := e.records(s.Records); err != nil {
			return err
		}
	case *sflow.RTMetricSample, *sflow.RTFlowSample:
		e.rtSample(s)
	case *sflow.DiscardedPacket:
		e.buf = append(e.buf, `,"sequence_number":`...)
		e.uint(uint64(s.SequenceNumber))
		e.buf = append(e.buf, `,"source_id":`...)
		e.source(s.Source)
		e.buf = append(e.buf, `,"drops":`...)
		e.uint(uint64(s.Drops))
		e.buf = append(e.buf, `,"input":`...)
		e.uint(uint64(s.Input))
		e.buf = append(e.buf, `,"output":`...)
		e.uint(uint64(s.Output))
		e.buf = append(e.buf, `,"reason":{"code":`...)
		e.uint(uint64(s.Reason))
		e.buf = append(e.buf, `,"name":`...)
		e.str(s.Reason.String())
		e.buf = append(e.buf, '}')
		if err := e.records(s.Records); err != nil {
			return err
		}
	case *sflow.UnknownSample:
		e.buf = append(e.buf, `,"format":`...)
		e.str(s.DataFormat.String())
		e.buf = append(e.buf, `,"data":`...)
		e.hex(s.Data)
	default:
		// A sflow.Sample implemented outside this package: at least name it.
		e.buf = append(e.buf, `,"format":`...)
		e.str(f.String())
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *jsonEncoder) records(recs []sflow.Record) error {
	e.buf = append(e.buf, `,"records":[`...)
	for i, rec := range recs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.record(rec); err != nil {
			return fmt.Errorf("record %d (%s): %w", i, rec.Format(), err)
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *jsonEncoder) hex(b []byte) {
	e.buf = append(e.buf, '"')
	e.buf = hex.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
}

// record appends {"format":"e:n","name":"...", fields...}.
func (e *jsonEncoder) record(rec sflow.Record) error {
	e.buf = append(e.buf, `{"format":`...)
	e.str(rec.Format().String())
	e.buf = append(e.buf, `,"name":`...)
	e.str(rec.Name())
	if u, ok := rec.(*sflow.UnknownRecord); ok {
		e.buf = append(e.buf, `,"data":`...)
		e.hex(u.Data)
		e.buf = append(e.buf, '}')
		return nil
	}
	v := reflect.ValueOf(rec)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			e.buf = append(e.buf, '}')
			return nil
		}
		v = v.Elem()
	}
	if m, ok := rec.(json.Marshaler); ok {
		// A record with its own JSON form: splice its members in.
		b, err := m.MarshalJSON()
		if err != nil {
			return err
		}
		b = bytes.TrimSpace(b)
		if len(b) < 2 || b[0] != '{' {
			return fmt.Errorf("MarshalJSON of %T is not an object", rec)
		}
		if inner := bytes.TrimSpace(b[1 : len(b)-1]); len(inner) > 0 {
			e.buf = append(e.buf, ',')
			e.buf = append(e.buf, inner...)
		}
	} else if v.Kind() == reflect.Struct {
		if _, err := e.fields(v, true, false); err != nil {
			return err
		}
	} else {
		e.buf = append(e.buf, `,"value":`...)
		if err := e.value(v); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// fields appends the struct's exported fields as `"key":value` pairs, each
// preceded by a comma except while first is true (nothing written yet in
// the enclosing object). It returns the updated first.
func (e *jsonEncoder) fields(v reflect.Value, inRecord, first bool) (bool, error) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		fv := v.Field(i)
		key, omitEmpty, skip := jsonKey(sf)
		if skip {
			continue
		}
		if sf.Anonymous && sf.Tag.Get("json") == "" {
			// Embedded struct without a tag: its fields are promoted, as
			// encoding/json does.
			for fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					break
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				var err error
				if first, err = e.fields(fv, inRecord, first); err != nil {
					return first, err
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if omitEmpty && fv.IsZero() {
			continue
		}
		if inRecord && (key == "format" || key == "name") {
			key = "record_" + key
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.str(key)
		e.buf = append(e.buf, ':')
		if err := e.value(fv); err != nil {
			return first, fmt.Errorf("field %s: %w", sf.Name, err)
		}
	}
	return first, nil
}

// jsonKey returns the key of a struct field from its json tag (the field
// name when there is none), whether it has omitempty, and whether it is
// excluded ("-").
func jsonKey(sf reflect.StructField) (key string, omitEmpty, skip bool) {
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = sf.Name
	}
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == "omitempty" || o == "omitzero" {
			omitEmpty = true
		}
	}
	return name, omitEmpty, false
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	addrType          = reflect.TypeFor[netip.Addr]()
	hardwareAddrType  = reflect.TypeFor[net.HardwareAddr]()
)

// value appends one value, following the rules in sflow.Datagram.MarshalJSON.
func (e *jsonEncoder) value(v reflect.Value) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	switch {
	case t == addrType:
		e.addr(v.Interface().(netip.Addr))
		return nil
	case t == hardwareAddrType:
		e.str(v.Interface().(net.HardwareAddr).String())
		return nil
	case t.Implements(jsonMarshalerType) && !(v.Kind() == reflect.Pointer && v.IsNil()):
		b, err := v.Interface().(json.Marshaler).MarshalJSON()
		if err != nil {
			return err
		}
		e.buf = append(e.buf, b...)
		return nil
	case t.Implements(textMarshalerType) && !(v.Kind() == reflect.Pointer && v.IsNil()):
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return err
		}
		e.str(string(b))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(v.Elem())
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.uint(v.Uint())
	case reflect.Float32:
		e.float(v.Float(), 32)
	case reflect.Float64:
		e.float(v.Float(), 64)
	case reflect.String:
		e.str(v.String())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			e.hex(v.Bytes())
			return nil
		}
		if v.IsNil() {
			e.buf = append(e.buf, "[]"...)
			return nil
		}
		return e.list(v)
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			if len(b) == 6 {
				e.str(net.HardwareAddr(b).String())
			} else {
				e.hex(b)
			}
			return nil
		}
		return e.list(v)
	case reflect.Struct:
		e.buf = append(e.buf, '{')
		if _, err := e.fields(v, false, true); err != nil {
			return err
		}
		e.buf = append(e.buf, '}')
	default:
		// Maps and anything else: encoding/json's rendering.
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return err
		}
		e.buf = append(e.buf, b...)
	}
	return nil
}

func (e *jsonEncoder) list(v reflect.Value) error {
	e.buf = append(e.buf, '[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v.Index(i)); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

// rtJSON appends the rtmetric/rtflow members of a sample's JSON object:
//
//	"datasource":"web1",["sampling_rate":1,"sample_pool":0,]
//	"metrics"|"fields":[{"name":"m1","type":"counter32","value":777},...]
func (e *jsonEncoder) rtSample(s sflow.Sample) {
	var vals []sflow.RTValue
	flow := false
	switch s := s.(type) {
	case *sflow.RTMetricSample:
		e.buf = append(e.buf, `,"datasource":`...)
		e.str(s.Datasource)
		e.buf = append(e.buf, `,"metrics":[`...)
		vals = s.Metrics
	case *sflow.RTFlowSample:
		flow = true
		e.buf = append(e.buf, `,"datasource":`...)
		e.str(s.Datasource)
		e.buf = append(e.buf, `,"sampling_rate":`...)
		e.uint(uint64(s.SamplingRate))
		e.buf = append(e.buf, `,"sample_pool":`...)
		e.uint(uint64(s.SamplePool))
		e.buf = append(e.buf, `,"fields":[`...)
		vals = s.Fields
	}
	for i := range vals {
		v := &vals[i]
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"name":`...)
		e.str(v.Name)
		e.buf = append(e.buf, `,"type":`...)
		var kind int // 0 string, 1 uint, 2 float, 3 mac, 4 addr
		if flow {
			t := sflow.RTFlowType(v.Type)
			e.str(t.String())
			switch t {
			case sflow.RTFlowMAC:
				kind = 3
			case sflow.RTFlowIP, sflow.RTFlowIP6:
				kind = 4
			case sflow.RTFlowInt32, sflow.RTFlowInt64:
				kind = 1
			case sflow.RTFlowFloat, sflow.RTFlowDouble:
				kind = 2
			}
		} else {
			t := sflow.RTMetricType(v.Type)
			e.str(t.String())
			switch t {
			case sflow.RTMetricCounter32, sflow.RTMetricCounter64, sflow.RTMetricGauge32, sflow.RTMetricGauge64:
				kind = 1
			case sflow.RTMetricGaugeFloat, sflow.RTMetricGaugeDouble:
				kind = 2
			}
		}
		e.buf = append(e.buf, `,"value":`...)
		switch kind {
		case 0:
			e.str(v.Str)
		case 1:
			e.uint(v.Uint)
		case 2:
			e.float(v.Float, 64)
		case 3:
			e.str(fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", v.MAC[0], v.MAC[1], v.MAC[2], v.MAC[3], v.MAC[4], v.MAC[5]))
		case 4:
			e.addr(v.Addr)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
}

// float appends f, a float of bits (32 or 64) bits, as a JSON number in
// its shortest form, or as the strings "NaN", "+Inf" and "-Inf" (JSON has
// no such numbers, and they can arrive in a decoded float field).
func (e *jsonEncoder) float(f float64, bits int) {
	switch {
	case math.IsNaN(f):
		e.str("NaN")
	case math.IsInf(f, 1):
		e.str("+Inf")
	case math.IsInf(f, -1):
		e.str("-Inf")
	default:
		e.buf = strconv.AppendFloat(e.buf, f, 'g', -1, bits)
	}
}
