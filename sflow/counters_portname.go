package sflow

// FormatPortName is port_name (counter format 1005), from the sFlow
// "Port name" structure that host agents send with every interface's
// counters (hsflowd: SFLCOUNTERS_PORTNAME; sflowtool prints it as
// ifName):
//
//	/* opaque = counter_data; enterprise = 0; format = 1005 */
//	struct port_name {
//	   string name<255>;   /* the interface's name, e.g. "swp1" */
//	}
var FormatPortName = Format(0, 1005)

// MaxPortNameLen is port_name's maximum length (SFL_MAX_PORTNAME_LEN).
const MaxPortNameLen = 255

func init() {
	registerCounter(FormatPortName, "port_name", decodePortName)
}

// PortName is port_name (counter format 1005): the name of the interface
// whose counters the sample carries, so collectors can show "swp1"
// rather than an ifIndex.
type PortName struct {
	PortName string `json:"port_name"`
}

// Format implements Record.
func (*PortName) Format() DataFormat { return FormatPortName }

// Name implements Record.
func (*PortName) Name() string { return "port_name" }

// AppendXDR implements Record. A name longer than 255 bytes is cut.
func (p *PortName) AppendXDR(b []byte) []byte { return appendString(b, p.PortName, MaxPortNameLen) }

func decodePortName(r *reader) Record { return &PortName{PortName: r.string(MaxPortNameLen)} }
