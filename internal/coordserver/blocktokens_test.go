package coordserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/blocktoken"
	"github.com/logbookhq/logbook/internal/pki"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blockRefused fails unless err is code with reason.
func blockRefused(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	got := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			got = info.Reason
		}
	}
	if st.Code() != code || got != reason {
		t.Errorf("%s: %v (%s), want %s %s", what, err, got, code, reason)
	}
}

// readAll reads a block through a raw ReadBlock call and returns its bytes
// or the call's error.
func readAll(ctx context.Context, dn pb.DataNodeClient, req *pb.ReadBlockRequest) ([]byte, error) {
	stream, err := dn.ReadBlock(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c.Data...)
	}
}

// TestBlockTokens: with ACLs on, the leader rolls block keys into the
// replicated state and hands them to the node; a client holding only a
// bearer token writes and reads a file through the tokens the
// coordinators hand out; a node refuses every block call of a client
// certificate without a token, with a forged one, one for another block,
// GS, mode or pool, or an expired one, each with its code and reason, and
// the replica stays as written; a node certificate needs none; a reader
// whose tokens expired gets new ones by itself; keys roll and the old
// key is dropped once expired.
func TestBlockTokens(t *testing.T) {
	t.Parallel()
	tok, err := authz.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	c := aclCluster(t, func(c *Config) {
		c.Security.ACLBootstrapToken = tok.String()
		c.Security.BlockKeyRoll, c.Security.BlockTokenLifetime = 2*time.Second, 3*time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	node := c.Node(0)
	eventually(t, 30*time.Second, "keys rolled and handed to the node", func() bool {
		known, required, keys := node.BlockKeys()
		return known && required && keys > 0
	})

	cl := tokenClient(ctx, t, c, tok.String())
	data := bytes.Repeat([]byte("block-token "), 700) // 8400 bytes
	w, err := cl.FS().Create(ctx, "/bt/f", client.CreateOptions{Replication: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := cl.FS().Stat(ctx, "/bt/f")
	if err != nil || len(info.Blocks) != 1 || len(info.Blocks[0].Token) == 0 {
		t.Fatalf("stat: %+v %v", info, err)
	}
	b := info.Blocks[0]
	id, err := blocktoken.Decode(b.Token)
	if err != nil || id.BlockID != b.ID || id.Modes != blocktoken.Read || id.MinGS != b.GS || id.User != "token:admin" && id.User == "" {
		t.Fatalf("stat's token %+v %v", id, err)
	}

	// Raw calls as a client certificate of the cluster CA.
	dn := pb.NewDataNodeClient(dialAs(t, c, node.GRPCAddr(), ClusterUser, pki.RoleClient, pki.RoleNode))
	read := func(tok []byte) ([]byte, error) {
		return readAll(ctx, dn, &pb.ReadBlockRequest{Pool: client.DefaultBlockPool, BlockId: b.ID, Gs: b.GS, BlockToken: tok})
	}
	if got, err := read(b.Token); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with the token: %d bytes, %v", len(got), err)
	}
	_, err = read(nil)
	blockRefused(t, "no token", err, codes.Unauthenticated, pb.ReasonNoBlockToken)
	forged := bytes.Clone(b.Token)
	forged[len(forged)-1] ^= 1
	_, err = read(forged)
	blockRefused(t, "a forged token", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = read([]byte("garbage"))
	blockRefused(t, "a malformed token", err, codes.PermissionDenied, pb.ReasonBlockToken)

	// Tokens signed with the cluster's newest key, as the leader would.
	keys := c.Coordinator(0).FSM().ACL().BlockKeys()
	key := keys[len(keys)-1]
	sign := func(mod func(*blocktoken.Identifier)) []byte {
		id := blocktoken.Identifier{KeyID: key.ID, Expiry: time.Now().Add(time.Minute), BlockID: b.ID, MinGS: b.GS, MaxGS: b.GS, Modes: blocktoken.Read, Pool: "secure", User: "x"}
		mod(&id)
		t, err := blocktoken.Sign(id, key.Secret)
		if err != nil {
			panic(err)
		}
		return t
	}
	_, err = read(sign(func(id *blocktoken.Identifier) { id.BlockID++ }))
	blockRefused(t, "another block's token", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = read(sign(func(id *blocktoken.Identifier) { id.MinGS, id.MaxGS = b.GS+1, b.GS+5 }))
	blockRefused(t, "a token for later GSs", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = read(sign(func(id *blocktoken.Identifier) { id.Modes = blocktoken.Write }))
	blockRefused(t, "a write token", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = read(sign(func(id *blocktoken.Identifier) { id.Pool = "another-cluster" }))
	blockRefused(t, "another cluster's token", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = read(sign(func(id *blocktoken.Identifier) { id.Expiry = time.Now().Add(-time.Second) }))
	blockRefused(t, "an expired token", err, codes.PermissionDenied, pb.ReasonBlockTokenExpired)
	_, err = readAll(ctx, dn, &pb.ReadBlockRequest{Pool: "BP-other", BlockId: b.ID, Gs: b.GS, BlockToken: b.Token})
	blockRefused(t, "another pool", err, codes.PermissionDenied, pb.ReasonBlockToken)
	_, err = dn.GetReplicaVisibleLength(ctx, &pb.GetReplicaVisibleLengthRequest{Pool: client.DefaultBlockPool, BlockId: b.ID, Gs: b.GS})
	blockRefused(t, "visible length without a token", err, codes.Unauthenticated, pb.ReasonNoBlockToken)
	_, err = dn.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: client.DefaultBlockPool, BlockId: b.ID, Gs: b.GS, Targets: []string{node.GRPCAddr()},
		Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, BlockToken: b.Token})
	blockRefused(t, "a transfer with a read token", err, codes.PermissionDenied, pb.ReasonBlockToken)

	// Overwriting the replica with its read token (a write setup) is
	// refused, as is a write without a token.
	for _, setupTok := range [][]byte{b.Token, nil} {
		ws, err := dn.WriteBlock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = ws.Send(&pb.WritePacket{Msg: &pb.WritePacket_Setup{Setup: &pb.WriteSetup{
			Pool: client.DefaultBlockPool, BlockId: b.ID, Gs: b.GS, NewGs: b.GS + 100, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND,
			MinBytesRcvd: int64(len(data)), MaxBytesRcvd: int64(len(data)), ClientName: "intruder", BlockToken: setupTok,
		}}})
		_, err = ws.Recv()
		if status.Code(err) != codes.PermissionDenied && status.Code(err) != codes.Unauthenticated {
			t.Errorf("an append setup with token %d bytes: %v", len(setupTok), err)
		}
	}

	// A node certificate is trusted without a token.
	asNode := pb.NewDataNodeClient(dialAs(t, c, node.GRPCAddr(), "n9", pki.RoleNode, pki.RoleNode))
	if got, err := readAll(ctx, asNode, &pb.ReadBlockRequest{Pool: client.DefaultBlockPool, BlockId: b.ID, Gs: b.GS}); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read as a node: %d bytes, %v", len(got), err)
	}

	// A reader outlives its tokens: it asks for new ones.
	r, err := cl.FS().Open(ctx, "/bt/f")
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := blocktoken.Decode(b.Token)
	eventually(t, 20*time.Second, "the first tokens expired", func() bool { return time.Now().After(exp.Expiry) })
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the tokens expired: %d bytes, %v", len(got), err)
	}

	// Keys roll; an expired key leaves the node.
	first := keys[0].ID
	eventually(t, 30*time.Second, "a newer key and the first dropped", func() bool {
		ks := c.Coordinator(0).FSM().ACL().BlockKeys()
		return len(ks) > 0 && ks[0].ID > first && ks[len(ks)-1].ID > key.ID
	})
	if got, err := read(b.Token); err == nil || len(got) > 0 {
		t.Errorf("a token of a dropped key still reads")
	}
	info, err = cl.FS().Stat(ctx, "/bt/f")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(info.Blocks[0].Token); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with a new key's token: %d bytes, %v", len(got), err)
	}
}
