package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// MaxScan bounds the directory entries one namespace page looks at for
// its filter: a filter matching little pages on by cursor rather than
// having the leader walk a whole large directory.
const MaxScan = 5000

// MaxPathBytes bounds a namespace path the console accepts.
const MaxPathBytes = 4096

func (c *Console) origin(from ...string) Origin {
	m := c.cfg.Source.Member()
	return Origin{Member: m, From: from, At: time.Now().UTC()}
}

// memberState names this member's applied state, with its freshness.
func memberState(m Member) string {
	switch {
	case m.Leader:
		return fmt.Sprintf("member %s's applied state (the leader, applied index %d)", m.ID, m.AppliedIndex)
	case m.LastContactMs < 0:
		return fmt.Sprintf("member %s's applied state (a follower that has not heard from a leader; applied index %d)", m.ID, m.AppliedIndex)
	}
	return fmt.Sprintf("member %s's applied state (a follower, applied index %d of %d committed, leader %s heard from %d ms ago)", m.ID, m.AppliedIndex, m.CommitIndex, orNone(m.LeaderID), m.LastContactMs)
}

func leaderState(m Member) string {
	if m.Leader {
		return fmt.Sprintf("the leader (%s, this member): its soft state, as of now", m.ID)
	}
	return fmt.Sprintf("the leader (%s), asked by %s for this page", orNone(m.LeaderID), m.ID)
}

func orNone(s string) string {
	if s == "" {
		return "none known"
	}
	return s
}

func (c *Console) overview(ctx context.Context, r *http.Request) (any, error) {
	st, err := c.cfg.Source.Status(ctx)
	if err != nil {
		return nil, err
	}
	m := c.cfg.Source.Member()
	v := &OverviewView{
		Origin:    c.origin("members: Cluster.Status from "+m.ID+", each member answering for itself", "storage: "+leaderState(m)),
		ClusterID: st.ClusterId, LeaderID: st.LeaderId, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
	}
	if pos, err := c.cfg.Source.Positions(ctx); err == nil {
		v.LogFormat = pos.LogFormat
	}
	for _, ms := range st.Members {
		row := MemberRow{ID: ms.Id, RaftAddr: ms.RaftAddr, GRPCAddr: ms.GrpcAddr, HTTPAddr: ms.HttpAddr, Suffrage: ms.Suffrage,
			RaftState: ms.RaftState, Leader: ms.Leader, Term: ms.Term, CommitIndex: ms.CommitIndex, AppliedIndex: ms.AppliedIndex,
			LastContactMs: ms.LastContactMs, Healthy: ms.Healthy, Error: ms.Error, Gossip: m.Gossip[ms.Id]}
		if row.Gossip == "" {
			row.Gossip = "not seen"
		}
		v.Members = append(v.Members, row)
	}
	v.Health = memberHealth(st, v.Members)
	if ns, err := c.cfg.Source.Nodes(ctx); err != nil {
		_, msg := httpError(err)
		v.Health = append(v.Health, Health{SevWarning, "storage view", "the leader's view of the storage nodes is unavailable: " + msg})
	} else {
		sum, _ := nodeRows(ns)
		v.Nodes = &sum
		v.Health = append(v.Health, nodeHealth(sum)...)
	}
	v.Charts = c.charts()
	return v, nil
}

// memberHealth are the checks Cluster.Status answers: a leader, every
// voter reachable and following, and the members' own warnings.
func memberHealth(st *pb.StatusResponse, rows []MemberRow) []Health {
	var out []Health
	if st.LeaderId == "" {
		out = append(out, Health{SevCritical, "no leader", "no member knows a leader: nothing can be appended"})
	}
	for _, r := range rows {
		if r.Error != "" || !r.Healthy {
			sev := SevWarning
			if r.Suffrage == "voter" {
				sev = SevCritical
			}
			out = append(out, Health{sev, "member unreachable", fmt.Sprintf("%s %s: %s", r.Suffrage, r.ID, orNone(r.Error))})
		}
	}
	for _, w := range st.Warnings {
		check := "warning"
		switch {
		case strings.Contains(w, "trim"):
			check = "behind on trimming"
		case strings.Contains(w, "certificate"):
			check = "certificate expiry"
		}
		out = append(out, Health{SevWarning, check, w})
	}
	return out
}

