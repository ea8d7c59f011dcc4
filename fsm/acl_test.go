package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
	"google.golang.org/protobuf/proto"
)

// aclState is a state at log format 12 and a way to apply ACL commands
// to it at the next index.
type aclState struct {
	t   *testing.T
	s   *State
	idx uint64
}

var aclTestTime = time.Unix(1_000_000, 0)

func newAclState(t *testing.T) *aclState {
	s := NewState()
	s.logFormat = AclFormat
	s.clock = aclTestTime.UnixNano() // every entry is proposed then: the clock stays
	return &aclState{t: t, s: s}
}

func (a *aclState) apply(version uint32, c *pb.AclCommand) AclResult {
	a.t.Helper()
	r := applyNext(a.t, a.s, &a.idx, timedEntry(a.t, version, aclTestTime, pb.CommandType_COMMAND_TYPE_ACL, c))
	return r.(AclResult)
}

// ok applies c and fails unless it was accepted with an audit event.
func (a *aclState) ok(c *pb.AclCommand) AclResult {
	a.t.Helper()
	r := a.apply(AclFormat, c)
	if r.Err != nil || r.Seq == 0 {
		a.t.Fatalf("%v: %+v", c, r)
	}
	return r
}

// refused applies c and fails unless it was refused with want, changing
// nothing but the applied index.
func (a *aclState) refused(c *pb.AclCommand, want error, reason string) {
	a.t.Helper()
	before, events := a.s.digest(false), a.s.NextSeq()
	r := a.apply(AclFormat, c)
	if !errors.Is(r.Err, want) || !strings.Contains(fmt.Sprint(r.Err), reason) {
		a.t.Fatalf("%v: %v, want %v (%q)", c, r.Err, want, reason)
	}
	if a.s.digest(false) != before || a.s.NextSeq() != events {
		a.t.Fatalf("%v: a refusal changed the state", c)
	}
}

func testToken(t testing.TB, user string) (authz.Token, *pb.AclToken) {
	tok, err := authz.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	h := tok.Hash()
	return tok, &pb.AclToken{Accessor: tok.Accessor, SecretSha256: h[:], User: user, CreatedUnixNanos: 1}
}

func bootstrapCmd(tok *pb.AclToken) *pb.AclCommand {
	return &pb.AclCommand{Actor: "certificate:ops", Op: &pb.AclCommand_Bootstrap{Bootstrap: &pb.AclBootstrapOp{Token: tok}}}
}

func bindCmd(user, role string) *pb.AclCommand {
	return &pb.AclCommand{Op: &pb.AclCommand_Bind{Bind: &pb.AclBindOp{User: user, Role: role}}}
}

func putRoleCmd(r authz.Role) *pb.AclCommand {
	return &pb.AclCommand{Op: &pb.AclCommand_PutRole{PutRole: &pb.AclPutRoleOp{Role: AclRoleOf(r)}}}
}

