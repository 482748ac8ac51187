package host

import (
	"bytes"
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Columns of a /proc/net/dev interface line after "name:".
const (
	netRxBytes   = 0
	netRxPackets = 1
	netRxErrs    = 2
	netRxDrop    = 3
	netTxBytes   = 8
	netTxPackets = 9
	netTxErrs    = 10
	netTxDrop    = 11
	netColumns   = 16
)

// readNetIO fills host_net_io (spec "struct host_net_io", format 2006)
// from /proc/net/dev, summed over every interface of the reader's network
// namespace except the loopback "lo" (the kernel's fixed name for it):
// bytes_in, pkts_in, errs_in, drops_in from the receive bytes, packets,
// errs and drop columns; bytes_out, packets_out, errs_out, drops_out from
// the transmit ones. Packet and error counts wrap modulo 2^32. If the file
// cannot be read every counter is unavailable (all ones).
func (r *Reader) readNetIO() error {
	n := &r.net
	if err := r.sumNetDev(n); err != nil {
		*n = sflow.HostNetIO{
			BytesIn: sflow.CounterUnavailable64, BytesOut: sflow.CounterUnavailable64,
			PktsIn: sflow.CounterUnavailable32, ErrsIn: sflow.CounterUnavailable32,
			DropsIn: sflow.CounterUnavailable32, PacketsOut: sflow.CounterUnavailable32,
			ErrsOut: sflow.CounterUnavailable32, DropsOut: sflow.CounterUnavailable32,
		}
		return fmt.Errorf("host_net_io: %w", err)
	}
	return nil
}

func (r *Reader) sumNetDev(n *sflow.HostNetIO) error {
	b, err := r.netDev.read()
	if err != nil {
		return err
	}
	var sum, cols [netColumns]uint64
	seen := 0
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue // the two header lines
		}
		seen++
		if string(bytes.TrimSpace(name)) == "lo" {
			continue
		}
		r.fields = splitFields(r.fields, rest)
		got, err := uintFields(cols[:], r.fields)
		if err == nil && got < netColumns {
			err = fmt.Errorf("%w: %d columns", errSyntax, got)
		}
		if err != nil {
			return fmt.Errorf("parse %s %s: %w", r.netDev.path, bytes.TrimSpace(name), err)
		}
		for i := range sum {
			sum[i] += cols[i]
		}
	}
	if seen == 0 {
		return fmt.Errorf("parse %s: %w: no interfaces", r.netDev.path, errSyntax)
	}
	*n = sflow.HostNetIO{
		BytesIn:    sum[netRxBytes],
		PktsIn:     uint32(sum[netRxPackets]),
		ErrsIn:     uint32(sum[netRxErrs]),
		DropsIn:    uint32(sum[netRxDrop]),
		BytesOut:   sum[netTxBytes],
		PacketsOut: uint32(sum[netTxPackets]),
		ErrsOut:    uint32(sum[netTxErrs]),
		DropsOut:   uint32(sum[netTxDrop]),
	}
	return nil
}
