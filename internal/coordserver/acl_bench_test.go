package coordserver

import (
	"crypto/subtle"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
)

// aclFSM is an FSM at log format 12 holding 1,000 tokens and users, one
// of them (the token returned) a writer scoped to the event types "app."
// and "fs.", and a writer on everything, "wendy".
func aclFSM(b *testing.B) (*fsm.FSM, authz.Token, authz.Token) {
	f := fsm.New(nil)
	var logs []*raft.Log
	idx := uint64(0)
	entry := func(t fsmpb.CommandType, m any) {
		idx++
		var data []byte
		var err error
		switch x := m.(type) {
		case *fsmpb.SetFormatCommand:
			data, err = fsm.EncodeCommandVersion(fsm.HeldConfigFormat, t, x, 1)
		case *fsmpb.AclCommand:
			data, err = fsm.EncodeCommandVersion(fsm.AclFormat, t, x, 1)
		}
		if err != nil {
			b.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
	}
	entry(fsmpb.CommandType_COMMAND_TYPE_SET_FORMAT, &fsmpb.SetFormatCommand{Version: fsm.AclFormat})
	role := fsm.AclRoleOf(authz.Role{Name: "apps", Grants: []authz.Grant{{Level: authz.AccessWrite, Scope: authz.ScopeJournal, Prefixes: []string{"app.", "fs."}}}})
	entry(fsmpb.CommandType_COMMAND_TYPE_ACL, &fsmpb.AclCommand{Op: &fsmpb.AclCommand_PutRole{PutRole: &fsmpb.AclPutRoleOp{Role: role}}})
	token := func(user string) authz.Token {
		tok, err := authz.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		h := tok.Hash()
		entry(fsmpb.CommandType_COMMAND_TYPE_ACL, &fsmpb.AclCommand{Op: &fsmpb.AclCommand_CreateToken{CreateToken: &fsmpb.AclCreateTokenOp{Token: &fsmpb.AclToken{Accessor: tok.Accessor, SecretSha256: h[:], User: user}}}})
		return tok
	}
	var scoped, wendy authz.Token
	for i := range 1000 {
		user := fmt.Sprintf("user%04d", i)
		tok := token(user)
		entry(fsmpb.CommandType_COMMAND_TYPE_ACL, &fsmpb.AclCommand{Op: &fsmpb.AclCommand_Bind{Bind: &fsmpb.AclBindOp{User: user, Role: "apps"}}})
		if i == 500 {
			scoped = tok
		}
	}
	wendy = token("wendy")
	entry(fsmpb.CommandType_COMMAND_TYPE_ACL, &fsmpb.AclCommand{Op: &fsmpb.AclCommand_Bind{Bind: &fsmpb.AclBindOp{User: "wendy", Role: authz.RoleWriter}}})
	for i, r := range f.ApplyBatch(logs) {
		if res, ok := r.(fsm.AclResult); ok && res.Err != nil {
			b.Fatalf("entry %d: %v", i+1, res.Err)
		}
	}
	return f, scoped, wendy
}

// BenchmarkAclAppend is what ACL enforcement adds to one append with a
// bearer token, on the append path's own steps: parse the Authorization
// value, find the token in the applied ACL view (one atomic load, a map
// lookup), compare the secret's SHA-256 in constant time, and decide the
// append by the user's grants — for a writer on everything (decided
// without the event types) and for one scoped to event-type prefixes
// (each of the append's 4 types matched). docs/benchmarks.md reports it.
func BenchmarkAclAppend(b *testing.B) {
	f, scoped, wendy := aclFSM(b)
	method := "/" + pb.Journal_ServiceDesc.ServiceName + "/Append"
	req := &pb.AppendRequest{Events: []*pb.Event{{Type: "app.orders"}, {Type: "app.users"}, {Type: "fs.create"}, {Type: "app.orders"}}}
	for _, c := range []struct {
		name string
		tok  authz.Token
	}{{"writer", wendy}, {"scoped", scoped}} {
		header := "Bearer " + c.tok.String()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tok, err := authz.ParseBearer(header)
				if err != nil {
					b.Fatal(err)
				}
				acl := f.ACL()
				rec, ok := acl.Token(tok.Accessor)
				h := tok.Hash()
				if !ok || subtle.ConstantTimeCompare(h[:], rec.SecretSha256) != 1 {
					b.Fatal("token")
				}
				if d := decideUser(acl, authz.Identity{Kind: authz.KindToken, Name: rec.User}, authz.AccessWrite, method, req); !d.Allowed() {
					b.Fatal(d)
				}
			}
		})
	}
}