// TestAclCommands: the bootstrap happens once and binds its user to
// admin; roles, bindings and tokens change as asked, each with an audit
// event that names who asked and never holds a secret's hash; every
// malformed or impossible change is refused with its kind and changes
// nothing; the built Policy decides by the replicated bindings.
func TestAclCommands(t *testing.T) {
	a := newAclState(t)
	secret, root := testToken(t, "root")
	r := a.ok(bootstrapCmd(root))
	ev := a.s.events.at(r.Seq)
	if ev.Type != EventAclBootstrap || bytes.Contains(ev.Payload, root.SecretSha256) || !bytes.Contains(ev.Payload, []byte("certificate:ops")) {
		t.Fatalf("bootstrap event %q %x", ev.Type, ev.Payload)
	}
	acl := a.s.ACL()
	if got, ok := acl.Token(secret.Accessor); !ok || !bytes.Equal(got.SecretSha256, root.SecretSha256) || !acl.Bootstrapped || acl.Err != nil {
		t.Fatalf("after bootstrap: %v %v %v", got, acl.Bootstrapped, acl.Err)
	}
	rootID := authz.Identity{Kind: authz.KindToken, Name: "root"}
	if d := acl.Policy.Authorize(rootID, authz.AccessAdmin, authz.Resource{}); !d.Allowed() {
		t.Fatalf("root after bootstrap: %v", d)
	}
	_, again := testToken(t, "mallory")
	a.refused(bootstrapCmd(again), ErrAclBootstrapped, "already bootstrapped")

	// Roles.
	ops := authz.Role{Name: "ops", Grants: []authz.Grant{{Level: authz.AccessWrite, Scope: authz.ScopeFS, Prefixes: []string{"/ops"}}}}
	a.ok(putRoleCmd(ops))
	a.refused(putRoleCmd(authz.Role{Name: "admin"}), ErrAclInvalid, "built in")
	a.refused(putRoleCmd(authz.Role{Name: "bad name!"}), ErrAclInvalid, "role name")
	a.refused(putRoleCmd(authz.Role{Name: "x", Grants: []authz.Grant{{Level: authz.AccessMember, Scope: authz.ScopeAll}}}), ErrAclInvalid, "grant of member")
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_PutRole{PutRole: &pb.AclPutRoleOp{Role: &pb.AclRole{Name: "y", Grants: []*pb.AclGrant{{Level: 1 << 20, Scope: 1}}}}}}, ErrAclInvalid, "grant")
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_PutRole{PutRole: &pb.AclPutRoleOp{}}}, ErrAclInvalid, "no role")
	a.refused(&pb.AclCommand{}, ErrAclInvalid, "empty op")

	// Bindings.
	a.ok(bindCmd("bob", "ops"))
	if r := a.apply(AclFormat, bindCmd("bob", "ops")); r.Err != nil || !r.Unchanged || r.Seq != 0 {
		t.Fatalf("binding twice: %+v", r)
	}
	a.refused(bindCmd("bob", "nosuch"), ErrAclNotFound, `no role "nosuch"`)
	a.refused(bindCmd("", "ops"), ErrAclInvalid, "empty user name")
	a.refused(bindCmd("bad\x01user", "ops"), ErrAclInvalid, "control character")
	bob := authz.Identity{Kind: authz.KindToken, Name: "bob"}
	pol := a.s.ACL().Policy
	if !pol.Authorize(bob, authz.AccessWrite, authz.Paths("/ops/x")).Allowed() || pol.Authorize(bob, authz.AccessWrite, authz.Paths("/etc")).Allowed() {
		t.Fatal("bob's ops role does not decide as granted")
	}
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_DeleteRole{DeleteRole: &pb.AclDeleteRoleOp{Name: "ops"}}}, ErrAclInUse, `bound to 1 users ("bob" first)`)
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_DeleteRole{DeleteRole: &pb.AclDeleteRoleOp{Name: "reader"}}}, ErrAclInvalid, "built in")
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_DeleteRole{DeleteRole: &pb.AclDeleteRoleOp{Name: "nosuch"}}}, ErrAclNotFound, "nosuch")
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_Unbind{Unbind: &pb.AclUnbindOp{User: "bob", Role: "reader"}}}, ErrAclNotFound, "not bound")
	a.ok(&pb.AclCommand{Op: &pb.AclCommand_Unbind{Unbind: &pb.AclUnbindOp{User: "bob", Role: "ops"}}})
	if a.s.ACL().Policy.Authorize(bob, authz.AccessWrite, authz.Paths("/ops/x")).Allowed() {
		t.Fatal("bob still writes /ops after the unbind")
	}
	a.ok(&pb.AclCommand{Op: &pb.AclCommand_DeleteRole{DeleteRole: &pb.AclDeleteRoleOp{Name: "ops"}}})
	if len(a.s.ACL().Roles()) != 0 || len(a.s.ACL().Bindings()) != 1 {
		t.Fatalf("roles %v, bindings %v", a.s.ACL().Roles(), a.s.ACL().Bindings())
	}
	for i := range authz.MaxRolesPerUser {
		a.ok(putRoleCmd(authz.Role{Name: fmt.Sprintf("r%d", i)}))
		a.ok(bindCmd("many", fmt.Sprintf("r%d", i)))
	}
	a.refused(bindCmd("many", "reader"), ErrAclFull, "at most 16")

	// Tokens.
	_, tb := testToken(t, "bob")
	r = a.ok(&pb.AclCommand{Op: &pb.AclCommand_CreateToken{CreateToken: &pb.AclCreateTokenOp{Token: tb}}})
	if ev := a.s.events.at(r.Seq); ev.Type != EventAclTokenCreated || bytes.Contains(ev.Payload, tb.SecretSha256) {
		t.Fatalf("token event %q", ev.Type)
	}
	create := func(tok *pb.AclToken) *pb.AclCommand {
		return &pb.AclCommand{Op: &pb.AclCommand_CreateToken{CreateToken: &pb.AclCreateTokenOp{Token: tok}}}
	}
	a.refused(create(tb), ErrAclExists, tb.Accessor)
	bad := func(f func(*pb.AclToken)) *pb.AclToken {
		_, tok := testToken(t, "bob")
		f(tok)
		return tok
	}
	a.refused(create(bad(func(k *pb.AclToken) { k.Accessor = "XYZ" })), ErrAclInvalid, "accessor")
	a.refused(create(bad(func(k *pb.AclToken) { k.SecretSha256 = k.SecretSha256[:8] })), ErrAclInvalid, "hash of 8 bytes")
	a.refused(create(bad(func(k *pb.AclToken) { k.User = "" })), ErrAclInvalid, "empty user")
	a.refused(create(bad(func(k *pb.AclToken) { k.Description = strings.Repeat("d", 300) })), ErrAclInvalid, "description of 300 bytes")
	a.refused(create(bad(func(k *pb.AclToken) { k.ExpiresUnixNanos = -1 })), ErrAclInvalid, "expiry")
	a.refused(create(nil), ErrAclInvalid, "no token")
	revoke := &pb.AclCommand{Op: &pb.AclCommand_RevokeToken{RevokeToken: &pb.AclRevokeTokenOp{Accessor: tb.Accessor}}}
	a.ok(revoke)
	if _, ok := a.s.ACL().Token(tb.Accessor); ok {
		t.Fatal("revoked token still held")
	}
	a.refused(revoke, ErrAclNotFound, tb.Accessor)

	// A refused call's audit record changes nothing but the journal.
	gen := a.s.acl.gen
	r = a.ok(&pb.AclCommand{Op: &pb.AclCommand_Denied{Denied: &pb.AclDeniedOp{Identity: `user "eve"`, Method: "/logbook.v1.Journal/Reset", Reason: "lacks admin", Suppressed: 3}}})
	if a.s.events.at(r.Seq).Type != EventAclDenied || a.s.acl.gen != gen {
		t.Fatal("denied record")
	}
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_Denied{Denied: &pb.AclDeniedOp{Reason: strings.Repeat("r", MaxAclDeniedField+1)}}}, ErrAclInvalid, "at most 512")

	// An admin operation's record, likewise.
	r = a.ok(&pb.AclCommand{Actor: "token:root", Op: &pb.AclCommand_Admin{Admin: &pb.AclAdminOp{Method: "/logbook.v1.Journal/Trim", Request: `{"to":"5"}`, Member: "c1"}}})
	if ev := a.s.events.at(r.Seq); ev.Type != EventAdmin || !bytes.Contains(ev.Payload, []byte("token:root")) || a.s.acl.gen != gen {
		t.Fatalf("admin record %q", ev.Type)
	}
	a.refused(&pb.AclCommand{Op: &pb.AclCommand_Admin{Admin: &pb.AclAdminOp{Request: strings.Repeat("r", 2*MaxAclDeniedField+1)}}}, ErrAclInvalid, "admin record")

	// Client appends cannot forge the audit events.
	app := applyNext(t, a.s, &a.idx, timedEntry(t, AclFormat, time.Unix(2_000_000, 0), pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{{Events: []*pb.JournalEvent{{Type: EventAclBootstrap}}}}}))
	if res := app.([]Result); !errors.Is(res[0].Err, ErrReservedEventType) {
		t.Fatalf("a client's logbook.acl event: %v", res[0].Err)
	}
}

