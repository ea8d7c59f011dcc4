package authz

import "fmt"

// Access is the class of an RPC: who may call it. The values are those of
// the proto enum logbook.v1.Access (api/logbookv1/options.proto), so the
// edge converts with Access(pbAccess).
type Access uint8

const (
	accessUnspecified Access = iota
	// AccessPublic: anyone, even anonymous (health and readiness).
	AccessPublic
	// AccessRead, AccessWrite and AccessAdmin are the user levels, granted
	// by roles; each includes the ones before it.
	AccessRead
	AccessWrite
	AccessAdmin
	// AccessMember: coordinator to coordinator (the Peer service).
	AccessMember
	// AccessNode: storage node to coordinator (the NodeLink service).
	AccessNode
	// AccessBlock: block data on a storage node.
	AccessBlock
	// AccessRecovery: the replica side of block recovery on a storage node.
	AccessRecovery
	// AccessAuthenticated: any caller that proved who it is, whatever its
	// roles (who-am-I, the one-time ACL bootstrap).
	AccessAuthenticated
	accessEnd
)

func (a Access) String() string {
	switch a {
	case AccessPublic:
		return "public"
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	case AccessAdmin:
		return "admin"
	case AccessMember:
		return "member"
	case AccessNode:
		return "node"
	case AccessBlock:
		return "block"
	case AccessRecovery:
		return "recovery"
	case AccessAuthenticated:
		return "authenticated"
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

// Valid reports whether a is one of the classes above (not unspecified).
func (a Access) Valid() bool { return a > accessUnspecified && a < accessEnd }

// UserLevel reports whether a is a level a role can grant: read, write or
// admin.
func (a Access) UserLevel() bool { return a == AccessRead || a == AccessWrite || a == AccessAdmin }

// Includes reports whether a grant of level a allows a call that needs
// level want: admin includes write, write includes read. Both must be
// user levels.
func (a Access) Includes(want Access) bool {
	return a.UserLevel() && want.UserLevel() && a >= want
}
