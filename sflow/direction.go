package sflow

import "fmt"

// Direction is which way a port's frames are sampled: the frames it
// receives (ingress), the frames it sends (egress), or both
// (sflow_version_5.txt section 4, "Sampling": a sampler may sample on
// ingress, on egress or both). Each direction has its own exact pool; a
// frame is counted (and may be sampled) once in each direction it crosses
// the port, so a port's data source covers the directions it is sampled
// in and its flow samples' sample_pool is their sum (flow_sample.
// sample_pool: the packets that could have been sampled). The zero
// Direction means ingress.
type Direction uint8

const (
	// DirectionIngress samples the frames a port receives (input = the
	// port): XDP or TC ingress.
	DirectionIngress Direction = 1 << iota
	// DirectionEgress samples the frames a port sends (output = the
	// port): at TC egress (a TCX link, or a cls_bpf filter on the clsact
	// qdisc's egress side before Linux 6.6), before the port's qdisc.
	DirectionEgress
	// DirectionBoth samples both ways.
	DirectionBoth = DirectionIngress | DirectionEgress
)

// OrIngress is d with 0 read as DirectionIngress.
func (d Direction) OrIngress() Direction {
	if d == 0 {
		return DirectionIngress
	}
	return d
}

// Has reports whether d includes every direction of e.
func (d Direction) Has(e Direction) bool { return d&e == e }

// String returns "ingress" (also for 0), "egress" or "both".
func (d Direction) String() string {
	switch d {
	case DirectionIngress, 0:
		return "ingress"
	case DirectionEgress:
		return "egress"
	case DirectionBoth:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// ParseDirection parses "ingress", "egress" or "both".
func ParseDirection(s string) (Direction, error) {
	for _, d := range []Direction{DirectionIngress, DirectionEgress, DirectionBoth} {
		if s == d.String() {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown sampling direction %q (want ingress, egress or both)", s)
}