// TestAclNeedsFormat12: an ACL command in an entry of log format 11, or
// in a format-12 entry while the state is still at 11, is refused and
// changes nothing.
func TestAclNeedsFormat12(t *testing.T) {
	a := newAclState(t)
	a.s.logFormat = HeldConfigFormat
	_, tok := testToken(t, "root")
	before := a.s.digest(false)
	for _, v := range []uint32{HeldConfigFormat, AclFormat} {
		if r := a.apply(v, bootstrapCmd(tok)); !errors.Is(r.Err, ErrAclFormat) {
			t.Fatalf("entry format %d at state format 11: %v", v, r.Err)
		}
	}
	if a.s.digest(false) != before || a.s.ACL().Bootstrapped {
		t.Fatal("a refused ACL command changed the state")
	}
}

// TestAclSnapshot: a state with access control snapshots in format 6 and
// restores to the same state (digest, tokens, roles, bindings, policy);
// one without still snapshots in format 5 and hashes as before; a
// snapshot with a malformed ACL record, or one at a log format before 12,
// is refused as corrupt.
func TestAclSnapshot(t *testing.T) {
	plain := newAclState(t)
	before := plain.s.Hash()
	_, data := roundTrip(t, plain.s)
	if v := binary.BigEndian.Uint32(data[8:12]); v != 5 {
		t.Fatalf("a state without ACLs snapshots in format %d", v)
	}

	a := newAclState(t)
	if a.s.Hash() != before {
		t.Fatal("digest of an empty state changed")
	}
	_, root := testToken(t, "root")
	a.ok(bootstrapCmd(root))
	a.ok(putRoleCmd(authz.Role{Name: "fs-ro", Grants: []authz.Grant{{Level: authz.AccessRead, Scope: authz.ScopeFS, Prefixes: []string{"/data"}}}}))
	a.ok(bindCmd("dave", "fs-ro"))
	a.ok(bindCmd("dave", "writer"))
	if a.s.Hash() == before {
		t.Fatal("ACLs do not enter the digest")
	}
	r, data := roundTrip(t, a.s)
	if v := binary.BigEndian.Uint32(data[8:12]); v != aclSnapshotFormat {
		t.Fatalf("format %d", v)
	}
	if r.Hash() != a.s.Hash() {
		t.Fatal("restored ACL state differs")
	}
	got, want := r.ACL(), a.s.ACL()
	if len(got.Tokens()) != 1 || !proto.Equal(got.Tokens()[0], want.Tokens()[0]) || fmt.Sprint(got.Bindings()) != fmt.Sprint(want.Bindings()) || got.Err != nil {
		t.Fatalf("restored %v %v, want %v %v", got.Tokens(), got.Bindings(), want.Tokens(), want.Bindings())
	}
	dave := authz.Identity{Kind: authz.KindToken, Name: "dave"}
	if !got.Policy.Authorize(dave, authz.AccessWrite, authz.Paths("/x")).Allowed() {
		t.Fatal("restored policy lost a binding")
	}

	corrupt := func(what string, edit func(*pb.AclState, *pb.SnapshotHeader)) {
		t.Helper()
		sn := captureSnapshot(a.s)
		sn.acl = proto.CloneOf(sn.acl)
		sn.header = proto.CloneOf(sn.header)
		edit(sn.acl, sn.header)
		var buf bytes.Buffer
		if err := sn.write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Fatalf("%s: %v, want ErrSnapshotCorrupt", what, err)
		}
	}
	corrupt("a built-in role", func(st *pb.AclState, _ *pb.SnapshotHeader) {
		st.Roles = append(st.Roles, &pb.AclRole{Name: "admin"})
	})
	corrupt("a binding to an unknown role", func(st *pb.AclState, _ *pb.SnapshotHeader) {
		st.Bindings = append(st.Bindings, &pb.AclBinding{User: "zed", Roles: []string{"nosuch"}})
	})
	corrupt("a short token hash", func(st *pb.AclState, _ *pb.SnapshotHeader) { st.Tokens[0].SecretSha256 = []byte{1} })
	corrupt("a token twice", func(st *pb.AclState, _ *pb.SnapshotHeader) { st.Tokens = append(st.Tokens, st.Tokens[0]) })
	corrupt("ACLs at log format 11", func(_ *pb.AclState, h *pb.SnapshotHeader) { h.LogFormat = HeldConfigFormat })
	corrupt("two ACL records counted", func(_ *pb.AclState, h *pb.SnapshotHeader) { h.AclCount = 2 })
}

