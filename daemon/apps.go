package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/apps/apmmib"
	"github.com/sflowswitchd/sflowswitchd/apps/appsubagent"
	"github.com/sflowswitchd/sflowswitchd/config"
)

// startApps starts the application sub-agent when -app-api is set, and its
// APM-MIB over AgentX when the SFLOW-MIB subagent is on: a second AgentX
// session registering the APM-MIB subtree (RFC 3729) next to the SFLOW-MIB.
func (d *Daemon) startApps(ctx context.Context, s config.Settings, running *sync.WaitGroup) error {
	var err error
	d.apps, err = appsubagent.Start(ctx, appsConfig(s), d.log)
	if err != nil || d.apps == nil {
		return err
	}
	d.metrics.MustRegister(appsubagent.NewAppCollector(d.apps.Engine().Stats(), d.apps.Conns()...))
	d.agent.AddCollectorSet(&d.apps.Engine().Stats().Collectors)
	cfg := d.agent.Config()
	d.apps.SetAgentAddress(cfg.AgentAddress)
	d.apps.SetReceivers(cfg.Receivers)
	d.apmSubagent, err = d.agentxSubagent(s.AgentX, apmmib.OID, "sflowswitchd APM-MIB", apmmib.New(d.apps.APM(), apmmib.Options{Start: d.start}))
	if err != nil {
		return fmt.Errorf("APM-MIB subagent: %w", err)
	}
	if d.apmSubagent == nil {
		return nil // agentx off
	}
	running.Go(func() {
		if err := d.apmSubagent.Run(ctx); err != nil {
			d.log.Error("APM-MIB AgentX subagent stopped", "err", err)
		}
	})
	return nil
}
