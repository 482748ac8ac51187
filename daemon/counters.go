package daemon

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/sflow"
	"github.com/sflowswitchd/sflowswitchd/source/counters/host"
	"github.com/sflowswitchd/sflowswitchd/source/counters/link"
)

// counterSource is the agent's agent.CounterSource: port data sources read
// through source/counters/link, the host (entPhysicalEntry.1) through
// source/counters/host.
type counterSource struct {
	*link.Reader
	// sonic reads SONiC's ports instead of the kernel's (sonic.go); nil
	// outside SONiC mode.
	sonic  *counterRecords
	hostMu sync.Mutex
	host   *host.Reader
}

func newCounterSource(hr *host.Reader) (*counterSource, error) {
	r, err := link.New()
	if err != nil {
		return nil, err
	}
	return &counterSource{Reader: r, host: hr}, nil
}

// AppendCounters implements agent.CounterSource.
func (c *counterSource) AppendCounters(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error) {
	switch {
	case ds.Type == sflow.SourceIfIndex && c.sonic != nil:
		return c.sonic.appendCounters(recs, ds.Index)
	case ds.Type == sflow.SourceIfIndex:
		return c.AppendRecords(recs, ds.Index)
	case ds.Type == sflow.SourceSmonVlan:
		return c.AppendVLANRecords(recs, ds.Index)
	case ds == hostSource:
		c.hostMu.Lock()
		defer c.hostMu.Unlock()
		return c.host.AppendRecords(recs)
	default:
		return recs, fmt.Errorf("no counters for data source %s", ds)
	}
}

// CounterGeneration implements agent.CounterGenerations: SONiC ports'
// counters restart when their SAI object changes.
func (c *counterSource) CounterGeneration(ds sflow.DataSource) uint64 {
	if c.sonic == nil || ds.Type != sflow.SourceIfIndex {
		return 0
	}
	return c.sonic.generation(ds.Index)
}

// Close releases the port and host readers. Pollers must have stopped.
func (c *counterSource) Close() error {
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	return errors.Join(c.Reader.Close(), c.host.Close())
}

// adapters lists the sampled ports' MACs for host_adapters (SONiC mode:
// SONiC's ports, sonicMode.adapters).
func (d *Daemon) adapters() []host.Adapter {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sonic != nil {
		macs := make(map[string]net.HardwareAddr, len(d.ports))
		for _, p := range d.ports {
			macs[p.Name] = p.MAC
		}
		return d.sonic.adapters(macs)
	}
	out := make([]host.Adapter, 0, len(d.ports))
	for _, idx := range sortedIndexes(d.ports) {
		p := d.ports[idx]
		if p.Loopback || len(p.MAC) != 6 {
			continue
		}
		out = append(out, host.Adapter{IfIndex: uint32(p.Index), MACs: [][6]byte{[6]byte(p.MAC)}})
	}
	return out
}

func sortedIndexes(m map[int]ports.Info) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
