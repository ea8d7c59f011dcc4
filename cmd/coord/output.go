package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

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

// writeStatus prints coord status: the cluster's summary j (with its
// storage and warnings), then st's members and their startup replays.
func writeStatus(w io.Writer, st client.ClusterStatus, j statusJSON) error {
	t := newTable(w)
	fmt.Fprintf(t, "cluster\t%s\nleader\t%s\nterm\t%d\ncommit index\t%d\napplied index\t%d\nanswered by\t%s\n",
		st.ClusterID, orDash(st.LeaderID), st.Term, st.CommitIndex, st.AppliedIndex, st.ResponderID)
	if s := j.Storage; s != nil {
		safe := "off"
		if s.SafeMode {
			safe = "on (waiting for block reports: no deletion or re-replication)"
		}
		fmt.Fprintf(t, "storage nodes\t%d (%d live, %d stale, %d dead)\nsafe mode\t%s\nblocks\t%d under-replicated, %d missing, %d re-replications in flight\n",
			s.Nodes, s.Live, s.Stale, s.Dead, safe, s.UnderReplicatedBlocks, s.MissingBlocks, s.PendingReplications)
	}
	for _, w := range j.Warnings {
		fmt.Fprintf(t, "warning\t%s\n", w)
	}
	t.Flush()
	fmt.Fprintln(w)
	if err := writeMembersTable(w, st.Members); err != nil {
		return err
	}
	writeReplays(w, st.Members)
	return nil
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

func toStorageJSON(r client.NodeList) *storageJSON {
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
	// TLSNotAfter is when the member's TLS certificate expires (RFC 3339);
	// absent without TLS.
	TLSNotAfter string `json:"tls_not_after,omitempty"`
	// Error is why the member is not healthy, e.g. "unreachable: ...";
	// absent for a healthy one.
	Error string `json:"error,omitempty"`
}

// replayJSON is a member's startup replay (client.StartupReplay).
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

func toReplayJSON(r *client.StartupReplay) *replayJSON {
	if r == nil {
		return nil
	}
	return &replayJSON{r.SnapshotIndex, r.SnapshotEvents, r.SnapshotTime.Seconds(), r.LastIndex, r.LogEntries, r.LogEvents, r.Time.Seconds(), r.CaughtUp, replayRate(r),
		r.LogWait.Seconds(), logReplayRate(r)}
}

// minReplayTiming is the shortest log replay interval given a rate: below
// it the wake-up latency of the member's watch is most of what is timed.
const minReplayTiming = 5 * time.Millisecond

// logReplayRate is a finished replay's log events per second: the events
// applied after the member first saw an entry applied (LogWait, after the
// wait for a commit index), over the time from there until caught up. The
// events of that first apply are left out, since it was not timed:
// counting them over the time after it gave rates such as 39 million
// events/s when most of the log applied in one step. 0 while replaying,
// with no log replayed, or with too little timed to tell (see
// logReplayUntimed).
func logReplayRate(r *client.StartupReplay) float64 {
	d := r.Time - r.LogWait
	if !r.CaughtUp || r.LogWait <= 0 || r.LogEvents <= r.LogWaitEvents || d < minReplayTiming {
		return 0
	}
	return float64(r.LogEvents-r.LogWaitEvents) / d.Seconds()
}

// logReplayUntimed: a finished replay applied log events, but too few of
// them after its first apply, or too quickly, to give a rate.
func logReplayUntimed(r *client.StartupReplay) bool {
	return r.CaughtUp && r.LogWait > 0 && r.LogEvents > 0 && logReplayRate(r) == 0
}

// replayRate is a finished replay's events per second (0 while replaying).
func replayRate(r *client.StartupReplay) float64 {
	if !r.CaughtUp || r.Time <= 0 {
		return 0
	}
	return float64(r.SnapshotEvents+r.LogEvents) / r.Time.Seconds()
}

// writeReplays prints the members' startup replays, if any reported one:
// how each rebuilt its state when it last started.
func writeReplays(w io.Writer, ms []client.Member) {
	head := false
	for _, m := range ms {
		r := m.StartupReplay
		if r == nil {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\nreplay at start (snapshot restore, then the log after it, until caught up)")
			head = true
		}
		if !r.CaughtUp {
			fmt.Fprintf(w, "  %s  replaying for %.2fs: snapshot at index %d (%d events) restored, log up to index %d to apply\n",
				m.ID, r.Time.Seconds(), r.SnapshotIndex, r.SnapshotEvents, r.LastIndex)
			continue
		}
		snap := fmt.Sprintf("no snapshot, log opened in %.2fs", r.SnapshotTime.Seconds())
		if r.SnapshotIndex > 0 {
			snap = fmt.Sprintf("snapshot at index %d with %d events in %.2fs", r.SnapshotIndex, r.SnapshotEvents, r.SnapshotTime.Seconds())
		}
		fmt.Fprintf(w, "  %s  %d events in %.2fs (%.0f events/s): %s, then %d log entries with %d events",
			m.ID, r.SnapshotEvents+r.LogEvents, r.Time.Seconds(), replayRate(r), snap, r.LogEntries, r.LogEvents)
		if rate := logReplayRate(r); rate > 0 {
			fmt.Fprintf(w, " in %.2fs (%.0f events/s) after %.2fs waiting for a commit index",
				(r.Time - r.LogWait).Seconds(), rate, (r.LogWait - r.SnapshotTime).Seconds())
		} else if logReplayUntimed(r) {
			fmt.Fprintf(w, " after %.2fs waiting for a commit index (applied too quickly to time a rate)",
				(r.LogWait - r.SnapshotTime).Seconds())
		}
		fmt.Fprintln(w)
	}
}

func toStatusJSON(st client.ClusterStatus) statusJSON {
	return statusJSON{
		ClusterID:    st.ClusterID,
		Leader:       st.LeaderID,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		AnsweredBy:   st.ResponderID,
		Members:      toMembersJSON(st.Members),
		Warnings:     append([]string{}, st.Warnings...),
	}
}

func toMembersJSON(ms []client.Member) []memberJSON {
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		j := memberJSON{
			ID: m.ID, RaftAddr: m.RaftAddr, GRPCAddr: m.GRPCAddr, Suffrage: m.Suffrage,
			Healthy: m.Healthy, LastContactMs: m.LastContact.Milliseconds(), StartupReplay: toReplayJSON(m.StartupReplay),
			Error: m.Error,
		}
		if !m.TLSNotAfter.IsZero() {
			j.TLSNotAfter = m.TLSNotAfter.UTC().Format(time.RFC3339)
		}
		out = append(out, j)
	}
	return out
}

