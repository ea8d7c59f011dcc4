package client

import (
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// ClusterStatus is the cluster as one member sees it (Client.Status).
type ClusterStatus struct {
	ClusterID string
	// LeaderID and LeaderGRPCAddr are empty while the member knows no
	// leader.
	LeaderID       string
	LeaderGRPCAddr string
	Term           uint64
	CommitIndex    uint64
	AppliedIndex   uint64
	Members        []Member
	// ResponderID is the member that answered: member health is as it
	// sees its peers.
	ResponderID string
	// Warnings are health warnings, e.g. "behind on trimming: 9/4
	// segments".
	Warnings []string
}

// Member is one Raft member in a ClusterStatus.
type Member struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
	// Suffrage is "voter", "nonvoter" or "staging".
	Suffrage string
	Healthy  bool
	Leader   bool
	// LastContact is how long ago the member last heard from the leader
	// (0 for the leader itself); negative when the member did not answer.
	LastContact  time.Duration
	AppliedIndex uint64
	RaftState    string
	Error        string
	// StartupReplay is how the member rebuilt its state at its last
	// start; nil for a member that started empty, or that did not answer.
	StartupReplay *StartupReplay
	// TLSNotAfter is when the member's TLS certificate expires; zero when
	// the cluster runs without TLS or the member did not answer.
	TLSNotAfter time.Time
}

// StartupReplay is how a coordinator rebuilt its state at its last start:
// the snapshot it restored, then the log entries after it, until it had
// applied every entry its own log held when it started. The durations
// run from the member's start.
type StartupReplay struct {
	// SnapshotIndex is the restored snapshot's last index (0: none),
	// SnapshotEvents the journal events it held; SnapshotTime is until
	// the restore ended.
	SnapshotIndex  uint64
	SnapshotEvents uint64
	SnapshotTime   time.Duration
	// LastIndex is the last index of the member's own log when it
	// started.
	LastIndex uint64
	// LogEntries are the log entries applied after the snapshot, and
	// LogEvents the journal events they appended, until caught up.
	LogEntries uint64
	LogEvents  uint64
	// Time is until caught up; 0 while still replaying.
	Time     time.Duration
	CaughtUp bool
	// LogWait is until the first log entry after the snapshot applied (0:
	// none has yet): from SnapshotTime to LogWait the member waited to
	// learn a commit index, from LogWait to Time it replayed its log.
	LogWait time.Duration
	// LogWaitEvents are the journal events already applied at LogWait:
	// the log's own rate is over the events after them (LogEvents -
	// LogWaitEvents) from LogWait to Time.
	LogWaitEvents uint64
}

// VerifyResult is the outcome of Cluster.Verify.
type VerifyResult struct {
	// Index is the replicated checkpoint index the digests are taken at.
	Index   uint64
	Members []MemberDigest
	// Consistent: every member answered with the same digest.
	Consistent bool
}

// MemberDigest is one member's state digest in a VerifyResult.
type MemberDigest struct {
	ID string
	// Digest is the hex SHA-256 of the member's state at the index.
	Digest string
	Error  string
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func unixOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func toClusterStatus(st *pb.StatusResponse) ClusterStatus {
	out := ClusterStatus{
		ClusterID: st.GetClusterId(), LeaderID: st.GetLeaderId(), LeaderGRPCAddr: st.GetLeaderGrpcAddr(),
		Term: st.GetTerm(), CommitIndex: st.GetCommitIndex(), AppliedIndex: st.GetAppliedIndex(),
		ResponderID: st.GetResponderId(), Warnings: append([]string(nil), st.GetWarnings()...),
	}
	for _, m := range st.GetMembers() {
		out.Members = append(out.Members, Member{
			ID: m.GetId(), RaftAddr: m.GetRaftAddr(), GRPCAddr: m.GetGrpcAddr(), HTTPAddr: m.GetHttpAddr(),
			Suffrage: m.GetSuffrage(), Healthy: m.GetHealthy(), Leader: m.GetLeader(), LastContact: millis(m.GetLastContactMs()),
			AppliedIndex: m.GetAppliedIndex(), RaftState: m.GetRaftState(), Error: m.GetError(),
			StartupReplay: toStartupReplay(m.GetStartupReplay()), TLSNotAfter: unixOrZero(m.GetTlsNotAfterUnix()),
		})
	}
	return out
}

func toStartupReplay(r *pb.StartupReplay) *StartupReplay {
	if r == nil {
		return nil
	}
	return &StartupReplay{
		SnapshotIndex: r.GetSnapshotIndex(), SnapshotEvents: r.GetSnapshotEvents(), SnapshotTime: seconds(r.GetSnapshotSeconds()),
		LastIndex: r.GetLastIndex(), LogEntries: r.GetLogEntries(), LogEvents: r.GetLogEvents(),
		Time: seconds(r.GetSeconds()), CaughtUp: r.GetCaughtUp(), LogWait: seconds(r.GetLogWaitSeconds()),
		LogWaitEvents: r.GetLogWaitEvents(),
	}
}

func toVerifyResult(r *pb.VerifyResponse) VerifyResult {
	out := VerifyResult{Index: r.GetIndex(), Consistent: r.GetConsistent()}
	for _, m := range r.GetMembers() {
		out.Members = append(out.Members, MemberDigest{ID: m.GetId(), Digest: m.GetDigest(), Error: m.GetError()})
	}
	return out
}
