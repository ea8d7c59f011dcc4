package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"unicode"

	"github.com/hashicorp/memberlist"
)

// Role says what a member does in a Logbook cluster.
type Role string

const (
	// RoleCoordinator is a coordinator: a Raft voter candidate that takes
	// part in the bootstrap-expect decision.
	RoleCoordinator Role = "coordinator"
	// RoleNode is a storage node.
	RoleNode Role = "node"
)

// maxIDLen bounds member and cluster IDs so that the encoded Meta comfortably
// fits memberlist's node-meta limit.
const maxIDLen = 128

// metaVersion is the version of the wire encoding of Meta. Additive changes
// (new optional fields) keep the version, since unknown JSON fields are
// ignored by older members; only incompatible changes bump it.
const metaVersion = 1

// Meta is what a member gossips about itself. It is encoded into memberlist's
// node meta, which is limited to memberlist.MetaMaxSize (512) bytes.
type Meta struct {
	// Role of the member.
	Role Role
	// ID is the member's unique, stable identity. It is also its memberlist
	// node name and, for coordinators, its Raft server ID.
	ID string
	// ClusterID names the cluster. It must equal Config.ClusterID (New fills
	// it in when empty).
	ClusterID string
	// RaftAddr is the Raft transport address (host:port). Required for
	// coordinators.
	RaftAddr string
	// GRPCAddr is the gRPC API address (host:port), if any.
	GRPCAddr string
	// HTTPAddr is the HTTP address (host:port), if any.
	HTTPAddr string
	// Bootstrapped is true when this member already has Raft state (it is,
	// or was, part of a formed cluster).
	Bootstrapped bool
}

// wireMeta is the JSON form of Meta. Short keys keep it well below the
// 512-byte limit. Leaving is internal: it is set by Leave so that peers can
// tell a graceful departure from a failure.
type wireMeta struct {
	V            int    `json:"v"`
	Role         Role   `json:"r"`
	ID           string `json:"id"`
	ClusterID    string `json:"c"`
	RaftAddr     string `json:"ra,omitempty"`
	GRPCAddr     string `json:"ga,omitempty"`
	HTTPAddr     string `json:"ha,omitempty"`
	Bootstrapped bool   `json:"b,omitempty"`
	Leaving      bool   `json:"l,omitempty"`
}

// Validate reports whether m is a well-formed local Meta: a known Role,
// non-empty ID and ClusterID, host:port addresses, and a RaftAddr for
// coordinators.
func (m Meta) Validate() error {
	switch m.Role {
	case RoleCoordinator, RoleNode:
	default:
		return fmt.Errorf("membership: meta: unknown role %q", m.Role)
	}
	return m.validateFields()
}

// validateFields checks everything but the role's value, so that metadata of
// members with roles introduced by newer versions still decodes.
func (m Meta) validateFields() error {
	if m.Role == "" {
		return errors.New("membership: meta: role is required")
	}
	if err := checkID("id", m.ID); err != nil {
		return err
	}
	if err := checkID("cluster id", m.ClusterID); err != nil {
		return err
	}
	if m.Role == RoleCoordinator && m.RaftAddr == "" {
		return fmt.Errorf("membership: meta: coordinator %q has no raft address", m.ID)
	}
	for _, a := range []struct{ name, addr string }{
		{"raft", m.RaftAddr}, {"grpc", m.GRPCAddr}, {"http", m.HTTPAddr},
	} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("membership: meta: %s address %q: %v", a.name, a.addr, err)
		}
	}
	return nil
}

func checkID(what, s string) error {
	if s == "" {
		return fmt.Errorf("membership: meta: %s is required", what)
	}
	if len(s) > maxIDLen {
		return fmt.Errorf("membership: meta: %s is longer than %d bytes", what, maxIDLen)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("membership: meta: %s %q contains whitespace or non-printable characters", what, s)
		}
	}
	return nil
}

// encodeMeta validates m and encodes it, failing if the result does not fit
// memberlist's node-meta limit.
func encodeMeta(m Meta, leaving bool) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(wireMeta{
		V:            metaVersion,
		Role:         m.Role,
		ID:           m.ID,
		ClusterID:    m.ClusterID,
		RaftAddr:     m.RaftAddr,
		GRPCAddr:     m.GRPCAddr,
		HTTPAddr:     m.HTTPAddr,
		Bootstrapped: m.Bootstrapped,
		Leaving:      leaving,
	})
	if err != nil {
		return nil, fmt.Errorf("membership: meta: encode: %v", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("membership: meta: encoded size %d exceeds memberlist limit of %d bytes", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta decodes a peer's node meta. leaving reports whether the peer has
// announced a graceful Leave.
func decodeMeta(b []byte) (m Meta, leaving bool, err error) {
	if len(b) == 0 {
		return Meta{}, false, errors.New("membership: meta: empty")
	}
	var w wireMeta
	if err := json.Unmarshal(b, &w); err != nil {
		return Meta{}, false, fmt.Errorf("membership: meta: decode: %v", err)
	}
	if w.V != metaVersion {
		return Meta{}, false, fmt.Errorf("membership: meta: unsupported version %d", w.V)
	}
	m = Meta{
		Role:         w.Role,
		ID:           w.ID,
		ClusterID:    w.ClusterID,
		RaftAddr:     w.RaftAddr,
		GRPCAddr:     w.GRPCAddr,
		HTTPAddr:     w.HTTPAddr,
		Bootstrapped: w.Bootstrapped,
	}
	if err := m.validateFields(); err != nil {
		return Meta{}, false, err
	}
	return m, w.Leaving, nil
}
