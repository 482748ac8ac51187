package main

import (
	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// dataplaneAdapter drives the XDP dataplane for the agent, through the
// port manager that also opens and closes AF_XDP sockets of monitor ports.
type dataplaneAdapter struct {
	monitors *monitorPorts
}

func portConfig(p agent.PortSampling) dataplane.PortConfig {
	mode := dataplane.ModeInline
	if p.Monitor {
		mode = dataplane.ModeMonitor
	}
	return dataplane.PortConfig{Rate: p.KernelRate, Mode: mode, HeaderBytes: p.HeaderBytes, Worker: p.Worker}
}

// SetPort attaches the sampler to a new port or updates an attached one
// through the config map (no re-attach).
func (a *dataplaneAdapter) SetPort(ifindex uint32, p agent.PortSampling) error {
	return a.monitors.SetPort(int(ifindex), portConfig(p))
}

// RemovePort detaches the sampler from a port. A port that has vanished
// took its attachment with it; that is not an error.
func (a *dataplaneAdapter) RemovePort(ifindex uint32) error {
	return a.monitors.RemovePort(int(ifindex))
}

// PortPool reads the port's pool and drops from the mmap-ed counters.
func (a *dataplaneAdapter) PortPool(ifindex uint32) (uint64, uint64) {
	return a.monitors.PortPool(ifindex)
}
