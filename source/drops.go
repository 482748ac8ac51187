package source

import (
	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// DropSource is the kernel's drop notifications (drops.Drops) as the
// agent's drop reporter reads them (agent.DropSource).
type DropSource struct {
	d  *drops.Drops
	ev drops.Event
	n  agent.DropNotification
	fn func(*agent.DropNotification)
	// cb is made once: a closure per read would allocate.
	cb func(*drops.Event)
}

// NewDropSource returns d as an agent.DropSource.
func NewDropSource(d *drops.Drops) *DropSource {
	s := &DropSource{d: d}
	s.cb = s.convert
	return s
}

func (s *DropSource) convert(e *drops.Event) {
	s.n = agent.DropNotification{
		ReasonName: e.ReasonName, Symbol: e.Symbol, In: e.InIfIndex, Out: e.OutIfIndex,
		Queue: e.Queue, QueueKnown: agent.EgressQueueKnown(e.ReasonName, e.OutIfIndex),
		FrameLen: e.FrameLen, HeaderProto: sflow.HeaderProtocol(e.HeaderProto), Header: e.Header,
	}
	s.fn(&s.n)
}

// ReadDrops implements agent.DropSource (drops.Drops.Read).
func (s *DropSource) ReadDrops(fn func(*agent.DropNotification)) (int, error) {
	s.fn = fn
	return s.d.Read(&s.ev, s.cb)
}

// Wake implements agent.DropSource.
func (s *DropSource) Wake() error { return s.d.Wake() }

// Lost implements agent.DropSource: notifications the kernel could not
// deliver (drops.Stats.Lost).
func (s *DropSource) Lost() (uint64, error) {
	st, err := s.d.Stats()
	return st.Lost(), err
}

// DropProgram implements agent.DropProgram: the kernel program's ID,
// whether it was taken over from an earlier process (drops.Drops.Adopted),
// and the programs of another build it replaced.
func (s *DropSource) DropProgram() agent.DropProgramInfo {
	notified, adopted := s.d.Adopted()
	info := agent.DropProgramInfo{ID: s.d.ProgramID(), Adopted: adopted, Notified: notified}
	for _, r := range s.d.Replaced() {
		if r.Err == nil {
			info.Replaced = append(info.Replaced, agent.ReplacedDropProgram{ID: r.ID, Notified: r.Stats.Notified, Lost: r.Stats.Lost()})
		}
	}
	return info
}
