package blocks

import (
	"errors"
	"time"

	lr "github.com/logbookhq/logbook/leaserecovery"
)

// Config tunes the block manager: leases, block recovery, storage-node
// liveness, re-replication and caching (leader soft state).
type Config struct {
	// LeaseSoftLimit: another writer may take a lease over after it.
	LeaseSoftLimit time.Duration
	// LeaseHardLimit: the leader releases or recovers the lease itself.
	LeaseHardLimit time.Duration
	// RecoveryTimeout: a recovery attempt's deadline; after it the lease
	// monitor re-drives the recovery with the next primary.
	RecoveryTimeout time.Duration
	// NodeStaleInterval: a node without a heartbeat for this long is not
	// live (not chosen as a target or a primary).
	NodeStaleInterval time.Duration
	// NodeDeadInterval: a node without a heartbeat for this long is dead:
	// its replicas stop counting and its blocks are re-replicated.
	NodeDeadInterval time.Duration
	// ReplicationCheckInterval: how often the replication monitor runs.
	ReplicationCheckInterval time.Duration
	// ReplicationStreams bounds the transfers in flight per source node
	// (HDFS dfs.namenode.replication.max-streams).
	ReplicationStreams int
	// ReplicationTimeout: a transfer not reported by its targets within
	// it is scheduled again.
	ReplicationTimeout time.Duration
	// SafeModeTimeout: a new leader leaves safe mode once every registered
	// node sent a full block report, or after this long.
	SafeModeTimeout time.Duration
	// LeaseCheckInterval: how often the lease monitor runs.
	LeaseCheckInterval time.Duration
	// MaxLeaseActionsPerCycle bounds the releases and recoveries one
	// monitor cycle proposes.
	MaxLeaseActionsPerCycle int
	// CacheCheckInterval: how often the cache monitor runs.
	CacheCheckInterval time.Duration
	// CacheTimeout: a cache or uncache command not shown by the node's
	// cache report within it is forgotten and the block judged again.
	CacheTimeout time.Duration
	// LookupChunk bounds the block lookups made under one hold of the
	// state machine's read lock, which applies wait for, and the blocks
	// handled under one hold of the soft state's lock, which every node's
	// heartbeats and reports wait for (default 4096; tests set it smaller
	// to interleave reports).
	LookupChunk int
}

// defaultLookupChunk is Config.LookupChunk's default.
const defaultLookupChunk = 4096

// DefaultConfig returns the defaults (HDFS lease limits).
func DefaultConfig() Config {
	return Config{
		LeaseSoftLimit:           60 * time.Second,
		LeaseHardLimit:           1200 * time.Second,
		RecoveryTimeout:          90 * time.Second,
		NodeStaleInterval:        30 * time.Second,
		NodeDeadInterval:         10 * time.Minute,
		ReplicationCheckInterval: 3 * time.Second,
		ReplicationStreams:       2,
		ReplicationTimeout:       5 * time.Minute,
		SafeModeTimeout:          30 * time.Second,
		LeaseCheckInterval:       time.Second,
		MaxLeaseActionsPerCycle:  100,
		CacheCheckInterval:       3 * time.Second,
		CacheTimeout:             time.Minute,
		LookupChunk:              defaultLookupChunk,
	}
}

// WithDefaults fills zero fields (a Config built without DefaultConfig).
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.LeaseSoftLimit, d.LeaseSoftLimit)
	set(&c.LeaseHardLimit, d.LeaseHardLimit)
	set(&c.RecoveryTimeout, d.RecoveryTimeout)
	set(&c.NodeStaleInterval, d.NodeStaleInterval)
	set(&c.NodeDeadInterval, d.NodeDeadInterval)
	set(&c.ReplicationCheckInterval, d.ReplicationCheckInterval)
	set(&c.ReplicationTimeout, d.ReplicationTimeout)
	if c.ReplicationStreams == 0 {
		c.ReplicationStreams = d.ReplicationStreams
	}
	set(&c.SafeModeTimeout, d.SafeModeTimeout)
	set(&c.LeaseCheckInterval, d.LeaseCheckInterval)
	if c.MaxLeaseActionsPerCycle == 0 {
		c.MaxLeaseActionsPerCycle = d.MaxLeaseActionsPerCycle
	}
	set(&c.CacheCheckInterval, d.CacheCheckInterval)
	set(&c.CacheTimeout, d.CacheTimeout)
	if c.LookupChunk <= 0 {
		c.LookupChunk = d.LookupChunk
	}
	return c
}

// Validate checks the (defaulted) values.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.LeaseSoftLimit < 0 || c.LeaseHardLimit < 0 || c.RecoveryTimeout < 0 || c.NodeStaleInterval < 0 ||
		c.SafeModeTimeout < 0 || c.LeaseCheckInterval < 0 || c.MaxLeaseActionsPerCycle < 0 ||
		c.NodeDeadInterval < 0 || c.ReplicationCheckInterval < 0 || c.ReplicationStreams < 0 || c.ReplicationTimeout < 0 ||
		c.CacheCheckInterval < 0 || c.CacheTimeout < 0 {
		return errors.New("fs: durations and limits must not be negative")
	}
	if c.NodeDeadInterval < c.NodeStaleInterval {
		return errors.New("fs: dead-node interval below the stale-node interval")
	}
	if c.LeaseSoftLimit > c.LeaseHardLimit {
		return errors.New("fs: lease soft limit above the hard limit")
	}
	return nil
}

// rules is the leaserecovery view of the config.
func (c Config) rules() lr.Config {
	return lr.Config{SoftLimit: c.LeaseSoftLimit, HardLimit: c.LeaseHardLimit, RecoveryTimeout: c.RecoveryTimeout, StaleInterval: c.NodeStaleInterval}
}
