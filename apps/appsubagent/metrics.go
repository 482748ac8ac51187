package appsubagent

import (
	"fmt"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

type appMetric struct {
	desc  *prometheus.Desc
	gauge bool
	get   func(*app.Stats) uint64
}

var appMetrics = []appMetric{
	{prom.Desc("app_samples_queued_total", "Application samples that passed validation and entered the engine's queue."), false, func(s *app.Stats) uint64 { return s.Queued.Load() }},
	{prom.Desc("app_samples_accepted_total", "Application samples the engine took on (given a data source and handed to the receivers); samples refused after queueing are in rejected, not here."), false, func(s *app.Stats) uint64 { return s.Accepted.Load() }},
	{prom.Desc("app_flow_samples_total", "Application flow samples encoded into datagrams."), false, func(s *app.Stats) uint64 { return s.FlowSamples.Load() }},
	{prom.Desc("app_counter_samples_total", "Application counter samples encoded into datagrams."), false, func(s *app.Stats) uint64 { return s.CounterSamples.Load() }},
	{prom.Desc("app_datagrams_sent_total", "Application datagrams sent to collectors."), false, func(s *app.Stats) uint64 { return s.Datagrams.Load() }},
	{prom.Desc("app_bytes_sent_total", "Bytes of application datagrams sent."), false, func(s *app.Stats) uint64 { return s.Bytes.Load() }},
	{prom.Desc("app_send_errors_total", "Application datagrams the socket refused."), false, func(s *app.Stats) uint64 { return s.SendErrors.Load() }},
	{prom.Desc("app_samples_unsent_total", "Application samples in datagrams the socket refused."), false, func(s *app.Stats) uint64 { return s.SamplesUnsent.Load() }},
	{prom.Desc("app_samples_too_large_total", "Application samples larger than a receiver's maximum datagram size."), false, func(s *app.Stats) uint64 { return s.TooLarge.Load() }},
	{prom.Desc("app_apm_added_total", "Application transactions aggregated into the APM reports."), false, func(s *app.Stats) uint64 { return s.APMAdded.Load() }},
	{prom.Desc("app_apm_skipped_total", "Application transactions the APM reports could not measure (no socket addresses)."), false, func(s *app.Stats) uint64 { return s.APMSkipped.Load() }},
	{prom.Desc("app_sources", "Application data sources (service ports)."), true, func(s *app.Stats) uint64 { return uint64(s.Sources.Load()) }},
	{prom.Desc("app_sources_reclaimed_total", "Idle application data sources closed to make room for a new application when every slot was taken."), false, func(s *app.Stats) uint64 { return s.SourcesReclaimed.Load() }},
}

var (
	appRejected = prom.Desc("app_samples_rejected_total", "Application samples rejected, by reason.", "reason")
	apiDrops    = prom.Desc("app_api_socket_drops_total", "Datagrams the kernel dropped on the application API socket (receive buffer full): the socket's sk_drops, as /proc/net/udp shows them.")
)

type appCollector struct {
	stats *app.Stats
	api   []syscall.Conn
}

// NewAppCollector returns a collector of the application sub-agent's
// counters (sflowswitchd_app_*) and, when api sockets are given, the sum
// of their kernel drops (the API listens on 127.0.0.1 and ::1).
func NewAppCollector(stats *app.Stats, api ...syscall.Conn) prometheus.Collector {
	return appCollector{stats, api}
}

func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range appMetrics {
		ch <- m.desc
	}
	ch <- appRejected
	ch <- apiDrops
}

func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range appMetrics {
		if m.gauge {
			ch <- prom.Gauge(m.desc, float64(m.get(c.stats)))
		} else {
			ch <- prom.Counter(m.desc, m.get(c.stats))
		}
	}
	for _, r := range app.Reasons() {
		ch <- prom.Counter(appRejected, c.stats.Rejected(r), r.String())
	}
	if len(c.api) > 0 {
		var sum uint64
		var err error
		for _, conn := range c.api {
			if conn == nil {
				continue
			}
			n, e := SocketDrops(conn)
			sum += n
			if e != nil {
				err = e
			}
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(apiDrops, err)
		} else {
			ch <- prom.Counter(apiDrops, sum)
		}
	}
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of sk_drops in the array
// getsockopt(SO_MEMINFO) returns (linux/sock_diag.h).
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// SocketDrops returns the datagrams the kernel dropped on conn's socket
// (sk_drops: receive buffer full, or refused by a filter). It is the
// counter /proc/net/udp prints in its drops column and SO_RXQ_OVFL
// reports per message, read here with one getsockopt(SO_MEMINFO) per
// scrape rather than on every receive.
func SocketDrops(conn syscall.Conn) (uint64, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("socket drops: %w", err)
	}
	var mem [skMeminfoVars]uint32
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = getsockoptMeminfo(int(fd), mem[:])
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("socket drops: SO_MEMINFO: %w", err)
	}
	return uint64(mem[skMeminfoDrops]), nil
}
