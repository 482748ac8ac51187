// Package agent is the sFlow agent core: the Agent, its Samplers, Pollers
// and Receivers (spec/sflow_agent_design.txt, "Object Classes"), split into
// per-CPU sub-agents.
//
// Each sub-agent (worker) is an sFlow sub-agent with its own sub_agent_id,
// datagram sequence numbers and datagram buffers, and owns a disjoint set
// of data sources: every sampler and poller of a data source lives in the
// worker that owns it, so a data source is reported by exactly one
// sub-agent (sflow_version_5.txt, "sample_datagram_v5"). Workers share no
// lock on the sample path: configuration reaches a worker as a message it
// applies between samples, and everything a sample touches belongs to the
// worker alone.
//
// The kernel samples each port at a power-of-two rate H; a sampler with
// configured rate N keeps each kernel sample with probability H/N
// (sflow_agent_design.txt, "Choice of Sampling Points"), so its effective
// rate is exactly N in expectation for any N >= H.
package agent