// TestFSMPublishesACL: the FSM's lock-free view follows applies and
// restores.
func TestFSMPublishesACL(t *testing.T) {
	f := New(nil)
	if f.ACL().Bootstrapped || f.ACL().Policy.String() == "" {
		t.Fatal("fresh FSM")
	}
	set, _ := EncodeCommandVersion(HeldConfigFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: AclFormat}, 1)
	_, tok := testToken(t, "root")
	boot, _ := EncodeCommandVersion(AclFormat, pb.CommandType_COMMAND_TYPE_ACL, bootstrapCmd(tok), 2)
	out := f.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: set}, {Index: 2, Type: raft.LogCommand, Data: boot}})
	if r, ok := out[1].(AclResult); !ok || r.Err != nil {
		t.Fatalf("bootstrap: %v", out[1])
	}
	if _, ok := f.ACL().Token(tok.Accessor); !ok || !f.ACL().Bootstrapped {
		t.Fatal("the view does not follow the apply")
	}
	g := New(nil)
	if err := g.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.ACL().Token(tok.Accessor); !ok {
		t.Fatal("the view does not follow a restore")
	}
}

func rollCmd(id uint32, created, expires time.Time) *pb.AclCommand {
	return &pb.AclCommand{UnixNanos: created.UnixNano(), Op: &pb.AclCommand_RollBlockKey{RollBlockKey: &pb.AclRollBlockKeyOp{Key: &pb.AclBlockKey{
		Id: id, Secret: bytes.Repeat([]byte{byte(id)}, BlockKeyBytes), CreatedUnixNanos: created.UnixNano(), ExpiresUnixNanos: expires.UnixNano(),
	}}}}
}

