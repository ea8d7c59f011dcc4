package coordserver

import (
	"context"
	"crypto/rand"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	fsmpb "github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocktoken"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc/codes"
)

// Block access tokens (internal/blocktoken; HDFS's block tokens). With
// ACLs on, the leader rolls a block key into the replicated access
// control every BlockKeyRoll, hands the unexpired keys to the storage
// nodes with every heartbeat reply, and signs a token with the newest key
// for every block whose locations it hands a client: write tokens with
// add block, append, update block for pipeline and update pipeline; read
// tokens with stat. A node then serves a client that block and nothing
// else. Tokens name the cluster id as their pool (a node takes them for
// the pool it serves the coordinators) and the caller as their user.
//
// Keys are rolled a roll ahead of their use, as HDFS's block key manager
// does: the newest key is the next one, which the nodes receive before
// any token needs it; the one before it signs. A key is next for a roll,
// signs for a roll, and expires a token lifetime and one more roll after
// that, so the last token it signed outlives neither it nor its lifetime;
// a token never outlives its key (a late roll shortens it instead). The
// cluster's very first key signs at once (there is no other): nodes
// registered before it exists receive it with their next heartbeat.

const (
	defaultBlockTokenLifetime = time.Hour
	defaultBlockKeyRoll       = 20 * time.Minute
)

// writeModes are what a writer does with its block: write the pipeline,
// read back its last chunk before an append, and have a node copy it to a
// replacement (pipeline recovery).
const writeModes = blocktoken.Read | blocktoken.Write | blocktoken.Copy

func (s *Server) blockTokenLifetime() time.Duration {
	if d := s.cfg.Security.BlockTokenLifetime; d > 0 {
		return d
	}
	return defaultBlockTokenLifetime
}

func (s *Server) blockKeyRoll() time.Duration {
	if d := s.cfg.Security.BlockKeyRoll; d > 0 {
		return d
	}
	return defaultBlockKeyRoll
}

// signingBlockKey is the key that signs now: the one before the newest
// (the newest is the next), or the only one, while it has not expired.
func signingBlockKey(a *fsm.ACL, now time.Time) (fsm.BlockKey, bool) {
	keys := a.BlockKeys()
	if len(keys) > 1 {
		keys = keys[:len(keys)-1]
	}
	if len(keys) == 0 || !now.Before(keys[len(keys)-1].Expires) {
		return fsm.BlockKey{}, false
	}
	return keys[len(keys)-1], true
}

// rollBlockKeys is the leader's cycle: it rolls a new key while there are
// fewer than two, when the newest is a roll old, or when none signs.
func (s *Server) rollBlockKeys(now time.Time) {
	roll := s.blockKeyRoll()
	a := s.fsm.ACL()
	keys := a.BlockKeys()
	var id uint32 = 1
	if n := len(keys); n > 0 {
		newest := keys[n-1]
		_, signs := signingBlockKey(a, now)
		if n >= 2 && now.Sub(newest.Created) < roll && signs {
			return
		}
		id = newest.ID + 1
	}
	secret := make([]byte, fsm.BlockKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		s.log.Error("rolling a block key: no randomness", "err", err)
		return
	}
	key := &fsmpb.AclBlockKey{Id: id, Secret: secret, CreatedUnixNanos: now.UnixNano(), ExpiresUnixNanos: now.Add(3*roll + s.blockTokenLifetime()).UnixNano()}
	if _, err := s.applyAcl(&fsmpb.AclCommand{Actor: "member:" + s.cfg.ID, Op: &fsmpb.AclCommand_RollBlockKey{RollBlockKey: &fsmpb.AclRollBlockKeyOp{Key: key}}}); err != nil {
		s.log.Warn("rolling a block key failed", "id", id, "err", err)
		return
	}
	s.log.Info("rolled a block key", "id", id, "expires", time.Unix(0, key.ExpiresUnixNanos).UTC())
}

// blockTokensOn: this member hands out block access tokens (ACLs on).
func (s *Server) blockTokensOn() bool { return s.cfg.Security.ACL }

// checkBlockKey refuses, before anything changes, a write op that would
// hand out a block without a token: ACLs are on and no key signs yet (the
// first roll after ACLs were turned on, or after an upgrade).
func (s *Server) checkBlockKey() error {
	if !s.blockTokensOn() {
		return nil
	}
	if _, ok := signingBlockKey(s.fsm.ACL(), time.Now()); !ok {
		return s.statusErr(codes.Unavailable, pb.ReasonBlockKeysUnknown, "no block key signs block access tokens yet: the leader rolls one within seconds; retry")
	}
	return nil
}

// blockToken signs a token for block id at generation stamps minGS..maxGS
// with modes, issued to ctx's caller; nil with ACLs off or no key.
func (s *Server) blockToken(ctx context.Context, id, minGS, maxGS uint64, modes blocktoken.Mode) []byte {
	if !s.blockTokensOn() || id == 0 {
		return nil
	}
	now := time.Now()
	key, ok := signingBlockKey(s.fsm.ACL(), now)
	if !ok {
		return nil
	}
	exp := now.Add(s.blockTokenLifetime())
	if key.Expires.Before(exp) {
		exp = key.Expires
	}
	if minGS > maxGS {
		minGS, maxGS = maxGS, minGS
	}
	user := actorOf(ctx)
	if len(user) > blocktoken.MaxUserBytes {
		user = user[:blocktoken.MaxUserBytes]
	}
	tok, err := blocktoken.Sign(blocktoken.Identifier{
		KeyID: key.ID, Expiry: exp, BlockID: id, MinGS: minGS, MaxGS: maxGS, Modes: modes, Pool: s.cfg.ClusterID, User: user,
	}, key.Secret)
	if err != nil {
		s.log.Error("signing a block token", "block", id, "err", err)
		return nil
	}
	return tok
}

// heartbeatKeys is what a heartbeat reply carries: the unexpired keys, or
// nil with ACLs off (the node then asks clients for no token).
func (s *Server) heartbeatKeys() *clusterpb.BlockKeys {
	if !s.blockTokensOn() {
		return nil
	}
	now := time.Now()
	out := &clusterpb.BlockKeys{Scope: s.cfg.ClusterID}
	for _, k := range s.fsm.ACL().BlockKeys() {
		if now.Before(k.Expires) {
			out.Keys = append(out.Keys, &clusterpb.BlockKey{Id: k.ID, Secret: k.Secret, ExpiresUnixNanos: k.Expires.UnixNano()})
		}
	}
	return out
}
