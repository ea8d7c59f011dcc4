package coordserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// keyringCallTimeout bounds each member's leg of GossipKeyring.
const keyringCallTimeout = 5 * time.Second

// Roles in GossipKeyringMember.
const (
	roleCoordinator = "coordinator"
	roleNode        = "node"
)

// keyringTarget is one member a GossipKeyring reaches.
type keyringTarget struct {
	id, role, addr string
	self           bool
}

// keyringResult is one member's answer.
type keyringResult struct {
	keys [][]byte
	err  error
}

// GossipKeyring applies a keyring operation on every coordinator of the
// Raft configuration and every storage node among the gossip members
// (nodes that do not gossip have no keyring to change) and answers per
// member.
//
// Every operation starts with a LIST everywhere. USE changes nothing
// unless every member answered and holds the key: a member still
// without it could not decrypt what the others would send. REMOVE is
// refused (FailedPrecondition, nothing changed) while the key is some
// member's primary, since that member's gossip would no longer decrypt.
// INSTALL and REMOVE skip no one that answered; a member that failed is
// reported, and the operation (idempotent) can be repeated.
//
// Operations answered by this member run one at a time, so its checks
// hold while it applies; two operators driving rotations through
// different coordinators at once are not serialised.
func (c *clusterService) GossipKeyring(ctx context.Context, req *pb.GossipKeyringRequest) (*pb.GossipKeyringResponse, error) {
	s := c.s
	op := req.GetOp()
	var key []byte
	switch op {
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST:
		if req.GetKey() != "" {
			return nil, s.badRequest("gossip keyring list takes no key")
		}
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE:
		k, err := membership.ParseKey(req.GetKey())
		if err != nil {
			return nil, s.badRequest("gossip keyring " + gossipkeys.OpName(op) + ": " + err.Error())
		}
		key = k
	default:
		return nil, s.badRequest(fmt.Sprintf("gossip keyring: unknown operation %v", op))
	}
	if s.members.Keyring() == nil {
		return nil, s.statusErr(codes.FailedPrecondition, ReasonBadRequest, membership.ErrNotEncrypted.Error())
	}
	s.keyringMu.Lock()
	defer s.keyringMu.Unlock()
	targets, err := s.keyringTargets()
	if err != nil {
		return nil, s.toStatus(err)
	}
	listed := s.keyringFanOut(ctx, targets, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, nil)
	results := listed
	switch op {
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL:
		var full []string
		for i, r := range listed {
			if r.err == nil && !holds(r.keys, key) && len(r.keys) >= membership.MaxKeys {
				full = append(full, targets[i].id)
			}
		}
		if len(full) > 0 {
			return nil, s.badRequest(fmt.Sprintf("gossip keyring install: %s already hold %d keys, the most a keyring holds; remove unused keys first (nothing changed)",
				strings.Join(full, ", "), membership.MaxKeys))
		}
		results = s.keyringFanOut(ctx, targets, op, key)
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE:
		blocked := false
		for _, r := range listed {
			blocked = blocked || r.err != nil || !holds(r.keys, key)
		}
		if !blocked {
			results = s.keyringFanOut(ctx, targets, op, key)
			break
		}
		results = make([]keyringResult, len(listed))
		for i, r := range listed {
			switch {
			case r.err != nil:
				results[i] = keyringResult{err: fmt.Errorf("did not answer, so the key cannot be known to be installed: %w", r.err)}
			case !holds(r.keys, key):
				results[i] = keyringResult{keys: r.keys, err: status.Error(codes.FailedPrecondition, "gossip key is not installed here: install it on every member first (nothing changed)")}
			default:
				results[i] = keyringResult{keys: r.keys, err: status.Error(codes.Aborted, "not changed: the key is not installed on every member")}
			}
		}
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE:
		var primaryOn []string
		for i, r := range listed {
			if r.err == nil && len(r.keys) > 0 && string(r.keys[0]) == string(key) {
				primaryOn = append(primaryOn, targets[i].id)
			}
		}
		if len(primaryOn) > 0 {
			return nil, s.statusErr(codes.FailedPrecondition, ReasonBadRequest, fmt.Sprintf(
				"gossip keyring remove: the key is the primary on %s; use another key there first (nothing changed)", strings.Join(primaryOn, ", ")))
		}
		results = s.keyringFanOut(ctx, targets, op, key)
	}
	return keyringResponse(s.cfg.ID, targets, results), nil
}

