package client

import (
	"context"
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// KeyringOp is a gossip keyring operation (Consul's keyring).
type KeyringOp int

const (
	// KeyringList lists every member's gossip keys.
	KeyringList KeyringOp = iota + 1
	// KeyringInstall adds a key for decryption on every member.
	KeyringInstall
	// KeyringUse makes an installed key the primary on every member; it
	// changes nothing unless every member holds the key.
	KeyringUse
	// KeyringRemove drops a key that is no member's primary.
	KeyringRemove
)

func (op KeyringOp) proto() pb.GossipKeyringOp {
	switch op {
	case KeyringList:
		return pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST
	case KeyringInstall:
		return pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL
	case KeyringUse:
		return pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE
	case KeyringRemove:
		return pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE
	}
	return pb.GossipKeyringOp_GOSSIP_KEYRING_OP_UNSPECIFIED
}

// KeyringResult is a gossip keyring operation's outcome, per member.
type KeyringResult struct {
	// ResponderID is the coordinator that fanned the operation out.
	ResponderID string
	// Members are the coordinators, then the gossiping storage nodes.
	Members []KeyringMember
	// Keys are the keys members hold, most held first.
	Keys []KeyringKey
	// Total is how many members were asked; Failed how many failed.
	Total, Failed int
}

// KeyringMember is one member's outcome.
type KeyringMember struct {
	ID string
	// Role is "coordinator" or "node".
	Role  string
	OK    bool
	Error string
	// Keys are its keys after the operation, base64, primary first.
	Keys []string
}

// KeyringKey is one key with how many members hold it and use it.
type KeyringKey struct {
	Key              string
	Members, Primary int
}

// GossipKeyring applies op (with key, base64, for all but KeyringList) on
// every coordinator and every gossiping storage node. A member's failure
// is in the result, not the error; the error is for a refused request
// (InvalidArgument, or FailedPrecondition for removing a primary key).
func (cl *Cluster) GossipKeyring(ctx context.Context, op KeyringOp, key string) (KeyringResult, error) {
	if op.proto() == pb.GossipKeyringOp_GOSSIP_KEYRING_OP_UNSPECIFIED {
		return KeyringResult{}, fmt.Errorf("client: unknown gossip keyring operation %d", op)
	}
	var resp *pb.GossipKeyringResponse
	err := cl.c.do(ctx, false, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewClusterClient(cc).GossipKeyring(ctx, &pb.GossipKeyringRequest{Op: op.proto(), Key: key})
		return err
	})
	if err != nil {
		return KeyringResult{}, err
	}
	r := KeyringResult{ResponderID: resp.ResponderId, Total: int(resp.Total), Failed: int(resp.Failed)}
	for _, m := range resp.Members {
		r.Members = append(r.Members, KeyringMember{ID: m.Id, Role: m.Role, OK: m.Ok, Error: m.Error, Keys: m.Keys})
	}
	for _, k := range resp.Keys {
		r.Keys = append(r.Keys, KeyringKey{Key: k.Key, Members: int(k.Members), Primary: int(k.Primary)})
	}
	return r, nil
}