// TestAclBlockKeys: a roll adds a key with a rising id and no journal
// event, drops the keys expired at its time and the oldest past
// MaxBlockKeys; a malformed roll changes nothing; the keys survive a
// snapshot and a corrupt snapshot key is refused.
func TestAclBlockKeys(t *testing.T) {
	a := newAclState(t)
	t0 := aclTestTime
	accept := func(c *pb.AclCommand) {
		t.Helper()
		events := a.s.NextSeq()
		if r := a.apply(AclFormat, c); r.Err != nil || r.Seq != 0 {
			t.Fatalf("roll: %+v", r)
		}
		if a.s.NextSeq() != events {
			t.Fatal("a roll appended a journal event")
		}
	}
	accept(rollCmd(1, t0, t0.Add(time.Hour)))
	accept(rollCmd(2, t0.Add(time.Minute), t0.Add(2*time.Hour)))
	ids := func() (out []uint32) {
		for _, k := range a.s.ACL().BlockKeys() {
			out = append(out, k.ID)
		}
		return out
	}
	if got := ids(); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("keys %v", got)
	}
	if k := a.s.ACL().BlockKeys()[1]; !k.Expires.Equal(t0.Add(2*time.Hour)) || len(k.Secret) != BlockKeyBytes {
		t.Fatalf("key %+v", k)
	}
	for name, c := range map[string]*pb.AclCommand{
		"an id not above the newest": rollCmd(2, t0.Add(2*time.Minute), t0.Add(3*time.Hour)),
		"id 0":                       rollCmd(0, t0, t0.Add(time.Hour)),
		"expired when proposed":      rollCmd(3, t0.Add(time.Hour), t0.Add(time.Minute)),
		"a short secret": {UnixNanos: t0.UnixNano(), Op: &pb.AclCommand_RollBlockKey{RollBlockKey: &pb.AclRollBlockKeyOp{Key: &pb.AclBlockKey{
			Id: 9, Secret: []byte{1}, CreatedUnixNanos: t0.UnixNano(), ExpiresUnixNanos: t0.Add(time.Hour).UnixNano()}}}},
		"no key": {Op: &pb.AclCommand_RollBlockKey{RollBlockKey: &pb.AclRollBlockKeyOp{}}},
	} {
		t.Run(name, func(t *testing.T) { a.t = t; a.refused(c, ErrAclInvalid, "block key") })
	}
	a.t = t
	// At t0+90m key 1 has expired: the roll drops it.
	accept(rollCmd(3, t0.Add(90*time.Minute), t0.Add(3*time.Hour)))
	if got := ids(); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("after expiry: keys %v", got)
	}
	for id := uint32(4); id < 4+MaxBlockKeys; id++ {
		accept(rollCmd(id, t0.Add(100*time.Minute), t0.Add(5*time.Hour)))
	}
	if got := ids(); len(got) != MaxBlockKeys || got[0] != 4 {
		t.Fatalf("past the bound: keys %v", got)
	}

	r, _ := roundTrip(t, a.s)
	if r.Hash() != a.s.Hash() || fmt.Sprint(r.ACL().BlockKeys()) != fmt.Sprint(a.s.ACL().BlockKeys()) {
		t.Fatal("block keys differ after a snapshot")
	}
	for what, edit := range map[string]func(st *pb.AclState){
		"a short key": func(st *pb.AclState) {
			st.BlockKeys[0] = &pb.AclBlockKey{Id: 1, Secret: []byte{1}, ExpiresUnixNanos: 2}
		},
		"ids not rising": func(st *pb.AclState) { st.BlockKeys = append(st.BlockKeys, st.BlockKeys[0]) },
		"more than the max": func(st *pb.AclState) {
			st.BlockKeys = append(st.BlockKeys, rollCmd(99, t0, t0.Add(time.Hour)).GetRollBlockKey().Key)
		},
	} {
		sn := captureSnapshot(a.s)
		sn.acl = proto.CloneOf(sn.acl)
		edit(sn.acl)
		var buf bytes.Buffer
		if err := sn.write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("%s: %v, want ErrSnapshotCorrupt", what, err)
		}
	}

	// Keys alone make the ACL record (snapshot format 6).
	b := newAclState(t)
	b.apply(AclFormat, rollCmd(1, t0, t0.Add(time.Hour)))
	if _, data := roundTrip(t, b.s); binary.BigEndian.Uint32(data[8:12]) != aclSnapshotFormat {
		t.Fatal("a state with only block keys lost them in the snapshot format")
	}
}
