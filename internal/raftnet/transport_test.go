package raftnet

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func newTransport(t *testing.T, s *StreamLayer) *raft.NetworkTransport {
	t.Helper()
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s,
		MaxPool: 2,
		Timeout: waitFor,
		Logger:  hclog.NewNullLogger(),
	})
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func appendRequest() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("leader")},
		Term:              7,
		PrevLogEntry:      41,
		PrevLogTerm:       6,
		Entries:           []*raft.Log{{Index: 42, Term: 7, Type: raft.LogCommand, Data: []byte("event")}},
		LeaderCommitIndex: 41,
	}
}

func TestRaftTransportAppendEntries(t *testing.T) {
	a, _ := newLayer(t, "c1", defaultOptions())
	b, _ := newLayer(t, "c1", defaultOptions())
	ta, tb := newTransport(t, a), newTransport(t, b)

	received := make(chan *raft.AppendEntriesRequest, 1)
	go func() {
		select {
		case rpc := <-tb.Consumer():
			req, _ := rpc.Command.(*raft.AppendEntriesRequest)
			received <- req
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, LastLog: 42, Success: true}, nil)
		case <-time.After(waitFor):
		}
	}()

	var resp raft.AppendEntriesResponse
	if err := ta.AppendEntries("n2", tb.LocalAddr(), appendRequest(), &resp); err != nil {
		t.Fatalf("AppendEntries: %v", err)
	}
	if !resp.Success || resp.Term != 7 || resp.LastLog != 42 {
		t.Fatalf("response = %+v", resp)
	}
	req := <-received
	if req == nil || req.Term != 7 || len(req.Entries) != 1 || !bytes.Equal(req.Entries[0].Data, []byte("event")) {
		t.Fatalf("consumer got %+v", req)
	}
}

func TestRaftTransportRefusesOtherCluster(t *testing.T) {
	a, _ := newLayer(t, "mine", defaultOptions())
	b, _ := newLayer(t, "other", defaultOptions())
	ta, tb := newTransport(t, a), newTransport(t, b)

	var resp raft.AppendEntriesResponse
	err := ta.AppendEntries("n2", tb.LocalAddr(), appendRequest(), &resp)
	if !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("AppendEntries error = %v, want ErrClusterMismatch", err)
	}
	// The handshake failed before any RPC was sent.
	select {
	case rpc := <-tb.Consumer():
		t.Fatalf("foreign cluster delivered an RPC: %+v", rpc.Command)
	default:
	}
}