func holds(keys [][]byte, key []byte) bool {
	return slices.ContainsFunc(keys, func(k []byte) bool { return string(k) == string(key) })
}

// keyringTargets lists the coordinators of the Raft configuration and the
// storage nodes in the gossip, each by role then id.
func (s *Server) keyringTargets() ([]keyringTarget, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []keyringTarget
	for _, srv := range f.Configuration().Servers {
		id := string(srv.ID)
		out = append(out, keyringTarget{id: id, role: roleCoordinator, addr: s.memberGRPCAddr(id), self: id == s.cfg.ID})
	}
	var nodes []keyringTarget
	for _, m := range s.members.Members() {
		if m.Meta.Role == membership.RoleNode && m.State == membership.StateAlive {
			nodes = append(nodes, keyringTarget{id: m.Meta.ID, role: roleNode, addr: m.Meta.GRPCAddr})
		}
	}
	cmp := func(a, b keyringTarget) int { return strings.Compare(a.id, b.id) }
	slices.SortFunc(out, cmp)
	slices.SortFunc(nodes, cmp)
	return append(out, nodes...), nil
}

// keyringFanOut applies op on every target at once.
func (s *Server) keyringFanOut(ctx context.Context, targets []keyringTarget, op pb.GossipKeyringOp, key []byte) []keyringResult {
	out := make([]keyringResult, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].keys, out[i].err = s.keyringCall(ctx, t, op, key)
		}()
	}
	wg.Wait()
	return out
}

func (s *Server) keyringCall(ctx context.Context, t keyringTarget, op pb.GossipKeyringOp, key []byte) ([][]byte, error) {
	if t.self {
		return gossipkeys.Apply(s.members.Keyring(), s.log, op, key)
	}
	if t.addr == "" {
		return nil, status.Error(codes.Unavailable, "gRPC address not known")
	}
	ctx, cancel := context.WithTimeout(ctx, keyringCallTimeout)
	defer cancel()
	req := &pb.MemberGossipKeyringRequest{Op: op, Key: key}
	var resp *pb.MemberGossipKeyringResponse
	var err error
	if t.role == roleCoordinator {
		conn, cerr := s.peers.get(t.addr)
		if cerr != nil {
			return nil, cerr
		}
		resp, err = clusterpb.NewPeerClient(conn).GossipKeyring(ctx, req)
	} else {
		conn, cerr := s.nodeCC.get(t.addr)
		if cerr != nil {
			return nil, cerr
		}
		resp, err = pb.NewDataNodeClient(conn).GossipKeyring(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return resp.GetKeys(), nil
}

// keyringResponse builds the answer: members in target order, keys by how
// many members hold them.
func keyringResponse(responder string, targets []keyringTarget, results []keyringResult) *pb.GossipKeyringResponse {
	resp := &pb.GossipKeyringResponse{Total: int32(len(targets)), ResponderId: responder}
	counts := map[string]*pb.GossipKeyringKey{}
	for i, t := range targets {
		r := results[i]
		m := &pb.GossipKeyringMember{Id: t.id, Role: t.role, Ok: r.err == nil}
		if r.err != nil {
			st := status.Convert(r.err)
			m.Error = st.Code().String() + ": " + st.Message()
			resp.Failed++
		}
		for j, k := range r.keys {
			text := base64.StdEncoding.EncodeToString(k)
			m.Keys = append(m.Keys, text)
			kc := counts[text]
			if kc == nil {
				kc = &pb.GossipKeyringKey{Key: text}
				counts[text] = kc
				resp.Keys = append(resp.Keys, kc)
			}
			kc.Members++
			if j == 0 {
				kc.Primary++
			}
		}
		resp.Members = append(resp.Members, m)
	}
	slices.SortStableFunc(resp.Keys, func(a, b *pb.GossipKeyringKey) int {
		if a.Members != b.Members {
			return int(b.Members - a.Members)
		}
		return int(b.Primary - a.Primary)
	})
	return resp
}

// GossipKeyring is the Peer leg: this coordinator's own keyring.
func (p *peerService) GossipKeyring(_ context.Context, req *pb.MemberGossipKeyringRequest) (*pb.MemberGossipKeyringResponse, error) {
	keys, err := gossipkeys.Apply(p.s.members.Keyring(), p.s.log, req.GetOp(), req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.MemberGossipKeyringResponse{Keys: keys}, nil
}