func nodeHealth(s NodesSummary) []Health {
	var out []Health
	if s.Dead > 0 {
		out = append(out, Health{SevWarning, "dead nodes", fmt.Sprintf("%d of %d storage nodes are dead", s.Dead, s.Total)})
	}
	if s.Stale > 0 {
		out = append(out, Health{SevInfo, "stale nodes", fmt.Sprintf("%d of %d storage nodes have not sent a recent heartbeat", s.Stale, s.Total)})
	}
	if s.Missing > 0 {
		out = append(out, Health{SevCritical, "missing blocks", fmt.Sprintf("%d blocks have no good replica", s.Missing)})
	}
	if s.UnderReplicated > 0 {
		out = append(out, Health{SevWarning, "under-replicated blocks", fmt.Sprintf("%d blocks have fewer good replicas than their replication factor (%d replications pending)", s.UnderReplicated, s.Pending)})
	}
	if s.FailedVolumes > 0 {
		out = append(out, Health{SevWarning, "failed volumes", fmt.Sprintf("%d volumes report failed", s.FailedVolumes)})
	}
	if s.SafeMode {
		out = append(out, Health{SevInfo, "safe mode", "the leader waits for block reports before it deletes or re-replicates"})
	}
	return out
}

func (c *Console) charts() []Chart {
	ss := c.sampler.Samples()
	mk := func(title string, get func(Sample) float64) Chart {
		ch := Chart{Title: title, Points: make([]float64, len(ss)), EverySeconds: c.cfg.SampleEvery.Seconds()}
		for i, s := range ss {
			v := get(s)
			ch.Points[i], ch.Max = v, max(ch.Max, v)
		}
		if n := len(ss); n > 0 {
			ch.Last = ch.Points[n-1]
		}
		return ch
	}
	return []Chart{
		mk(chartAppendRate, func(s Sample) float64 { return s.AppendRate }),
		mk(chartAppendP99, func(s Sample) float64 { return s.AppendP99Ms }),
		mk(chartConsumerLag, func(s Sample) float64 { return s.ConsumerLag }),
	}
}

var (
	segmentSorts  = []string{"id", "events", "bytes", "state"}
	consumerSorts = []string{"name", "acked", "lag"}
)

