package reader

import "sync/atomic"

// MonitorPorts are the monitor ports whose sockets are open, by
// ifindex. Put, Delete and Reset are for one goroutine at a time (the
// loader serialises its SetPort and RemovePort); SocketDrops may be called
// from any goroutine.
type MonitorPorts struct {
	ports map[uint32]*MonitorPort
	// byIndex is a copy of ports for SocketDrops (copy-on-write), nil until
	// the first port.
	byIndex atomic.Pointer[map[uint32]*MonitorPort]
}

// publish makes a copy of ports visible to SocketDrops.
func (m *MonitorPorts) publish() {
	c := make(map[uint32]*MonitorPort, len(m.ports))
	for k, v := range m.ports {
		c[k] = v
	}
	m.byIndex.Store(&c)
}

// Get is the port ifindex, nil if it is not a monitor port.
func (m *MonitorPorts) Get(ifindex uint32) *MonitorPort { return m.ports[ifindex] }

// Put adds p, or replaces the port of its ifindex.
func (m *MonitorPorts) Put(p *MonitorPort) {
	if m.ports == nil {
		m.ports = map[uint32]*MonitorPort{}
	}
	m.ports[p.ifindex] = p
	m.publish()
}

// Delete forgets the port ifindex.
func (m *MonitorPorts) Delete(ifindex uint32) {
	delete(m.ports, ifindex)
	m.publish()
}

// Reset forgets every port (their sources closed the sockets).
func (m *MonitorPorts) Reset() {
	m.ports = nil
	m.publish()
}

// SocketDrops is what the port's sockets lost as last read by its
// worker; 0 for a port that is not a monitor port. No lock, no system
// call.
func (m *MonitorPorts) SocketDrops(ifindex uint32) uint64 {
	if c := m.byIndex.Load(); c != nil {
		if p := (*c)[ifindex]; p != nil {
			return p.drops.Load()
		}
	}
	return 0
}
