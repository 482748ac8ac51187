package agent

import (
	"errors"
	"fmt"
)

// PortError is a port the dataplane could not start, change or stop
// sampling (no free port slot, a port that vanished, a driver that refuses
// XDP). Apply returns one per such port, joined; the rest of the
// configuration is applied, and the failed ports are tried again by every
// later Apply.
type PortError struct {
	IfIndex uint32
	Err     error
}

// Error implements error.
func (e *PortError) Error() string { return fmt.Sprintf("port %d: %v", e.IfIndex, e.Err) }

// Unwrap returns the dataplane's error.
func (e *PortError) Unwrap() error { return e.Err }

// SplitPortErrors separates the PortErrors in err (as returned by Apply)
// from anything else: ports maps each failed ifindex to its error, other
// joins the errors that are not about one port (nil when there are none).
func SplitPortErrors(err error) (ports map[uint32]error, other error) {
	if err == nil {
		return nil, nil
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var rest []error
	for _, e := range list {
		var pe *PortError
		if errors.As(e, &pe) {
			if ports == nil {
				ports = map[uint32]error{}
			}
			ports[pe.IfIndex] = pe.Err
			continue
		}
		rest = append(rest, e)
	}
	return ports, errors.Join(rest...)
}
