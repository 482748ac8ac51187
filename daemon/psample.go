package daemon

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
	"github.com/sflowswitchd/sflowswitchd/source"
)

// autoPsample tells whether hook auto samples some ports through psample:
// the kernel has psample and act_sample, and a port offloads tc
// (hw-tc-offload: a switchdev ASIC port) at start. Without such a port
// nothing of psample is opened (no socket, no watcher).
func autoPsample(fs *features.Features, log *slog.Logger) bool {
	if !fs.Has(features.FeaturePsample) || !fs.Has(features.FeatureActSample) {
		return false
	}
	links, err := netlink.LinkList()
	if err != nil {
		log.Warn("hook auto: listing the ports to find those that offload tc", "err", err)
		return false
	}
	for _, l := range links {
		if on, err := psample.TCOffload(l.Attrs().Name); err == nil && on {
			log.Info("hook auto: ports that offload tc are sampled through psample", "first", l.Attrs().Name)
			return true
		}
	}
	return false
}

// offloads tells whether port ifindex offloads tc (hw-tc-offload on).
func offloads(ifindex uint32) bool {
	l, err := netlink.LinkByIndex(int(ifindex))
	if err != nil {
		return false
	}
	on, err := psample.TCOffload(l.Attrs().Name)
	return err == nil && on
}

// bpfPortHooks tells whether a port_hook entry puts a port on the BPF
// samplers (auto, xdp or tc) under hook psample.
func bpfPortHooks(s config.Settings) bool {
	for _, h := range s.PortHook {
		if h != "psample" {
			return true
		}
	}
	return false
}

// usePsample tells whether the ports are sampled through psample: hook
// psample (the agent's rules) or a listen-only group.
func usePsample(s config.Settings) bool {
	return s.Hook == "psample" || s.PsampleGroup != 0 || s.PsampleIngressGroup != 0 || s.PsampleEgressGroup != 0
}

// psampleConfig is the psample path's part of the settings (start-up
// only).
func psampleConfig(s config.Settings, log *slog.Logger, state *persist.Store) source.PsampleConfig {
	return source.PsampleConfig{Workers: s.Workers, ListenGroup: s.PsampleGroup, Logger: log, State: state,
		IngressGroup: s.PsampleIngressGroup, EgressGroup: s.PsampleEgressGroup,
		InstallRules: s.Dent, SoftwareRules: s.DentSW, Conn: psample.ConnConfig{Intake: intakeSetting(s.PsampleIntake)}}
}

// intakeSetting is the psample intake a validated psample_intake names.
func intakeSetting(v string) psample.Intake {
	switch v {
	case "netlink":
		return psample.IntakeNetlink
	case "tap":
		return psample.IntakeTap
	}
	return psample.IntakeAuto
}

// The psample readers' metrics: every sample the kernel numbered and the
// agent did not read is in lost (the GROUP_SEQ gaps), every socket
// overrun in overruns.
var (
	psampleLost = prom.Desc("psample_samples_lost_total",
		"Samples the kernel took on the PSAMPLE channel that the agent did not receive (gaps in PSAMPLE_ATTR_GROUP_SEQ; with the tap, the samples its ring had no room for), per worker.", "worker")
	psampleIntake = prom.Desc("psample_intake",
		"1 for the way the psample samples come in: tap (fentry on psample_sample_packet, a ring read in place) or netlink (a message each).", "intake")
	psampleTapShort = prom.Desc("psample_tap_short_copies_total",
		"Samples the tap delivered with fewer header bytes than wanted: the rest of the frame was in page fragments, which a tracing program cannot read.")
	psampleOverruns = prom.Desc("psample_socket_overruns_total",
		"Times a worker's psample socket reported ENOBUFS (its buffer was full; the samples lost are in psample_samples_lost_total).", "worker")
	psampleForeign = prom.Desc("psample_foreign_samples_total",
		"Samples read of groups or ports the worker does not sample (other programs' rules, other workers' ports).", "worker")
	psampleRestarts = prom.Desc("psample_group_restarts_total",
		"Times a psample group's sequence restarted (its last rule removed and made anew).", "worker")
	psamplePoolErrors = prom.Desc("psample_pool_read_errors_total",
		"Port counter reads (RTM_GETSTATS) that failed: the samples of that batch carried the pool of the previous read.", "worker")
	psampleUnsent = prom.Desc("psample_samples_unsent_total",
		"Samples read from a worker's psample socket after the workers stopped (at exit or an upgrade in place), not sent: counted in their ports' drops, which the agent's state carries to the next program.", "worker")
	psampleEgressRefused = prom.Desc("psample_egress_refused_total",
		"Ports whose egress sampling rule the kernel refused (sampled at ingress only).")
	psampleRejoins = prom.Desc("psample_family_rejoins_total",
		"Times the psample family was made anew (module reload) and the readers re-joined it.")
	psampleFamilyGone = prom.Desc("psample_family_gone",
		"1 while the kernel has no psample family (module unloaded): no sample can arrive.")
)

// psampleFamilyCheck is how often the psample family is resolved when
// generic netlink announced nothing (source.Psample.WatchFamily).
const psampleFamilyCheck = 5 * time.Second

// psampleCollector exports the psample readers' counters.
type psampleCollector struct{ p *source.Psample }

func (c psampleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{psampleLost, psampleIntake, psampleTapShort, psampleOverruns, psampleForeign, psampleRestarts, psamplePoolErrors, psampleUnsent, psampleEgressRefused, psampleRejoins, psampleFamilyGone} {
		ch <- d
	}
}

func (c psampleCollector) Collect(ch chan<- prometheus.Metric) {
	for w := range c.p.Workers() {
		st := c.p.ReaderStats(w)
		l := strconv.Itoa(w)
		ch <- prom.Counter(psampleLost, st.Lost.Load(), l)
		ch <- prom.Counter(psampleOverruns, st.Overruns.Load(), l)
		ch <- prom.Counter(psampleForeign, st.Foreign.Load(), l)
		ch <- prom.Counter(psampleRestarts, st.Restarts.Load(), l)
		ch <- prom.Counter(psamplePoolErrors, st.PoolErrors.Load(), l)
		ch <- prom.Counter(psampleUnsent, st.Unsent.Load(), l)
	}
	if in := c.p.Intake(); in != psample.IntakeAuto {
		ch <- prometheus.MustNewConstMetric(psampleIntake, prometheus.GaugeValue, 1, in.String())
		if in == psample.IntakeTap {
			if st, err := c.p.TapStats(); err == nil {
				ch <- prom.Counter(psampleTapShort, st.ShortCopies)
			}
		}
	}
	ch <- prom.Counter(psampleEgressRefused, c.p.EgressRefused.Load())
	ch <- prom.Counter(psampleRejoins, c.p.Rejoins.Load())
	gone := 0.0
	if c.p.FamilyGone.Load() {
		gone = 1
	}
	ch <- prometheus.MustNewConstMetric(psampleFamilyGone, prometheus.GaugeValue, gone)
}
