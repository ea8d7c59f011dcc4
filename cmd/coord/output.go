package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
)

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns an aligned table writer: cells are separated by tabs,
// rows end with a newline.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// statusJSON is the JSON shape of coord status.
type statusJSON struct {
	ClusterID    string `json:"cluster_id"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// AnsweredBy is the member whose view this is (member health is as
	// it sees its peers).
	AnsweredBy string       `json:"answered_by"`
	Members    []memberJSON `json:"members"`
	Warnings   []string     `json:"warnings"`
	// Storage is the leader's view of the storage nodes (absent when the
	// leader could not be asked).
	Storage *storageJSON `json:"storage,omitempty"`
}

// storageJSON summarises coord nodes for coord status.
type storageJSON struct {
	SafeMode              bool   `json:"safe_mode"`
	Nodes                 int    `json:"nodes"`
	Live                  int    `json:"live"`
	Stale                 int    `json:"stale"`
	Dead                  int    `json:"dead"`
	UnderReplicatedBlocks uint64 `json:"under_replicated_blocks"`
	MissingBlocks         uint64 `json:"missing_blocks"`
	PendingReplications   uint64 `json:"pending_replications"`
}

func toStorageJSON(r *pb.ListNodesResponse) *storageJSON {
	s := &storageJSON{SafeMode: r.SafeMode, Nodes: len(r.Nodes), UnderReplicatedBlocks: r.UnderReplicatedBlocks,
		MissingBlocks: r.MissingBlocks, PendingReplications: r.PendingReplications}
	for _, n := range r.Nodes {
		switch {
		case n.Dead:
			s.Dead++
		case n.Live:
			s.Live++
		default:
			s.Stale++
		}
	}
	return s
}

// memberJSON is one member in coord status and coord members.
type memberJSON struct {
	ID            string `json:"id"`
	RaftAddr      string `json:"raft_addr"`
	GRPCAddr      string `json:"grpc_addr"`
	Suffrage      string `json:"suffrage"`
	Healthy       bool   `json:"healthy"`
	LastContactMs int64  `json:"last_contact_ms"`
	// StartupReplay is how the member rebuilt its state at its last start;
	// absent if it started empty or did not answer.
	StartupReplay *replayJSON `json:"startup_replay,omitempty"`
}

// replayJSON is a member's startup replay (pb.StartupReplay).
type replayJSON struct {
	SnapshotIndex   uint64  `json:"snapshot_index"`
	SnapshotEvents  uint64  `json:"snapshot_events"`
	SnapshotSeconds float64 `json:"snapshot_seconds"`
	LastIndex       uint64  `json:"last_index"`
	LogEntries      uint64  `json:"log_entries"`
	LogEvents       uint64  `json:"log_events"`
	Seconds         float64 `json:"seconds"`
	CaughtUp        bool    `json:"caught_up"`
	EventsPerSecond float64 `json:"events_per_second"`
	// LogWaitSeconds: from the start until the first log entry applied
	// (the wait for a commit index); LogEventsPerSecond: the log's events
	// over the time from there until caught up.
	LogWaitSeconds     float64 `json:"log_wait_seconds"`
	LogEventsPerSecond float64 `json:"log_events_per_second"`
}

func toReplayJSON(r *pb.StartupReplay) *replayJSON {
	if r == nil {
		return nil
	}
	return &replayJSON{r.SnapshotIndex, r.SnapshotEvents, r.SnapshotSeconds, r.LastIndex, r.LogEntries, r.LogEvents, r.Seconds, r.CaughtUp, replayRate(r),
		r.LogWaitSeconds, logReplayRate(r)}
}

// logReplayRate is a finished replay's log events per second, from the
// first log entry's apply (after the wait for a commit index) until
// caught up; 0 while replaying or with no log replayed.
func logReplayRate(r *pb.StartupReplay) float64 {
	d := r.Seconds - r.LogWaitSeconds
	if !r.CaughtUp || r.LogWaitSeconds <= 0 || r.LogEvents == 0 || d <= 0 {
		return 0
	}
	return float64(r.LogEvents) / d
}

// replayRate is a finished replay's events per second (0 while replaying).
func replayRate(r *pb.StartupReplay) float64 {
	if !r.CaughtUp || r.Seconds <= 0 {
		return 0
	}
	return float64(r.SnapshotEvents+r.LogEvents) / r.Seconds
}

// writeReplays prints the members' startup replays, if any reported one:
// how each rebuilt its state when it last started.
func writeReplays(w io.Writer, ms []*pb.MemberStatus) {
	head := false
	for _, m := range ms {
		r := m.GetStartupReplay()
		if r == nil {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\nreplay at start (snapshot restore, then the log after it, until caught up)")
			head = true
		}
		if !r.CaughtUp {
			fmt.Fprintf(w, "  %s  replaying for %.2fs: snapshot at index %d (%d events) restored, log up to index %d to apply\n",
				m.GetId(), r.Seconds, r.SnapshotIndex, r.SnapshotEvents, r.LastIndex)
			continue
		}
		snap := fmt.Sprintf("no snapshot, log opened in %.2fs", r.SnapshotSeconds)
		if r.SnapshotIndex > 0 {
			snap = fmt.Sprintf("snapshot at index %d with %d events in %.2fs", r.SnapshotIndex, r.SnapshotEvents, r.SnapshotSeconds)
		}
		fmt.Fprintf(w, "  %s  %d events in %.2fs (%.0f events/s): %s, then %d log entries with %d events",
			m.GetId(), r.SnapshotEvents+r.LogEvents, r.Seconds, replayRate(r), snap, r.LogEntries, r.LogEvents)
		if rate := logReplayRate(r); rate > 0 {
			fmt.Fprintf(w, " in %.2fs (%.0f events/s) after %.2fs waiting for a commit index",
				r.Seconds-r.LogWaitSeconds, rate, r.LogWaitSeconds-r.SnapshotSeconds)
		}
		fmt.Fprintln(w)
	}
}

func toStatusJSON(st *pb.StatusResponse) statusJSON {
	return statusJSON{
		ClusterID:    st.GetClusterId(),
		Leader:       st.GetLeaderId(),
		Term:         st.GetTerm(),
		CommitIndex:  st.GetCommitIndex(),
		AppliedIndex: st.GetAppliedIndex(),
		AnsweredBy:   st.GetResponderId(),
		Members:      toMembersJSON(st.GetMembers()),
		Warnings:     append([]string{}, st.GetWarnings()...),
	}
}

func toMembersJSON(ms []*pb.MemberStatus) []memberJSON {
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberJSON{
			ID: m.GetId(), RaftAddr: m.GetRaftAddr(), GRPCAddr: m.GetGrpcAddr(), Suffrage: m.GetSuffrage(),
			Healthy: m.GetHealthy(), LastContactMs: m.GetLastContactMs(), StartupReplay: toReplayJSON(m.GetStartupReplay()),
		})
	}
	return out
}

// writeMembersTable prints the members of a status response.
func writeMembersTable(w io.Writer, ms []*pb.MemberStatus) error {
	t := newTable(w)
	io.WriteString(t, "ID\tSUFFRAGE\tLEADER\tHEALTHY\tLAST CONTACT\tAPPLIED\tRAFT\tGRPC\tERROR\n")
	for _, m := range ms {
		leader := ""
		if m.GetLeader() {
			leader = "*"
		}
		healthy := "no"
		if m.GetHealthy() {
			healthy = "yes"
		}
		contact := "-"
		if ms := m.GetLastContactMs(); ms >= 0 {
			contact = strconv.FormatInt(ms, 10) + "ms"
		}
		cells := []string{m.GetId(), m.GetSuffrage(), leader, healthy, contact,
			strconv.FormatUint(m.GetAppliedIndex(), 10), m.GetRaftAddr(), orDash(m.GetGrpcAddr()), orDash(m.GetError())}
		io.WriteString(t, strings.Join(cells, "\t")+"\n")
	}
	return t.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// eventJSON is one event of coord journal read. Exactly one of Payload
// (valid UTF-8) and PayloadBase64 (anything else) is set.
type eventJSON struct {
	Seq           uint64  `json:"seq"`
	Type          string  `json:"type"`
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 *string `json:"payload_base64,omitempty"`
	ClientID      string  `json:"client_id"`
}

func toEventJSON(e client.StoredEvent) eventJSON {
	out := eventJSON{Seq: e.Seq, Type: e.Type, ClientID: e.ClientID}
	if utf8.Valid(e.Payload) {
		s := string(e.Payload)
		out.Payload = &s
	} else {
		s := base64.StdEncoding.EncodeToString(e.Payload)
		out.PayloadBase64 = &s
	}
	return out
}

// tablePayloadWidth is how many characters of a payload a table shows.
const tablePayloadWidth = 60

// tablePayload renders a payload for one table cell: text with control
// characters escaped, or "base64:..." for binary, cut to about 60
// characters.
func tablePayload(p []byte) string {
	var s string
	if utf8.Valid(p) {
		var b strings.Builder
		for _, r := range string(p) {
			if unicode.IsPrint(r) {
				b.WriteRune(r)
			} else {
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
			}
		}
		s = b.String()
	} else {
		s = "base64:" + base64.StdEncoding.EncodeToString(p)
	}
	if utf8.RuneCountInString(s) > tablePayloadWidth {
		r := []rune(s)
		s = string(r[:tablePayloadWidth-1]) + "…"
	}
	return s
}

// positionsJSON is the JSON shape of coord journal positions.
type positionsJSON struct {
	WritePos     uint64 `json:"write_pos"`
	SafePos      uint64 `json:"safe_pos"`
	ExpirePos    uint64 `json:"expire_pos"`
	TrimmedPos   uint64 `json:"trimmed_pos"`
	EventCount   uint64 `json:"event_count"`
	SegmentCount uint64 `json:"segment_count"`
	AppliedIndex uint64 `json:"applied_index"`
	Member       string `json:"member"`
	Warning      string `json:"warning"`
	LogFormat    uint32 `json:"log_format"`
}

func toPositionsJSON(p client.Positions) positionsJSON {
	return positionsJSON{
		WritePos: p.WritePos, SafePos: p.SafePos, ExpirePos: p.ExpirePos, TrimmedPos: p.TrimmedPos,
		EventCount: p.EventCount, SegmentCount: p.SegmentCount, AppliedIndex: p.AppliedIndex,
		Member: p.MemberID, Warning: p.Warning, LogFormat: p.LogFormat,
	}
}

// segmentJSON is one segment of coord journal segments.
type segmentJSON struct {
	ID         uint64 `json:"id"`
	FirstSeq   uint64 `json:"first_seq"`
	LastSeq    uint64 `json:"last_seq"`
	Events     uint64 `json:"events"`
	Bytes      uint64 `json:"bytes"`
	State      string `json:"state"`
	FirstIndex uint64 `json:"first_index"`
	LastIndex  uint64 `json:"last_index"`
}

func toSegmentsJSON(segs []*pb.SegmentInfo) []segmentJSON {
	out := make([]segmentJSON, 0, len(segs))
	for _, s := range segs {
		out = append(out, segmentJSON{
			ID: s.GetId(), FirstSeq: s.GetFirstSeq(), LastSeq: s.GetLastSeq(), Events: s.GetEvents(), Bytes: s.GetBytes(),
			State: s.GetState(), FirstIndex: s.GetFirstIndex(), LastIndex: s.GetLastIndex(),
		})
	}
	return out
}

// consumerJSON is one consumer of coord journal consumers.
type consumerJSON struct {
	Name     string `json:"name"`
	AckedSeq uint64 `json:"acked_seq"`
	Lag      uint64 `json:"lag"`
}

func toConsumerJSON(c *pb.ConsumerInfo) consumerJSON {
	return consumerJSON{Name: c.GetName(), AckedSeq: c.GetAckedSeq(), Lag: c.GetLag()}
}
