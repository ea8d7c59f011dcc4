package console

import (
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

type pbEvent = pb.StoredEvent

// The views: one per page, what its template renders and what its JSON
// API (/ui/api/<page>) answers.

// Origin says where a page's figures come from and how fresh they are.
type Origin struct {
	// Member answered the request; its view is Member's.
	Member Member `json:"member"`
	// From names, per group of figures, whose state they are: "member c2's
	// applied state" or "the leader (c1)".
	From []string `json:"from"`
	// At is when the page was built.
	At time.Time `json:"at"`
}

// OverviewView is the overview page.
type OverviewView struct {
	Origin
	ClusterID    string      `json:"cluster_id"`
	LogFormat    uint32      `json:"log_format"`
	LeaderID     string      `json:"leader_id"`
	Term         uint64      `json:"term"`
	CommitIndex  uint64      `json:"commit_index"`
	AppliedIndex uint64      `json:"applied_index"`
	Members      []MemberRow `json:"members"`
	Health       []Health    `json:"health"`
	Charts       []Chart     `json:"charts"`
	// Nodes summarises the storage nodes (nil: the leader did not answer).
	Nodes *NodesSummary `json:"nodes,omitempty"`
}

// MemberRow is one coordinator as Cluster.Status reports it, with this
// member's gossip view of it.
type MemberRow struct {
	ID            string `json:"id"`
	RaftAddr      string `json:"raft_addr"`
	GRPCAddr      string `json:"grpc_addr"`
	HTTPAddr      string `json:"http_addr"`
	Suffrage      string `json:"suffrage"`
	RaftState     string `json:"raft_state"`
	Leader        bool   `json:"leader"`
	Term          uint64 `json:"term"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	LastContactMs int64  `json:"last_contact_ms"`
	Healthy       bool   `json:"healthy"`
	Gossip        string `json:"gossip"`
	Error         string `json:"error,omitempty"`
}

// Severity of a health item.
const (
	SevCritical = "critical"
	SevWarning  = "warning"
	SevInfo     = "info"
)

// Health is one health check that does not pass.
type Health struct {
	Severity string `json:"severity"`
	Check    string `json:"check"`
	Detail   string `json:"detail"`
}

// NodesSummary is the storage nodes in a few figures (ListNodes).
type NodesSummary struct {
	Total           int    `json:"total"`
	Live            int    `json:"live"`
	Stale           int    `json:"stale"`
	Dead            int    `json:"dead"`
	FailedVolumes   int    `json:"failed_volumes"`
	SafeMode        bool   `json:"safe_mode"`
	UnderReplicated uint64 `json:"under_replicated_blocks"`
	Missing         uint64 `json:"missing_blocks"`
	Pending         uint64 `json:"pending_replications"`
}

// Chart is one metric over the last ChartWindow.
type Chart struct {
	Title  string    `json:"title"`
	Points []float64 `json:"points"`
	// Last and Max are the latest and the largest point.
	Last float64 `json:"last"`
	Max  float64 `json:"max"`
	// Every is the time between points.
	EverySeconds float64 `json:"every_seconds"`
}

// JournalView is the journal page.
type JournalView struct {
	Origin
	Positions JournalPositions `json:"positions"`
	Segments  []SegmentRow     `json:"segments"`
	SegPage   PageInfo         `json:"segments_page"`
	Consumers []ConsumerRow    `json:"consumers"`
	ConPage   PageInfo         `json:"consumers_page"`
	// Types counts the retained events by type, up to seq Indexed (the
	// console's index follows the journal; Indexed < SafePos while it
	// catches up).
	Types   []TypeCount `json:"event_types"`
	Indexed uint64      `json:"indexed_through"`
}

// JournalPositions are Journal.Positions.
type JournalPositions struct {
	WritePos     uint64 `json:"write_pos"`
	SafePos      uint64 `json:"safe_pos"`
	ExpirePos    uint64 `json:"expire_pos"`
	TrimmedPos   uint64 `json:"trimmed_pos"`
	EventCount   uint64 `json:"event_count"`
	SegmentCount uint64 `json:"segment_count"`
	AppliedIndex uint64 `json:"applied_index"`
	LogFormat    uint32 `json:"log_format"`
	// Paused is known on the leader only (its batcher holds appends).
	Paused      bool   `json:"paused"`
	PausedKnown bool   `json:"paused_known"`
	Warning     string `json:"warning,omitempty"`
}

// SegmentRow is one segment (Journal.Segments).
type SegmentRow struct {
	ID       uint64 `json:"id"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Events   uint64 `json:"events"`
	Bytes    uint64 `json:"bytes"`
	State    string `json:"state"`
}

// ConsumerRow is one consumer (Journal.ListConsumers).
type ConsumerRow struct {
	Name     string `json:"name"`
	AckedSeq uint64 `json:"acked_seq"`
	Lag      uint64 `json:"lag"`
}

// NodesView is the storage nodes page.
type NodesView struct {
	Origin
	Summary NodesSummary `json:"summary"`
	Nodes   []NodeRow    `json:"nodes"`
	Page    PageInfo     `json:"page"`
}

// NodeRow is one storage node (Namespace.ListNodes).
type NodeRow struct {
	ID       string `json:"id"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	// State is "live", "stale" (silent past the stale interval, or gossip
	// says it is gone) or "dead" (past the dead interval).
	State           string        `json:"state"`
	Gossip          string        `json:"gossip,omitempty"`
	LastHeartbeatMs int64         `json:"last_heartbeat_ms"`
	Replicas        uint64        `json:"replicas"`
	ByState         ReplicaCounts `json:"replicas_by_state"`
	FullReport      bool          `json:"full_report"`
	LastFullMs      int64         `json:"last_full_report_ms"`
	LastIncrMs      int64         `json:"last_incremental_report_ms"`
	Volumes         []VolumeRow   `json:"volumes"`
	Capacity        uint64        `json:"capacity"`
	Used            uint64        `json:"used"`
	Free            uint64        `json:"free"`
	FailedVolumes   int           `json:"failed_volumes"`
	CacheUsed       uint64        `json:"cache_used"`
	CacheCapacity   uint64        `json:"cache_capacity"`
}

// ReplicaCounts counts replicas by state.
type ReplicaCounts struct {
	Finalized uint64 `json:"FINALIZED"`
	RBW       uint64 `json:"RBW"`
	RWR       uint64 `json:"RWR"`
	RUR       uint64 `json:"RUR"`
	Temporary uint64 `json:"TEMPORARY"`
}

// VolumeRow is one volume as the node's heartbeat reports it.
type VolumeRow struct {
	ID       string `json:"id"`
	Capacity uint64 `json:"capacity"`
	Used     uint64 `json:"used"`
	Free     uint64 `json:"free"`
	Failed   bool   `json:"failed"`
}

// NamespaceView is a directory of the namespace browser.
type NamespaceView struct {
	Origin
	Dir     string  `json:"dir"`
	Parents []Crumb `json:"parents"`
	Entries []Entry `json:"entries"`
	// After is the cursor this page started after; Next the cursor of the
	// next page ("" at the end). Scanned is how many entries the filter
	// looked at for this page (at most MaxScan).
	After   string `json:"after,omitempty"`
	Next    string `json:"next,omitempty"`
	Filter  string `json:"filter,omitempty"`
	Limit   int    `json:"limit"`
	Scanned int    `json:"scanned"`
}

// Crumb is one ancestor directory.
type Crumb struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Entry is one directory entry (Namespace.List).
type Entry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	File *File  `json:"file,omitempty"`
}

// File is a file's status (Namespace.Stat, List).
type File struct {
	Length            uint64    `json:"length"`
	Replication       uint32    `json:"replication"`
	BlockSize         uint64    `json:"block_size"`
	Blocks            int       `json:"blocks"`
	UnderConstruction bool      `json:"under_construction"`
	LeaseHolder       string    `json:"lease_holder,omitempty"`
	Modified          time.Time `json:"modified"`
}

// FileView is a file's page: its status and its blocks with every replica.
type FileView struct {
	Origin
	Path    string      `json:"path"`
	Parents []Crumb     `json:"parents"`
	File    File        `json:"file"`
	Blocks  []BlockRow  `json:"blocks"`
	Page    PageInfo    `json:"page"`
	Reports bool        `json:"replicas_from_leader"`
	Recov   []RecovLink `json:"recoveries"`
}

// BlockRow is one block of a file.
type BlockRow struct {
	ID       uint64       `json:"id"`
	GS       uint64       `json:"gs"`
	Length   uint64       `json:"length"`
	State    string       `json:"state"`
	Expected []string     `json:"expected_locations"`
	Replicas []ReplicaRow `json:"replicas"`
	// Recovery is the recovery in flight, if any.
	Recovery *BlockRecovery `json:"recovery,omitempty"`
}

// ReplicaRow is one node's reported replica of a block.
type ReplicaRow struct {
	Node    string `json:"node"`
	State   string `json:"state"`
	Length  int64  `json:"length"`
	GS      uint64 `json:"gs"`
	Corrupt bool   `json:"corrupt,omitempty"`
	Cached  bool   `json:"cached,omitempty"`
	// Stale: its GS is older than the block's.
	Stale bool `json:"stale,omitempty"`
}

// BlockRecovery is a block's recovery in flight.
type BlockRecovery struct {
	RecoveryID uint64    `json:"recovery_id"`
	Primary    string    `json:"primary"`
	Attempt    uint32    `json:"attempt"`
	Deadline   time.Time `json:"deadline"`
}

// RecovLink names a recovery of one of a file's blocks.
type RecovLink struct {
	BlockID uint64 `json:"block_id"`
	Outcome string `json:"outcome"`
}

// RecoveriesView is the recoveries page: every block recovery in the
// retained journal (coord recovery ls).
type RecoveriesView struct {
	Origin
	Recoveries []Recovery `json:"recoveries"`
	Page       PageInfo   `json:"page"`
	Indexed    uint64     `json:"indexed_through"`
	SafePos    uint64     `json:"safe_pos"`
}

// RecoveryView is one block's recoveries (coord recovery show).
type RecoveryView struct {
	Origin
	Recovery Recovery `json:"recovery"`
}

// Recovery is every recovery of one block, rebuilt from the journal's
// audit events: the fields of coord recovery ls --json, plus the outcome
// in words and how long it took.
type Recovery struct {
	BlockID      uint64            `json:"block_id"`
	Path         string            `json:"path"`
	OldGS        uint64            `json:"old_gs"`
	Attempts     []RecoveryAttempt `json:"attempts"`
	Primary      string            `json:"primary"`
	Committed    bool              `json:"committed"`
	RecoveryID   uint64            `json:"recovery_id,omitempty"`
	NewGS        uint64            `json:"new_gs,omitempty"`
	Length       uint64            `json:"length,omitempty"`
	Participants []string          `json:"participants,omitempty"`
	Deleted      bool              `json:"deleted,omitempty"`
	FileClosed   bool              `json:"file_closed,omitempty"`
	StartedAt    time.Time         `json:"started_at"`
	CommittedAt  *time.Time        `json:"committed_at,omitempty"`
	// DurationMs is from the first attempt to the commit (or to now while
	// in progress).
	DurationMs int64  `json:"duration_ms"`
	Outcome    string `json:"outcome"`
}

// RecoveryAttempt is one attempt: a logbook.recovery.started event.
type RecoveryAttempt struct {
	RecoveryID uint64    `json:"recovery_id"`
	Attempt    uint32    `json:"attempt"`
	Primary    string    `json:"primary"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"started_at"`
	Deadline   time.Time `json:"deadline"`
	Seq        uint64    `json:"seq"`
}
