package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// scaleSource answers as a leader holding 1,000 storage nodes with
// 1,000,000 replicas between them and 100,000 files in one directory:
// the answers' sizes are the leader's at that scale (ListNodes lists
// every node; List pages the directory by cursor, as fsm.List does).
// BenchmarkConsolePages measures the console's own server time on them:
// converting, filtering, sorting, paging and rendering.
type scaleSource struct {
	nodes *pb.ListNodesResponse
	files []string // sorted names under /big
}

func newScaleSource(nodes, files, replicas int) *scaleSource {
	s := &scaleSource{nodes: &pb.ListNodesResponse{}}
	per := uint64(replicas / nodes)
	for i := range nodes {
		s.nodes.Nodes = append(s.nodes.Nodes, &pb.StorageNodeStatus{
			Node: &pb.NodeRecord{Id: fmt.Sprintf("node%04d", i), GrpcAddr: fmt.Sprintf("10.0.%d.%d:7400", i/250, i%250), StorageIds: []string{"s1", "s2"}},
			Live: i%97 != 0, Dead: i%389 == 0, LastHeartbeatMs: int64(i % 3000), FullReport: true, Replicas: per,
			ReplicasByState: &pb.ReplicaCounts{Finalized: per - 3, Rbw: 2, Rwr: 1},
			Storages:        []*pb.StorageReport{{StorageId: "s1", Capacity: 4 << 40, Used: uint64(i) << 30, Free: 4<<40 - uint64(i)<<30}, {StorageId: "s2", Capacity: 4 << 40, Failed: i%500 == 0}},
		})
	}
	for i := range files {
		s.files = append(s.files, fmt.Sprintf("file-%06d", i))
	}
	sort.Strings(s.files)
	return s
}

func (s *scaleSource) Status(context.Context) (*pb.StatusResponse, error) {
	st := &pb.StatusResponse{ClusterId: "bench", LeaderId: "c1", Term: 3, CommitIndex: 1 << 20, AppliedIndex: 1 << 20}
	for i := 1; i <= 3; i++ {
		st.Members = append(st.Members, &pb.MemberStatus{Id: fmt.Sprintf("c%d", i), Suffrage: "voter", Healthy: true, Leader: i == 1, RaftState: "Follower"})
	}
	return st, nil
}

func (s *scaleSource) Positions(context.Context) (*pb.PositionsResponse, error) {
	return &pb.PositionsResponse{SafePos: 1 << 20, WritePos: 1 << 20, TrimmedPos: 1, SegmentCount: 64, LogFormat: 12}, nil
}

func (s *scaleSource) Segments(context.Context) (*pb.SegmentsResponse, error) {
	r := &pb.SegmentsResponse{}
	for i := range 64 {
		r.Segments = append(r.Segments, &pb.SegmentInfo{Id: uint64(i + 1), FirstSeq: uint64(i*16384 + 1), LastSeq: uint64((i + 1) * 16384), Events: 16384, Bytes: 16384 * 200, State: "sealed"})
	}
	return r, nil
}

func (s *scaleSource) Consumers(context.Context) (*pb.ListConsumersResponse, error) {
	return &pb.ListConsumersResponse{Consumers: []*pb.ConsumerInfo{{Name: "indexer", AckedSeq: 1000, Lag: 1<<20 - 1000}}}, nil
}

func (s *scaleSource) Nodes(context.Context) (*pb.ListNodesResponse, error) { return s.nodes, nil }

func (s *scaleSource) List(_ context.Context, dir, after string, limit int) (*pb.ListResponse, error) {
	i := sort.SearchStrings(s.files, after)
	if i < len(s.files) && s.files[i] == after {
		i++
	}
	end := min(len(s.files), i+limit)
	r := &pb.ListResponse{More: end < len(s.files)}
	for _, f := range s.files[i:end] {
		r.Entries = append(r.Entries, &pb.ListEntryStatus{Path: "/big/" + f, File: &pb.FileStatus{Path: "/big/" + f, Replication: 3, Length: 10 << 20, BlockCount: 10}})
	}
	return r, nil
}

func (s *scaleSource) Stat(_ context.Context, path string) (*pb.StatResponse, error) {
	r := &pb.StatResponse{File: &pb.FileStatus{Path: path, Replication: 3, Length: 10 << 20, BlockCount: 10}, FromLeader: true}
	for b := range 10 {
		bs := &pb.BlockStatus{Id: uint64(b + 1), Gs: 1001, NumBytes: 1 << 20, State: pb.BlockState_BLOCK_STATE_COMPLETE}
		for n := range 3 {
			bs.ReportedLocations = append(bs.ReportedLocations, &pb.ReportedLocation{NodeId: fmt.Sprintf("node%04d", b*3+n), State: pb.ReplicaState_REPLICA_STATE_FINALIZED, Gs: 1001, NumBytes: 1 << 20})
		}
		r.Blocks = append(r.Blocks, bs)
	}
	return r, nil
}

func (s *scaleSource) ReadJournal(context.Context) error { return nil }

func (s *scaleSource) Applied(uint64, int) ([]*pb.StoredEvent, uint64, uint64, <-chan struct{}) {
	return nil, 1, 1, make(chan struct{})
}

func (s *scaleSource) Member() Member {
	return Member{ID: "c1", Leader: true, LeaderID: "c1", Term: 3, CommitIndex: 1 << 20, AppliedIndex: 1 << 20}
}

// BenchmarkConsolePages is the server time of each page (HTML) at 1,000
// nodes, 100,000 files and 1,000,000 replicas (docs/benchmarks.md).
func BenchmarkConsolePages(b *testing.B) {
	src := newScaleSource(1000, 100_000, 1_000_000)
	c, err := New(Config{Source: src})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, p := range []string{
		"/", "/journal", "/nodes", "/nodes?sort=used&desc=1&limit=500", "/nodes?q=node09&offset=3",
		"/namespace?path=/big", "/namespace?path=/big&after=file-050000&limit=500", "/namespace?path=/big&q=zzz",
		"/file?path=/big/file-000001", "/recoveries",
	} {
		b.Run(strings.NewReplacer("/", "_", "?", "_", "&", "_", "=", "-").Replace(p), func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", p, w.Code, w.Body)
				}
			}
		})
	}
}
