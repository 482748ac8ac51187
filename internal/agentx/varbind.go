package agentx

import (
	"fmt"
	"math"
	"net"
)

// VarType is the type of a VarBind value (RFC 2741 section 5.4, v.type).
type VarType uint16

// VarBind value types, RFC 2741 section 5.4.
const (
	Integer          VarType = 2
	OctetString      VarType = 4
	Null             VarType = 5
	ObjectIdentifier VarType = 6
	IPAddress        VarType = 64
	Counter32        VarType = 65
	Gauge32          VarType = 66
	TimeTicks        VarType = 67
	Opaque           VarType = 68
	Counter64        VarType = 70
	NoSuchObject     VarType = 128
	NoSuchInstance   VarType = 129
	EndOfMibView     VarType = 130
)

var varTypeNames = map[VarType]string{
	Integer: "Integer", OctetString: "OctetString", Null: "Null",
	ObjectIdentifier: "ObjectIdentifier", IPAddress: "IPAddress",
	Counter32: "Counter32", Gauge32: "Gauge32", TimeTicks: "TimeTicks",
	Opaque: "Opaque", Counter64: "Counter64", NoSuchObject: "NoSuchObject",
	NoSuchInstance: "NoSuchInstance", EndOfMibView: "EndOfMibView",
}

// String returns the type's name.
func (t VarType) String() string {
	if s, ok := varTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("VarType(%d)", uint16(t))
}

// Variable is one VarBind: a name, a type and a value.
//
// Decoded values have these Go types: Integer int32; Counter32, Gauge32,
// TimeTicks uint32; Counter64 uint64; OctetString, Opaque []byte;
// IPAddress net.IP (4 bytes); ObjectIdentifier OID; Null, NoSuchObject,
// NoSuchInstance, EndOfMibView nil. For encoding, a Handler may also use
// int, int64, uint, uint64 (range-checked) and string where that is
// unambiguous.
type Variable struct {
	Name  OID
	Type  VarType
	Value any
}

// appendVarBind appends the RFC 2741 section 5.4 encoding of v.
func appendVarBind(b []byte, v Variable) ([]byte, error) {
	b = be.AppendUint16(b, uint16(v.Type))
	b = append(b, 0, 0)
	b, err := appendOID(b, v.Name, false)
	if err != nil {
		return b, err
	}
	switch v.Type {
	case Integer:
		n, err := toInt32(v.Value)
		if err != nil {
			return b, fmt.Errorf("varbind %s: %w", v.Name, err)
		}
		return be.AppendUint32(b, uint32(n)), nil
	case Counter32, Gauge32, TimeTicks:
		n, err := toUint32(v.Value)
		if err != nil {
			return b, fmt.Errorf("varbind %s: %w", v.Name, err)
		}
		return be.AppendUint32(b, n), nil
	case Counter64:
		n, err := toUint64(v.Value)
		if err != nil {
			return b, fmt.Errorf("varbind %s: %w", v.Name, err)
		}
		return be.AppendUint64(b, n), nil
	case OctetString, Opaque:
		s, err := toBytes(v.Value)
		if err != nil {
			return b, fmt.Errorf("varbind %s: %w", v.Name, err)
		}
		return appendOctets(b, s), nil
	case IPAddress:
		ip, err := toIPv4(v.Value)
		if err != nil {
			return b, fmt.Errorf("varbind %s: %w", v.Name, err)
		}
		return appendOctets(b, ip), nil
	case ObjectIdentifier:
		o, ok := v.Value.(OID)
		if !ok {
			return b, fmt.Errorf("varbind %s: ObjectIdentifier value is %T, want OID", v.Name, v.Value)
		}
		return appendOID(b, o, false)
	case Null, NoSuchObject, NoSuchInstance, EndOfMibView:
		return b, nil
	}
	return b, fmt.Errorf("varbind %s: unknown type %d", v.Name, uint16(v.Type))
}

// varBind reads one RFC 2741 section 5.4 VarBind from r.
func (r *reader) varBind() (Variable, error) {
	t, err := r.uint16()
	if err != nil {
		return Variable{}, fmt.Errorf("varbind type: %w", err)
	}
	if _, err := r.bytes(2); err != nil {
		return Variable{}, fmt.Errorf("varbind reserved: %w", err)
	}
	name, _, err := r.oid()
	if err != nil {
		return Variable{}, fmt.Errorf("varbind name: %w", err)
	}
	v := Variable{Name: name, Type: VarType(t)}
	switch v.Type {
	case Integer:
		n, err := r.uint32()
		if err != nil {
			return v, fmt.Errorf("varbind %s Integer: %w", name, err)
		}
		v.Value = int32(n)
	case Counter32, Gauge32, TimeTicks:
		n, err := r.uint32()
		if err != nil {
			return v, fmt.Errorf("varbind %s %s: %w", name, v.Type, err)
		}
		v.Value = n
	case Counter64:
		n, err := r.uint64()
		if err != nil {
			return v, fmt.Errorf("varbind %s Counter64: %w", name, err)
		}
		v.Value = n
	case OctetString, Opaque:
		s, err := r.octets()
		if err != nil {
			return v, fmt.Errorf("varbind %s %s: %w", name, v.Type, err)
		}
		v.Value = s
	case IPAddress:
		s, err := r.octets()
		if err != nil {
			return v, fmt.Errorf("varbind %s IPAddress: %w", name, err)
		}
		if len(s) != 4 {
			return v, fmt.Errorf("varbind %s IPAddress: %d octets, want 4", name, len(s))
		}
		v.Value = net.IP(s)
	case ObjectIdentifier:
		o, _, err := r.oid()
		if err != nil {
			return v, fmt.Errorf("varbind %s ObjectIdentifier: %w", name, err)
		}
		v.Value = o
	case Null, NoSuchObject, NoSuchInstance, EndOfMibView:
	default:
		return v, fmt.Errorf("varbind %s: unknown type %d", name, t)
	}
	return v, nil
}

func toInt32(x any) (int32, error) {
	var n int64
	switch v := x.(type) {
	case int32:
		return v, nil
	case int:
		n = int64(v)
	case int64:
		n = v
	default:
		return 0, fmt.Errorf("value of type Integer is %T, want int32", x)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("value %d of type Integer out of 32-bit range", n)
	}
	return int32(n), nil
}

func toUint64(x any) (uint64, error) {
	switch v := x.(type) {
	case uint64:
		return v, nil
	case uint32:
		return uint64(v), nil
	case uint:
		return uint64(v), nil
	case int:
		if v >= 0 {
			return uint64(v), nil
		}
	case int64:
		if v >= 0 {
			return uint64(v), nil
		}
	default:
		return 0, fmt.Errorf("unsigned value is %T, want uint32 or uint64", x)
	}
	return 0, fmt.Errorf("unsigned value %v is negative", x)
}

func toUint32(x any) (uint32, error) {
	n, err := toUint64(x)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint32 {
		return 0, fmt.Errorf("value %d out of 32-bit range", n)
	}
	return uint32(n), nil
}

func toBytes(x any) ([]byte, error) {
	switch v := x.(type) {
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("octet string value is %T, want []byte or string", x)
}

func toIPv4(x any) ([]byte, error) {
	var ip net.IP
	switch v := x.(type) {
	case net.IP:
		ip = v
	case []byte:
		ip = v
	default:
		return nil, fmt.Errorf("IPAddress value is %T, want net.IP", x)
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4, nil
	}
	return nil, fmt.Errorf("IPAddress value %v is not IPv4", x)
}
