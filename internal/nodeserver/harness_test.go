package nodeserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const testPool = "BP-1"

// testNode is one in-process storage node on free 127.0.0.1 ports with a
// disk dataset in a temp dir, and a client connection to it.
type testNode struct {
	t      testing.TB
	srv    *Server
	addr   string
	conn   *grpc.ClientConn
	client pb.DataNodeClient
}

// testLogger logs to stderr with LOGBOOK_TEST_LOG=1, else nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testConfig(t testing.TB, id string) Config {
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.DataDir = filepath.Join(t.TempDir(), id)
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.DirScanInterval, cfg.BlockScanBytesPerSecond = 0, 0
	cfg.BlockSize = 8 << 20
	cfg.SetupTimeout, cfg.AckTimeout, cfg.WriterStopTimeout = 5*time.Second, 20*time.Second, 10*time.Second
	cfg.Logger = testLogger()
	return cfg
}

func startNode(t testing.TB, id string, mod ...func(*Config)) *testNode {
	t.Helper()
	cfg := testConfig(t, id)
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.GRPCAddr(), DialOptions(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{t: t, srv: srv, addr: srv.GRPCAddr(), conn: conn, client: pb.NewDataNodeClient(conn)}
	t.Cleanup(func() {
		conn.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	})
	return n
}

// kill stops the node at once: listeners, connections and streams cut, as
// a crash looks to its peers.
func (n *testNode) kill() {
	n.srv.closeOnce.Do(func() { n.srv.closeErr = n.srv.shutdown(false) })
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sendAll sends pkts on p; the last one gets the given flags.
func sendAll(t testing.TB, ctx context.Context, p *blockio.Pipeline, pkts []blockio.Packet) error {
	t.Helper()
	for _, pkt := range pkts {
		if _, err := p.Send(ctx, pkt); err != nil {
			return err
		}
	}
	return nil
}

// readAll reads [off, off+length) of a replica through ReadBlock, checks
// every chunk's checksum and the chunks' contiguity, and returns the bytes.
func readAll(t testing.TB, ctx context.Context, n *testNode, id, gs uint64, off, length int64) ([]byte, int64) {
	t.Helper()
	stream, err := n.client.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: testPool, BlockId: id, Gs: gs, Offset: off, Length: length})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	start, visible := int64(-1), int64(-1)
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read %s blk_%d: %v", n.srv.ID(), id, err)
		}
		if start < 0 {
			start, visible = c.GetOffset(), c.GetVisibleLength()
		}
		if c.GetOffset() != start+int64(buf.Len()) {
			t.Fatalf("chunk at %d, want %d", c.GetOffset(), start+int64(buf.Len()))
		}
		if c.GetBytesPerChecksum() != blockio.ChunkSize {
			t.Fatalf("bytes per checksum %d", c.GetBytesPerChecksum())
		}
		if bad := blockio.Verify(c.GetData(), c.GetChecksums()); bad >= 0 {
			t.Fatalf("%s blk_%d: chunk %d at %d does not verify", n.srv.ID(), id, bad, c.GetOffset())
		}
		buf.Write(c.GetData())
	}
	b := buf.Bytes()[off-start:]
	if length > 0 {
		b = b[:length]
	}
	return b, visible
}

func getReplica(t testing.TB, n *testNode, id uint64) replica.ReplicaInfo {
	t.Helper()
	ri, err := n.srv.Store().GetReplica(testPool, id)
	if err != nil {
		t.Fatalf("%s blk_%d: %v", n.srv.ID(), id, err)
	}
	return ri
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantCode checks err's gRPC code and, if reason is set, its ErrorInfo
// reason.
func wantCode(t testing.TB, err error, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v (%v), want %v", st.Code(), err, code)
	}
	if reason == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason {
				t.Fatalf("reason %q, want %q (%v)", info.GetReason(), reason, err)
			}
			return
		}
	}
	t.Fatalf("no ErrorInfo in %v, want reason %q", err, reason)
}

func createSetup(id, gs uint64, targets ...string) *pb.WriteSetup {
	return &pb.WriteSetup{Pool: testPool, BlockId: id, Gs: gs, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE,
		Targets: targets, ClientName: "test-client"}
}
