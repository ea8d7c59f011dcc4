package fsm

import (
	"slices"
	"time"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// Block keys: the HMAC keys of block access tokens (internal/blocktoken),
// part of the replicated access control so that every coordinator signs
// with the same key and a new leader keeps serving the tokens of the old
// one. The leader rolls a key (AclRollBlockKeyOp); each roll drops the
// keys expired at its time.
const (
	// MaxBlockKeys bounds the keys held: a roll past it drops the oldest.
	MaxBlockKeys = 16
	// BlockKeyBytes is a key's length.
	BlockKeyBytes = 32
)

// BlockKey is one key of the view (ACL.BlockKeys). Its Secret is shared:
// do not modify it.
type BlockKey struct {
	ID      uint32
	Secret  []byte
	Created time.Time
	Expires time.Time
}

func validBlockKey(k *pb.AclBlockKey, at int64) error {
	switch {
	case k == nil:
		return errorf(ErrAclInvalid, "roll block key: no key")
	case k.Id == 0:
		return errorf(ErrAclInvalid, "roll block key: key id 0")
	case len(k.Secret) != BlockKeyBytes:
		return errorf(ErrAclInvalid, "roll block key %d: a secret of %d bytes, want %d", k.Id, len(k.Secret), BlockKeyBytes)
	case k.ExpiresUnixNanos <= k.CreatedUnixNanos || k.ExpiresUnixNanos <= at:
		return errorf(ErrAclInvalid, "roll block key %d: expires before it is created or proposed", k.Id)
	}
	return nil
}

// rollBlockKey applies AclRollBlockKeyOp at the command's time at: the
// key's id must be above every held key's.
func (t *aclTable) rollBlockKey(k *pb.AclBlockKey, at int64) error {
	if err := validBlockKey(k, at); err != nil {
		return err
	}
	if n := len(t.blockKeys); n > 0 && k.Id <= t.blockKeys[n-1].Id {
		return errorf(ErrAclInvalid, "roll block key: id %d is not above the newest key's %d", k.Id, t.blockKeys[n-1].Id)
	}
	keep := make([]*pb.AclBlockKey, 0, len(t.blockKeys)+1)
	for _, old := range t.blockKeys {
		if old.ExpiresUnixNanos > at {
			keep = append(keep, old)
		}
	}
	keep = append(keep, proto.CloneOf(k))
	if len(keep) > MaxBlockKeys {
		keep = keep[len(keep)-MaxBlockKeys:]
	}
	t.blockKeys = keep // a new slice: views share the old
	return nil
}

// restoreBlockKeys checks a snapshot's keys as the rolls that made them
// were checked (ids rising, at most MaxBlockKeys).
func restoreBlockKeys(keys []*pb.AclBlockKey) ([]*pb.AclBlockKey, error) {
	if len(keys) > MaxBlockKeys {
		return nil, errorf(ErrAclInvalid, "%d block keys, at most %d", len(keys), MaxBlockKeys)
	}
	for i, k := range keys {
		if err := validBlockKey(k, 0); err != nil {
			return nil, err
		}
		if i > 0 && k.Id <= keys[i-1].Id {
			return nil, errorf(ErrAclInvalid, "block key ids not rising at %d", k.Id)
		}
	}
	return slices.Clone(keys), nil
}

// BlockKeys is every block key the cluster holds, oldest first; the last
// one signs new tokens. Expired keys stay until the next roll drops them:
// callers compare Expires with their clock.
func (a *ACL) BlockKeys() []BlockKey { return a.blockKeys }

func blockKeyView(keys []*pb.AclBlockKey) []BlockKey {
	out := make([]BlockKey, len(keys))
	for i, k := range keys {
		out[i] = BlockKey{ID: k.Id, Secret: k.Secret, Created: time.Unix(0, k.CreatedUnixNanos).UTC(), Expires: time.Unix(0, k.ExpiresUnixNanos).UTC()}
	}
	return out
}