// writeMembersTable prints the members of a status response.
func writeMembersTable(w io.Writer, ms []client.Member) error {
	t := newTable(w)
	io.WriteString(t, "ID\tSUFFRAGE\tLEADER\tHEALTHY\tLAST CONTACT\tAPPLIED\tRAFT\tGRPC\tERROR\n")
	for _, m := range ms {
		leader := ""
		if m.Leader {
			leader = "*"
		}
		healthy := "no"
		if m.Healthy {
			healthy = "yes"
		}
		contact := "-"
		if m.LastContact >= 0 {
			contact = strconv.FormatInt(m.LastContact.Milliseconds(), 10) + "ms"
		}
		cells := []string{m.ID, m.Suffrage, leader, healthy, contact,
			strconv.FormatUint(m.AppliedIndex, 10), m.RaftAddr, orDash(m.GRPCAddr), orDash(m.Error)}
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
	// Paused: the leader's submit path is paused (journal pause); false
	// when a follower answered.
	Paused bool `json:"paused"`
}

// yesNo is a flag in a table: yes or no.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func toPositionsJSON(p client.Positions) positionsJSON {
	return positionsJSON{
		WritePos: p.WritePos, SafePos: p.SafePos, ExpirePos: p.ExpirePos, TrimmedPos: p.TrimmedPos,
		EventCount: p.EventCount, SegmentCount: p.SegmentCount, AppliedIndex: p.AppliedIndex,
		Member: p.MemberID, Warning: p.Warning, LogFormat: p.LogFormat, Paused: p.Paused,
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

func toSegmentsJSON(segs []client.Segment) []segmentJSON {
	out := make([]segmentJSON, 0, len(segs))
	for _, s := range segs {
		out = append(out, segmentJSON{
			ID: s.ID, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq, Events: s.Events, Bytes: s.Bytes,
			State: s.State, FirstIndex: s.FirstIndex, LastIndex: s.LastIndex,
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

func toConsumerJSON(c client.Consumer) consumerJSON {
	return consumerJSON{Name: c.Name, AckedSeq: c.AckedSeq, Lag: c.Lag}
}

// writeSegments prints coord journal segments.
func writeSegments(w io.Writer, segs []client.Segment) error {
	t := newTable(w)
	io.WriteString(t, "ID\tFIRST SEQ\tLAST SEQ\tEVENTS\tBYTES\tSTATE\tFIRST INDEX\tLAST INDEX\n")
	for _, s := range segs {
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", s.ID, s.FirstSeq, s.LastSeq, s.Events, s.Bytes, s.State, s.FirstIndex, s.LastIndex)
	}
	return t.Flush()
}

// writeConsumer prints the consumer that coord journal consumers register
// or ack (done: "registered", "acked") left.
func writeConsumer(w io.Writer, done string, c client.Consumer) error {
	_, err := fmt.Fprintf(w, "%s consumer %s: acked seq %d, lag %d\n", done, c.Name, c.AckedSeq, c.Lag)
	return err
}

// writeConsumers prints coord journal consumers ls.
func writeConsumers(w io.Writer, list []client.Consumer) error {
	t := newTable(w)
	io.WriteString(t, "NAME\tACKED SEQ\tLAG\n")
	for _, c := range list {
		fmt.Fprintf(t, "%s\t%d\t%d\n", c.Name, c.AckedSeq, c.Lag)
	}
	return t.Flush()
}