func (c *Console) journal(ctx context.Context, r *http.Request) (any, error) {
	src := c.cfg.Source
	pos, err := src.Positions(ctx)
	if err != nil {
		return nil, err
	}
	segs, err := src.Segments(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := src.Consumers(ctx)
	if err != nil {
		return nil, err
	}
	c.startIndex()
	m := src.Member()
	v := &JournalView{Origin: c.origin("positions, segments, consumers, event counts: " + memberState(m))}
	v.Positions = JournalPositions{WritePos: pos.WritePos, SafePos: pos.SafePos, ExpirePos: pos.ExpirePos, TrimmedPos: pos.TrimmedPos,
		EventCount: pos.EventCount, SegmentCount: pos.SegmentCount, AppliedIndex: pos.AppliedIndex, LogFormat: pos.LogFormat,
		Paused: pos.Paused, PausedKnown: m.Leader, Warning: pos.Warning}
	var segRows []SegmentRow
	for _, s := range segs.Segments {
		segRows = append(segRows, SegmentRow{ID: s.Id, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq, Events: s.Events, Bytes: s.Bytes, State: s.State})
	}
	sq := prefixed(r, "seg_", segmentSorts)
	v.Segments, v.SegPage = pageOf(segRows, sq, segmentSorts, func(s SegmentRow) bool { return matches(sq.Filter, s.State, strconv.FormatUint(s.ID, 10)) },
		func(col string, a, b SegmentRow) int {
			switch col {
			case "events":
				return compare(a.Events, b.Events)
			case "bytes":
				return compare(a.Bytes, b.Bytes)
			case "state":
				return strings.Compare(a.State, b.State)
			}
			return compare(a.ID, b.ID)
		})
	var conRows []ConsumerRow
	for _, cs := range cons.Consumers {
		conRows = append(conRows, ConsumerRow{Name: cs.Name, AckedSeq: cs.AckedSeq, Lag: cs.Lag})
	}
	cq := prefixed(r, "con_", consumerSorts)
	v.Consumers, v.ConPage = pageOf(conRows, cq, consumerSorts, func(cr ConsumerRow) bool { return matches(cq.Filter, cr.Name) },
		func(col string, a, b ConsumerRow) int {
			switch col {
			case "acked":
				return compare(a.AckedSeq, b.AckedSeq)
			case "lag":
				return compare(a.Lag, b.Lag)
			}
			return strings.Compare(a.Name, b.Name)
		})
	ix := c.index.state()
	v.Types, v.Indexed = ix.Counts, ix.Indexed
	return v, nil
}

// prefixed is parseQuery for one of a page's several tables, whose
// parameters carry a prefix (seg_limit, con_q).
func prefixed(r *http.Request, prefix string, sorts []string) Query {
	q := r.URL.Query()
	v := url.Values{}
	for k, vs := range q {
		if after, ok := strings.CutPrefix(k, prefix); ok {
			v[after] = vs
		}
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = v.Encode()
	return parseQuery(r2, sorts...)
}

var nodeSorts = []string{"id", "state", "heartbeat", "replicas", "used", "free"}

func (c *Console) nodes(ctx context.Context, r *http.Request) (any, error) {
	ns, err := c.cfg.Source.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	sum, rows := nodeRows(ns)
	q := parseQuery(r, nodeSorts...)
	v := &NodesView{Origin: c.origin("storage nodes: " + leaderState(c.cfg.Source.Member())), Summary: sum}
	v.Nodes, v.Page = pageOf(rows, q, nodeSorts, func(n NodeRow) bool { return matches(q.Filter, n.ID, n.GRPCAddr, n.State) },
		func(col string, a, b NodeRow) int {
			switch col {
			case "state":
				return strings.Compare(a.State, b.State)
			case "heartbeat":
				return compare(a.LastHeartbeatMs, b.LastHeartbeatMs)
			case "replicas":
				return compare(a.Replicas, b.Replicas)
			case "used":
				return compare(a.Used, b.Used)
			case "free":
				return compare(a.Free, b.Free)
			}
			return strings.Compare(a.ID, b.ID)
		})
	return v, nil
}

// nodeRows converts ListNodes into the page's rows and their summary.
func nodeRows(ns *pb.ListNodesResponse) (NodesSummary, []NodeRow) {
	sum := NodesSummary{Total: len(ns.Nodes), SafeMode: ns.SafeMode, UnderReplicated: ns.UnderReplicatedBlocks, Missing: ns.MissingBlocks, Pending: ns.PendingReplications}
	rows := make([]NodeRow, 0, len(ns.Nodes))
	for _, n := range ns.Nodes {
		row := NodeRow{ID: n.Node.GetId(), GRPCAddr: n.Node.GetGrpcAddr(), HTTPAddr: n.Node.GetHttpAddr(), Gossip: n.Gossip,
			LastHeartbeatMs: n.LastHeartbeatMs, Replicas: n.Replicas, FullReport: n.FullReport,
			LastFullMs: n.LastFullReportMs, LastIncrMs: n.LastIncrementalReportMs, CacheUsed: n.CacheUsed, CacheCapacity: n.CacheCapacity}
		if bs := n.ReplicasByState; bs != nil {
			row.ByState = ReplicaCounts{Finalized: bs.Finalized, RBW: bs.Rbw, RWR: bs.Rwr, RUR: bs.Rur, Temporary: bs.Temporary}
		}
		switch {
		case n.Dead:
			row.State = "dead"
			sum.Dead++
		case n.Live:
			row.State = "live"
			sum.Live++
		default:
			row.State = "stale"
			sum.Stale++
		}
		for _, s := range n.Storages {
			row.Volumes = append(row.Volumes, VolumeRow{ID: s.StorageId, Capacity: s.Capacity, Used: s.Used, Free: s.Free, Failed: s.Failed})
			row.Capacity += s.Capacity
			row.Used += s.Used
			row.Free += s.Free
			if s.Failed {
				row.FailedVolumes++
			}
		}
		sum.FailedVolumes += row.FailedVolumes
		rows = append(rows, row)
	}
	return sum, rows
}

// checkPath refuses a namespace path the console will not pass on, with
// the reason; the leader's own checks come after.
func checkPath(p string) (string, error) {
	switch {
	case p == "":
		return "/", nil
	case len(p) > MaxPathBytes:
		return "", badf("path of %d bytes: at most %d", len(p), MaxPathBytes)
	case strings.ContainsRune(p, 0):
		return "", badf("path %q holds a NUL byte", clip(p, 200))
	case !strings.HasPrefix(p, "/"):
		return "", badf("path %q is not absolute: it must start with /", clip(p, 200))
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", badf("path %q holds a \"..\" component: name the directory itself", clip(p, 200))
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p, nil
}

// crumbs are p's ancestors, root first.
func crumbs(p string) []Crumb {
	out := []Crumb{{Name: "/", Path: "/"}}
	if p == "/" {
		return out
	}
	acc := ""
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, part := range parts[:len(parts)-1] {
		acc += "/" + part
		out = append(out, Crumb{Name: part, Path: acc})
	}
	return out
}

func apiFile(f *pb.FileStatus) *File {
	if f == nil {
		return nil
	}
	out := &File{Length: f.Length, Replication: f.Replication, BlockSize: f.BlockSize, Blocks: int(f.BlockCount),
		UnderConstruction: f.UnderConstruction, LeaseHolder: f.LeaseHolder}
	if f.MtimeUnixNanos != 0 {
		out.Modified = time.Unix(0, f.MtimeUnixNanos).UTC()
	}
	return out
}

func (c *Console) namespace(ctx context.Context, r *http.Request) (any, error) {
	q := r.URL.Query()
	dir, err := checkPath(q.Get("path"))
	if err != nil {
		return nil, err
	}
	after := q.Get("after")
	if strings.ContainsAny(after, "/\x00") || len(after) > 255 {
		return nil, badf("after must be one name of at most 255 bytes, without / or NUL")
	}
	limit := clampInt(q.Get("limit"), DefaultPageSize, 1, MaxPageSize)
	filter := strings.TrimSuffix(clip(q.Get("q"), MaxFilterBytes), "…")
	v := &NamespaceView{Origin: c.origin("namespace: " + leaderState(c.cfg.Source.Member())), Dir: dir, Parents: crumbs(dir),
		After: after, Filter: filter, Limit: limit}
	if dir != "/" {
		v.Parents = append(v.Parents, Crumb{Name: path.Base(dir), Path: dir})
	}
	cursor := after
	// Without a filter one List is the page; with one, List pages on
	// until the page is full or MaxScan entries were looked at.
	for len(v.Entries) < limit && v.Scanned < MaxScan {
		want := limit
		if filter != "" {
			want = min(MaxPageSize, MaxScan-v.Scanned)
		}
		resp, err := c.cfg.Source.List(ctx, dir, cursor, want)
		if err != nil {
			return nil, err
		}
		for i, e := range resp.Entries {
			v.Scanned++
			name := path.Base(e.Path)
			cursor = name
			if !matches(filter, name) {
				continue
			}
			v.Entries = append(v.Entries, Entry{Name: name, Path: e.Path, Dir: e.Dir, File: apiFile(e.File)})
			if len(v.Entries) == limit {
				if i < len(resp.Entries)-1 || resp.More {
					v.Next = cursor
				}
				return v, nil
			}
		}
		if !resp.More {
			return v, nil
		}
	}
	v.Next = cursor
	return v, nil
}

var blockSorts = []string{"order", "id", "length", "state"}

func (c *Console) file(ctx context.Context, r *http.Request) (any, error) {
	p, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return nil, err
	}
	st, err := c.cfg.Source.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	v := &FileView{Origin: c.origin("file and replicas: " + leaderState(c.cfg.Source.Member())), Path: p, Parents: crumbs(p), Reports: st.FromLeader}
	if f := apiFile(st.File); f != nil {
		v.File = *f
	}
	rows := make([]BlockRow, 0, len(st.Blocks))
	for _, b := range st.Blocks {
		row := BlockRow{ID: b.Id, GS: b.Gs, Length: b.NumBytes, State: blockState(b.State), Expected: b.ExpectedLocations}
		for _, rl := range b.ReportedLocations {
			row.Replicas = append(row.Replicas, ReplicaRow{Node: rl.NodeId, State: replicaState(rl.State), Length: rl.NumBytes, GS: rl.Gs,
				Corrupt: rl.Corrupt, Cached: rl.Cached, Stale: rl.Gs < b.Gs})
		}
		if rc := b.Recovery; rc != nil {
			row.Recovery = &BlockRecovery{RecoveryID: rc.RecoveryId, Primary: rc.Primary, Attempt: rc.Attempt, Deadline: time.Unix(0, rc.DeadlineUnixNanos).UTC()}
		}
		rows = append(rows, row)
	}
	q := parseQuery(r, blockSorts...)
	v.Blocks, v.Page = pageOf(rows, q, blockSorts, func(b BlockRow) bool {
		return matches(q.Filter, strconv.FormatUint(b.ID, 10), b.State, strings.Join(b.Expected, " "))
	}, func(col string, a, b BlockRow) int {
		switch col {
		case "id":
			return compare(a.ID, b.ID)
		case "length":
			return compare(a.Length, b.Length)
		case "state":
			return strings.Compare(a.State, b.State)
		}
		return 0 // the file's order
	})
	if c.cfg.Source.ReadJournal(ctx) == nil {
		c.startIndex()
		for _, rec := range c.index.recoveries(time.Now()) {
			if rec.Path == p {
				v.Recov = append(v.Recov, RecovLink{BlockID: rec.BlockID, Outcome: rec.Outcome})
			}
		}
	}
	return v, nil
}

func blockState(s pb.BlockState) string {
	return strings.TrimPrefix(s.String(), "BLOCK_STATE_")
}

func replicaState(s pb.ReplicaState) string {
	return strings.TrimPrefix(s.String(), "REPLICA_STATE_")
}

var recoverySorts = []string{"order", "block", "path", "attempts", "duration"}

func (c *Console) recoveries(ctx context.Context, r *http.Request) (any, error) {
	if err := c.cfg.Source.ReadJournal(ctx); err != nil {
		return nil, err
	}
	c.startIndex()
	rows := c.index.recoveries(time.Now())
	q := parseQuery(r, recoverySorts...)
	ix := c.index.state()
	v := &RecoveriesView{Origin: c.origin("recoveries: the journal's audit events in " + memberState(c.cfg.Source.Member())), Indexed: ix.Indexed, SafePos: ix.Head}
	v.Recoveries, v.Page = pageOf(rows, q, recoverySorts, func(rc Recovery) bool {
		return matches(q.Filter, strconv.FormatUint(rc.BlockID, 10), rc.Path, rc.Primary, rc.Outcome)
	}, func(col string, a, b Recovery) int {
		switch col {
		case "block":
			return compare(a.BlockID, b.BlockID)
		case "path":
			return strings.Compare(a.Path, b.Path)
		case "attempts":
			return compare(len(a.Attempts), len(b.Attempts))
		case "duration":
			return compare(a.DurationMs, b.DurationMs)
		}
		return 0
	})
	return v, nil
}

func (c *Console) recovery(ctx context.Context, r *http.Request) (any, error) {
	s := r.URL.Query().Get("block")
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, badf("block %q: want a block id, a decimal number", clip(s, 40))
	}
	if err := c.cfg.Source.ReadJournal(ctx); err != nil {
		return nil, err
	}
	c.startIndex()
	for _, rec := range c.index.recoveries(time.Now()) {
		if rec.BlockID == id {
			return &RecoveryView{Origin: c.origin("recovery: the journal's audit events in " + memberState(c.cfg.Source.Member())), Recovery: rec}, nil
		}
	}
	return nil, notFound(fmt.Sprintf("no recovery of block %d in the retained journal (indexed through seq %d)", id, c.index.state().Indexed))
}

// notFound is a 404 the console answers itself.
type notFoundErr struct{ msg string }

func (n *notFoundErr) Error() string { return n.msg }

func notFound(msg string) error { return &notFoundErr{msg} }
