package blocks

import "github.com/prometheus/client_golang/prometheus"

// metrics are the manager's own, registered by its owner on the process's
// registry (Collectors): no package globals, since several managers run in
// one process under coord dev and in tests.
type metrics struct {
	// leaseReleases: leases released, by action; replScheduled:
	// re-replication transfers sent; replExcess: excess replicas
	// invalidated.
	leaseReleases *prometheus.CounterVec
	replScheduled prometheus.Counter
	replExcess    prometheus.Counter
	collectors    []prometheus.Collector
}

func newMetrics(m *Manager) metrics {
	met := metrics{
		leaseReleases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logbook_fs_lease_releases_total",
			Help: "Leases the leader released, by action: close, remove_last_block, start_recovery (started or re-driven)."}, []string{"action"}),
		replScheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: "logbook_fs_replications_scheduled_total", Help: "Re-replication transfers the leader sent to source nodes."}),
		replExcess:    prometheus.NewCounter(prometheus.CounterOpts{Name: "logbook_fs_excess_replicas_invalidated_total", Help: "Excess replicas the leader invalidated."}),
	}
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	repl := func(fn func(ReplicationStats) int) func() float64 {
		return func() float64 { return float64(fn(m.ReplicationStats())) }
	}
	met.collectors = []prometheus.Collector{
		met.leaseReleases, met.replScheduled, met.replExcess,
		gauge("logbook_fs_under_replicated_blocks", "COMPLETE blocks with fewer good replicas than their replication factor (leader).", repl(func(r ReplicationStats) int { return r.UnderReplicated })),
		gauge("logbook_fs_missing_blocks", "COMPLETE blocks without a good replica on a live node (leader).", repl(func(r ReplicationStats) int { return r.Missing })),
		gauge("logbook_fs_pending_replications", "Re-replication transfers in flight (leader).", repl(func(r ReplicationStats) int { return r.Pending })),
		gauge("logbook_fs_dead_nodes", "Storage nodes silent past the dead interval (leader).", repl(func(r ReplicationStats) int { return r.DeadNodes })),
		gauge("logbook_fs_safe_mode", "1 while the leader is in safe mode (and on followers).", func() float64 {
			if m.SafeMode() {
				return 1
			}
			return 0
		}),
	}
	return met
}

// Collectors are the manager's metrics, for the owner's registry.
func (m *Manager) Collectors() []prometheus.Collector { return m.met.collectors }
