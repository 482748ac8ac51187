package sonic

// State is what the agent knows of the switch from Redis at one time.
// It is never modified once published: a change makes a new State.
type State struct {
	// Ready is set once SYSTEM_READY said UP, or the wait for it ended
	// (Options.WaitReady); before that no port is reported.
	Ready bool
	// SystemReady is SYSTEM_READY|SYSTEM_STATE Status = UP now.
	SystemReady bool
	Config      Config
	// Ports are the ports and LAGs, by ifIndex (empty until Ready).
	Ports []Port

	byIndex map[uint32]int
	byName  map[string]int
}

func (s *State) index() {
	s.byIndex = make(map[uint32]int, len(s.Ports))
	s.byName = make(map[string]int, len(s.Ports))
	for i, p := range s.Ports {
		s.byIndex[p.Index] = i
		s.byName[p.Name] = i
	}
}

// Port returns the port or LAG of SONiC ifIndex idx.
func (s *State) Port(idx uint32) (*Port, bool) {
	i, ok := s.byIndex[idx]
	if !ok {
		return nil, false
	}
	return &s.Ports[i], true
}

// PortByName returns the port or LAG called name.
func (s *State) PortByName(name string) (*Port, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return &s.Ports[i], true
}

// equal tells whether s and o carry the same configuration, readiness and
// ports.
func (s *State) equal(o *State) bool {
	if o == nil || s.Ready != o.Ready || s.SystemReady != o.SystemReady || len(s.Ports) != len(o.Ports) {
		return false
	}
	if !configEqual(s.Config, o.Config) {
		return false
	}
	for i := range s.Ports {
		a, b := &s.Ports[i], &o.Ports[i]
		if a.Name != b.Name || a.Index != b.Index || a.OSIndex != b.OSIndex || a.OID != b.OID || a.SpeedMbps != b.SpeedMbps ||
			a.Alias != b.Alias || a.AdminUp != b.AdminUp || a.OperUp != b.OperUp || a.LAG != b.LAG || !equalStrings(a.Members, b.Members) ||
			(a.Members == nil) != (b.Members == nil) || a.LACP != b.LACP {
			return false
		}
	}
	return true
}

func configEqual(a, b Config) bool {
	if a.AdminUp != b.AdminUp || a.Polling != b.Polling || a.AgentID != b.AgentID || a.Direction != b.Direction ||
		a.MaxHeaderSize != b.MaxHeaderSize || a.DropMonitorLimit != b.DropMonitorLimit || a.MAC.String() != b.MAC.String() ||
		len(a.Collectors) != len(b.Collectors) {
		return false
	}
	for i := range a.Collectors {
		if a.Collectors[i] != b.Collectors[i] {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
