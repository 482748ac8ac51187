package ports

import "github.com/sflowswitchd/sflowswitchd/sflow"

// Sampling is how one port is sampled: the one form a port's sampling
// settings take from the agent to the kernel. The agent plans it from
// the samplers of the port's data source (agent.PortSampling is this
// type), and every sample source applies it as it is: the BPF samplers
// (dataplane.Dataplane.SetPort, which writes it to the port's struct
// port_config), psample's tc rules. docs/ARCHITECTURE.md, "Where things
// go", follows a setting along the whole route.
type Sampling struct {
	// KernelRate is the power-of-two rate the kernel samples at.
	KernelRate uint32
	// Rate is the smallest rate configured on the port, exactly: a
	// dataplane that samples at any integer rate (psample's act_sample)
	// samples at it, without sub-sampling. 0 for a port adopted from an
	// earlier program (its rate is not pinned).
	Rate uint32
	// HeaderBytes is how many bytes of each sampled frame are copied.
	HeaderBytes int
	// Worker is the worker (sub-agent) whose ring receives the samples.
	Worker int
	// Monitor selects the AF_XDP monitor path instead of the inline one.
	Monitor bool
	// Direction is which way the port's frames are sampled; 0 means
	// ingress.
	Direction sflow.Direction
	// Hook is the port's own hook (port_hook): "xdp" or "tc" attach its
	// BPF sampler there, "psample" puts it on psample's tc rules (a
	// source that has both, source.Mixed); "" or "auto" is the daemon's
	// choice. Taken when the port is first sampled.
	Hook string
}
