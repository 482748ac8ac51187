package main

import (
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// sendModes names the agent's ways of sending datagrams, for -send.
const sendModes = "gso (sendmmsg batches, runs of equal-size datagrams as one UDP GSO message: the daemon's default), sendmmsg (batches of one datagram per message) or write (one write(2) per datagram)"

// setSendMode sets the agent options of send mode m.
func setSendMode(opts *agent.Options, m string) error {
	switch m {
	case "gso":
	case "sendmmsg":
		opts.SendNoGSO = true
	case "write":
		opts.SendBatch, opts.SendNoGSO = 1, true
	default:
		return fmt.Errorf("-send %q: want %s", m, sendModes)
	}
	return nil
}
