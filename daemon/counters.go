package daemon

import (
	"errors"
	"fmt"
	"sync"

	hostcounters "github.com/sflowswitchd/sflowswitchd/counters/host"
	linkcounters "github.com/sflowswitchd/sflowswitchd/counters/link"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// counterSource is the agent's agent.CounterSource: port data sources read
// through internal/linkcounters, the host (entPhysicalEntry.1) through
// internal/hostcounters.
type counterSource struct {
	*linkcounters.Reader
	hostMu sync.Mutex
	host   *hostcounters.Reader
}

func newCounterSource(host *hostcounters.Reader) (*counterSource, error) {
	r, err := linkcounters.New()
	if err != nil {
		return nil, err
	}
	return &counterSource{Reader: r, host: host}, nil
}

// AppendCounters implements agent.CounterSource.
func (c *counterSource) AppendCounters(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error) {
	switch {
	case ds.Type == sflow.SourceIfIndex:
		return c.AppendRecords(recs, ds.Index)
	case ds == hostSource:
		c.hostMu.Lock()
		defer c.hostMu.Unlock()
		return c.host.AppendRecords(recs)
	default:
		return recs, fmt.Errorf("no counters for data source %s", ds)
	}
}

// Close releases the port and host readers. Pollers must have stopped.
func (c *counterSource) Close() error {
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	return errors.Join(c.Reader.Close(), c.host.Close())
}
