package sflow

import "fmt"

// DataFormat is the spec's data_format: the SMI enterprise number in the
// high 20 bits and a structure format number in the low 12 bits.
type DataFormat uint32

// Format returns the data_format for a structure of enterprise ent and
// format number n.
func Format(ent, n uint32) DataFormat { return DataFormat(ent<<12 | n&0xfff) }

// Enterprise returns the enterprise part of f.
func (f DataFormat) Enterprise() uint32 { return uint32(f) >> 12 }

// Number returns the structure format number part of f.
func (f DataFormat) Number() uint32 { return uint32(f) & 0xfff }

func (f DataFormat) String() string { return fmt.Sprintf("%d:%d", f.Enterprise(), f.Number()) }

// Record is a flow record (flow_data) or a counter record (counter_data).
// AppendXDR appends the record's body (without the data_format and length
// words, which the sample framing adds) and must not allocate.
type Record interface {
	// Format is the record's data_format.
	Format() DataFormat
	// Name is the spec's structure name, e.g. "sampled_header".
	Name() string
	// AppendXDR appends the XDR encoding of the record body to b.
	AppendXDR(b []byte) []byte
}

// UnknownRecord is a record whose format the decoder does not know. Its
// body is kept as opaque bytes and re-encoded unchanged.
type UnknownRecord struct {
	DataFormat DataFormat
	Data       []byte
}

// Format implements Record.
func (u *UnknownRecord) Format() DataFormat { return u.DataFormat }

// Name implements Record.
func (u *UnknownRecord) Name() string { return "unknown" }

// AppendXDR implements Record.
func (u *UnknownRecord) AppendXDR(b []byte) []byte { return appendFixedOpaque(b, u.Data) }

// recordDecoder decodes one record body from r (a window holding exactly
// the record's declared length). It may return a partial record when r has
// an error; the caller discards it.
type recordDecoder func(r *reader) Record

// recordType is a known record format: its spec name and its decoder.
type recordType struct {
	name   string
	decode recordDecoder
}

// Known records of each context, keyed by data_format. Structure numbers
// may be reused between contexts (spec "data_format"), so flow and counter
// records have separate tables. Files defining records add to them in init.
var (
	flowRecords    = map[DataFormat]recordType{}
	counterRecords = map[DataFormat]recordType{}
)

// registerFlow adds flow record format f, named name, decoded by d.
func registerFlow(f DataFormat, name string, d recordDecoder) {
	register(flowRecords, f, name, d)
}

// registerCounter adds counter record format f, named name, decoded by d.
func registerCounter(f DataFormat, name string, d recordDecoder) {
	register(counterRecords, f, name, d)
}

func register(table map[DataFormat]recordType, f DataFormat, name string, d recordDecoder) {
	if _, dup := table[f]; dup {
		panic("sflow: duplicate record format " + f.String())
	}
	table[f] = recordType{name: name, decode: d}
}

// appendRecords appends an XDR array of flow_record / counter_record:
// the count, then each record's data_format, length and body.
func appendRecords(b []byte, recs []Record) []byte {
	b = appendUint32(b, uint32(len(recs)))
	for _, rec := range recs {
		b = appendUint32(b, uint32(rec.Format()))
		var off int
		b, off = beginLength(b)
		b = rec.AppendXDR(b)
		b = endLength(b, off)
	}
	return b
}

// decodeRecords reads an array of records using the table of known formats.
// A record of unknown format is skipped by its length and kept as an
// UnknownRecord. A known record must fill its declared length exactly.
func decodeRecords(r *reader, table map[DataFormat]recordType) []Record {
	n := r.count(8)
	if r.err != nil {
		return nil
	}
	recs := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		f := DataFormat(r.uint32())
		rt, known := table[f]
		name := rt.name
		if !known {
			name = "unknown(" + f.String() + ")"
		}
		sub := r.element("record", i, name, "sample")
		if sub == nil {
			return nil
		}
		var rec Record
		if known {
			rec = rt.decode(sub)
		} else {
			rec = &UnknownRecord{DataFormat: f, Data: append([]byte(nil), sub.bytes(sub.remaining())...)}
		}
		if err := sub.finish(); err != nil {
			r.err = err
			return nil
		}
		recs = append(recs, rec)
	}
	return recs
}
