package coordserver

import (
	"net/http"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/rpcmetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are registered on a registry owned by one Server (several run in
// one process under `coord dev` and in tests): no package globals.
type metrics struct {
	reg           *prometheus.Registry
	commitSeconds prometheus.Histogram
	applySeconds  prometheus.Histogram
	storeSeconds  prometheus.Histogram
	batchOps      prometheus.Histogram
	leaderChanges prometheus.Counter
	rpc           *rpcmetrics.Metrics
	// Recovery commits from primaries by result (the block manager has
	// the rest of the file system's: blocks.Manager.Collectors).
	recoveryCommits *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "logbook_raft_commit_seconds", Help: "Time from handing a batch to Raft on the leader until it was committed and applied.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	})
	m.applySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "logbook_fsm_apply_seconds", Help: "Time the state machine spent applying one batch of log entries.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18),
	})
	m.storeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "logbook_raft_log_store_seconds", Help: "Time this member's Raft log store took to write and sync one batch of entries (leader and follower alike; the fsync is part of it).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
	})
	m.batchOps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "logbook_journal_batch_ops", Help: "Client requests per Raft entry (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "logbook_raft_leader_changes_total", Help: "Leader changes observed by this member."})
	m.rpc = rpcmetrics.New()
	m.recoveryCommits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logbook_fs_recovery_commits_total",
		Help: "Block recovery commits from primaries, by result (ok or the refusal reason)."}, []string{"result"})
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	m.reg.MustRegister(m.rpc.Collectors()...)
	if src := s.cfg.Security.TLS; src != nil {
		m.reg.MustRegister(gauge(tlsExpiryMetric, tlsExpiryHelp, func() float64 { return float64(src.NotAfter().Unix()) }))
	}
	m.reg.MustRegister(m.commitSeconds, m.applySeconds, m.storeSeconds, m.batchOps, m.leaderChanges,
		m.recoveryCommits,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gauge("logbook_raft_term", "Current Raft term.", func() float64 { return float64(s.raftOr(func(r *raft.Raft) uint64 { return r.CurrentTerm() })) }),
		gauge("logbook_raft_commit_index", "Raft commit index.", func() float64 { return float64(s.raftOr(func(r *raft.Raft) uint64 { return r.CommitIndex() })) }),
		gauge("logbook_raft_applied_index", "Index applied by the state machine.", func() float64 {
			if s.fsm == nil {
				return 0
			}
			return float64(s.fsm.AppliedIndex())
		}),
		gauge("logbook_raft_is_leader", "1 on the leader.", func() float64 {
			return float64(s.raftOr(func(r *raft.Raft) uint64 {
				if r.State() == raft.Leader {
					return 1
				}
				return 0
			}))
		}),
		gauge("logbook_journal_segments", "Retained journal segments.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(len(st.Segments())) })
		}),
		gauge("logbook_journal_events", "Retained journal events.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.EventCount()) })
		}),
		gauge("logbook_journal_safe_pos", "Last safe (committed and applied) seq.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.NextSeq() - 1) })
		}),
		gauge("logbook_journal_trimmed_pos", "First retained seq.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.FirstSeq()) })
		}),
		gauge("logbook_journal_sessions", "Client sessions the state machine keeps for exactly-once appends (at most 65,536).", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.SessionCount()) })
		}),
		gauge("logbook_journal_session_results", "Request results the sessions keep for retries, all sessions together (at most 1,048,576 from log format 5 on).", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.KeptResults()) })
		}),
		gauge("logbook_startup_replay_seconds", "How long this member took at its last start to restore its snapshot and apply the log after it, until caught up (the time so far while it replays; 0 if it started empty).", func() float64 {
			return s.startupReplay(time.Now()).GetSeconds()
		}),
		gauge("logbook_startup_replay_events", "Journal events this member rebuilt at its last start: those its snapshot held plus those the log entries after it appended.", func() float64 {
			r := s.startupReplay(time.Now())
			return float64(r.GetSnapshotEvents() + r.GetLogEvents())
		}),
		gauge("logbook_journal_consumer_lag_max", "Events between the safe position and the slowest registered consumer's acknowledged seq (0 without consumers).", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 {
				safe, lag := st.NextSeq()-1, uint64(0)
				for _, c := range st.Consumers() {
					lag = max(lag, safe-min(safe, c.AckedSeq))
				}
				return float64(lag)
			})
		}),
		gauge("logbook_journal_tail_streams", "Journal tail streams this member is serving.", func() float64 { return float64(s.tailStreams.Load()) }),
		gauge("logbook_journal_behind_on_trimming", "1 while a lagging consumer holds over twice the segment limit.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 {
				if s.trimWarning(st) != "" {
					return 1
				}
				return 0
			})
		}),
		gauge("logbook_journal_retained_bytes", "What the retained events take, about their memory: type and payload bytes plus 32 per event (compared with --journal-max-retained-bytes).", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 { return float64(st.RetainedBytes()) })
		}),
		gauge("logbook_journal_full", "1 while the retained events are over this member's retention quota (--journal-max-retained-bytes): as leader it refuses new appends.", func() float64 {
			return s.journalStat(func(st *fsm.State) float64 {
				if s.quotaWarning(st) != "" {
					return 1
				}
				return 0
			})
		}),
		gauge("logbook_journal_config_mismatch", "1 while this member's journal settings differ from the cluster's: before log format 11 a leader change to it would replace them; from 11 on its explicitly given flags are not used.", func() float64 {
			if s.configWarning() != "" {
				return 1
			}
			return 0
		}),
		gauge("logbook_raft_last_contact_seconds", "Time since this member last heard from the leader.", func() float64 {
			if s.raft == nil || s.raft.State() == raft.Leader || s.raft.LastContact().IsZero() {
				return 0
			}
			return time.Since(s.raft.LastContact()).Seconds()
		}),
	)
	return m
}

