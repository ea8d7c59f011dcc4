package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/blocktoken"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Block access tokens (internal/blocktoken). With TLS, the block data
// RPCs (WriteBlock, ReadBlock, GetReplicaVisibleLength, TransferBlock)
// of a caller that is not a node or coordinator certificate depend on
// what the coordinators said at registration and with every heartbeat
// reply (a node without coordinators takes no tokens):
//
//   - nothing yet: refused Unavailable BLOCK_KEYS_UNKNOWN (the node does
//     not know whether tokens are on; a client tries another replica);
//   - no keys (a cluster without ACLs): any certificate of the cluster CA,
//     as every other call;
//   - keys (ACLs on): a block access token in the request (the setup of
//     a WriteBlock stream) that one of the keys signed, that has not
//     expired and that covers the block, the generation stamp and the
//     mode the call needs; the caller needs no certificate. Without one:
//     Unauthenticated NO_BLOCK_TOKEN; a bad one: PermissionDenied
//     BLOCK_TOKEN (BLOCK_TOKEN_EXPIRED when only its time ran out).
//
// Nodes and coordinators are trusted by their certificates: a pipeline's
// downstream setups, transfers and recoveries carry no token.

// maxBlockKeys bounds the keys a node takes from a reply.
const maxBlockKeys = 64

// blockKeySet is the coordinators' word on block tokens, immutable.
type blockKeySet struct {
	on    bool
	scope string // the cluster id: the tokens' pool
	keys  map[uint32][]byte
}

// setBlockKeys takes a registration or heartbeat reply's keys.
func (s *Server) setBlockKeys(bk *clusterpb.BlockKeys) {
	set := &blockKeySet{}
	if bk != nil {
		set.on, set.scope, set.keys = true, bk.GetScope(), map[uint32][]byte{}
		now := time.Now().UnixNano()
		for i, k := range bk.GetKeys() {
			if i >= maxBlockKeys {
				break
			}
			if len(k.GetSecret()) == blocktoken.KeyBytes && k.GetExpiresUnixNanos() > now {
				set.keys[k.GetId()] = k.GetSecret()
			}
		}
	}
	if old := s.blockKeys.Swap(set); old == nil || old.on != set.on {
		s.log.Info("block access tokens", "required", set.on, "keys", len(set.keys))
	}
}

// blockRequest is what a block call asks, and the token it carries.
func (s *Server) blockRequest(m any) (tok []byte, req blocktoken.Request, ok bool) {
	switch r := m.(type) {
	case *pb.ReadBlockRequest:
		return r.BlockToken, blocktoken.Request{BlockID: r.BlockId, Pool: r.Pool, GS: r.Gs, Mode: blocktoken.Read}, true
	case *pb.GetReplicaVisibleLengthRequest:
		return r.BlockToken, blocktoken.Request{BlockID: r.BlockId, Pool: r.Pool, GS: r.Gs, Mode: blocktoken.Read}, true
	case *pb.TransferBlockRequest:
		return r.BlockToken, blocktoken.Request{BlockID: r.BlockId, Pool: r.Pool, GS: r.Gs, Mode: blocktoken.Copy}, true
	case *pb.WritePacket:
		st := r.GetSetup()
		if st == nil {
			return nil, blocktoken.Request{}, false
		}
		req := blocktoken.Request{BlockID: st.BlockId, Pool: st.Pool, GS: st.Gs, Mode: blocktoken.Write}
		switch st.Stage {
		case pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED:
			// Node-to-node copies only: the coordinators grant no client this.
			req.Mode = blocktoken.Replace
		}
		if st.NewGs != 0 {
			// Append and recovery stages: the GS the replicas get is the
			// one the coordinators granted.
			req.GS = st.NewGs
		}
		return st.BlockToken, req, true
	}
	return nil, blocktoken.Request{}, false
}

// trustedPeer: a node or coordinator certificate (no token needed).
func trustedPeer(id authz.Identity) bool {
	return id.Kind == authz.KindCertificate && (id.Role == authz.CertRoleNode || id.Role == authz.CertRoleCoordinator)
}

// checkBlockCall decides a block call whose first request is m (nil: the
// stream sent none that is a block request).
func (s *Server) checkBlockCall(ctx context.Context, method string, m any) error {
	id := tlsgrpc.Caller(ctx)
	set := s.blockKeys.Load()
	if s.link == nil {
		set = &blockKeySet{} // no coordinators: nobody hands out tokens
	}
	switch {
	case set == nil:
		return s.statusErr(codes.Unavailable, pb.ReasonBlockKeysUnknown, fmt.Sprintf("%s: this node has not yet heard from the coordinators whether block access tokens are needed; try another replica or again", method))
	case !set.on:
		return s.authorize(ctx, method)
	}
	tok, req, ok := s.blockRequest(m)
	if !ok {
		return s.statusErr(codes.PermissionDenied, pb.ReasonBlockToken, fmt.Sprintf("%s: the first message must be the setup, with its block access token", method))
	}
	if len(tok) == 0 {
		s.log.Warn("refused a block call", "method", method, "identity", id.String(), "block", req.BlockID, "reason", "no block access token")
		return s.statusErr(codes.Unauthenticated, pb.ReasonNoBlockToken, fmt.Sprintf("%s: block %d needs a block access token: the coordinators hand one out with its locations (Stat, AddBlock ...)", method, req.BlockID))
	}
	if req.Pool != s.cfg.BlockPool {
		return s.statusErr(codes.PermissionDenied, pb.ReasonBlockToken, fmt.Sprintf("%s: block access tokens cover pool %q only, the one this node serves the coordinators", method, s.cfg.BlockPool))
	}
	req.Pool = set.scope
	if _, err := blocktoken.Verify(tok, set.keys, req, time.Now()); err != nil {
		s.log.Warn("refused a block call", "method", method, "identity", id.String(), "block", req.BlockID, "reason", err.Error())
		reason := pb.ReasonBlockToken
		if errors.Is(err, blocktoken.ErrExpired) {
			reason = pb.ReasonBlockTokenExpired
		}
		return s.statusErr(codes.PermissionDenied, reason, fmt.Sprintf("%s: %v", method, err))
	}
	return nil
}

// blockCall: method is a block data RPC this node gates by tokens.
func (s *Server) blockCall(ctx context.Context, method string) bool {
	return s.cfg.Security.TLS != nil && accessClasses[method] == pb.Access_ACCESS_BLOCK && !trustedPeer(tlsgrpc.Caller(ctx))
}

// tokenStream checks the first message a block stream receives.
type tokenStream struct {
	grpc.ServerStream
	s       *Server
	method  string
	checked bool
}

func (t *tokenStream) RecvMsg(m any) error {
	if err := t.ServerStream.RecvMsg(m); err != nil || t.checked {
		return err
	}
	t.checked = true
	return t.s.checkBlockCall(t.ServerStream.Context(), t.method, m)
}

// BlockKeys says what the coordinators last said: whether clients need
// block access tokens and how many keys this node verifies them with
// (known false: nothing heard yet).
func (s *Server) BlockKeys() (known, required bool, keys int) {
	set := s.blockKeys.Load()
	if set == nil {
		return false, false, 0
	}
	return true, set.on, len(set.keys)
}
