package daemon

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/privilege"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// agentxSubagent returns the AgentX subagent serving h on subtree to the
// master the agentx setting (master) names, or nil when it is off. The
// subagent logs every reconnect attempt; those go to debug, and
// watchAgentX reports state changes once.
func (d *Daemon) agentxSubagent(master string, subtree agentx.OID, description string, h agentx.Handler) (*agentx.Subagent, error) {
	network, addr, err := config.ParseAgentX(master)
	if err != nil || network == "" {
		return nil, err
	}
	return agentx.New(agentx.Config{
		Network:     network,
		Address:     addr,
		Subtree:     subtree,
		Description: description,
		Handler:     h,
		Logger:      slog.New(debugOnly{d.log.Handler()}),
	})
}

// watchAgentX logs the AgentX session's state changes: once when the
// master cannot be reached (the subagent keeps retrying quietly), once per
// registration and once per loss. It sleeps until the subagent reports a
// change (or the one-shot "not reachable" deadline), so an idle daemon
// has no timer here.
func (d *Daemon) watchAgentX(ctx context.Context, address string) {
	unreachable := time.NewTimer(2 * time.Second)
	defer unreachable.Stop()
	connected, warned := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.subagent.Changed():
		case <-unreachable.C:
		}
		switch c := d.subagent.Connected(); {
		case c && !connected:
			d.log.Info("SFLOW-MIB registered with the AgentX master", "agentx", address)
			if path, ok := strings.CutPrefix(address, "unix:"); ok {
				privilege.CheckAgentXSocket(d.log, path)
			}
			connected, warned = true, false
		case !c && connected:
			d.log.Warn("AgentX master connection lost; retrying in the background", "agentx", address)
			connected, warned = false, true
		case !c && !warned:
			// Only the deadline wakes us here while never connected.
			d.log.Warn("AgentX master not reachable; SNMP configuration unavailable until it is, retrying in the background", "agentx", address)
			warned = true
		}
	}
}

// debugOnly is a slog handler that logs every record at debug level.
type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }
func (d debugOnly) WithGroup(g string) slog.Handler       { return debugOnly{d.h.WithGroup(g)} }