func (s *Server) journalStat(fn func(*fsm.State) float64) float64 {
	if s.fsm == nil {
		return 0
	}
	var v float64
	s.fsm.View(func(st *fsm.State) { v = fn(st) })
	return v
}

func (s *Server) raftOr(fn func(*raft.Raft) uint64) uint64 {
	if s.raft == nil {
		return 0
	}
	return fn(s.raft)
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// timedFSM measures apply time outside the deterministic state machine.
type timedFSM struct {
	*fsm.FSM
	m *metrics
}

func (t *timedFSM) Apply(l *raft.Log) any {
	return t.ApplyBatch([]*raft.Log{l})[0]
}

func (t *timedFSM) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := t.FSM.ApplyBatch(logs)
	t.m.applySeconds.Observe(time.Since(start).Seconds())
	return out
}

// timedLogStore measures the log store's writes: Raft stores an entry on
// the leader before it replicates it and on each follower before it
// answers, so this time (an fsync inside) is part of every commit twice.
// It is etcd's wal_fsync_duration for this store.
type timedLogStore struct {
	raft.LogStore
	m *metrics
}

func (t *timedLogStore) StoreLog(l *raft.Log) error {
	return t.StoreLogs([]*raft.Log{l})
}

func (t *timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLogs(logs)
	t.m.storeSeconds.Observe(time.Since(start).Seconds())
	return err
}

// IsMonotonic passes the store's answer on (raft-wal refuses gaps, and
// Raft then deletes the old log after a snapshot restore): wrapping must
// not change how Raft treats the store.
func (t *timedLogStore) IsMonotonic() bool {
	ms, ok := t.LogStore.(raft.MonotonicLogStore)
	return ok && ms.IsMonotonic()
}

var (
	_ raft.FSM               = (*timedFSM)(nil)
	_ raft.BatchingFSM       = (*timedFSM)(nil)
	_ raft.MonotonicLogStore = (*timedLogStore)(nil)
)
