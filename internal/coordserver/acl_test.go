package coordserver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/pki"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// aclCluster is secureCluster with ACL enforcement on every coordinator.
func aclCluster(t *testing.T, mod func(*Config)) *Cluster { return secureClusterWith(t, true, mod) }

// bootstrapACLCluster is aclCluster bootstrapped by its coordinators with
// a new token, returned once every coordinator holds it.
func bootstrapACLCluster(t *testing.T) (*Cluster, authz.Token) {
	t.Helper()
	tok, err := authz.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	c := aclCluster(t, func(c *Config) { c.Security.ACLBootstrapToken = tok.String() })
	eventually(t, 30*time.Second, "bootstrapped with the token", func() bool {
		for i := range c.Coordinators() {
			if _, ok := c.Coordinator(i).FSM().ACL().Token(tok.Accessor); !ok {
				return false
			}
		}
		return true
	})
	return c, tok
}

// TestAclBootstrapToken: coordinators given a bootstrap token bootstrap
// the access control with it once, by themselves: its user admin is an
// admin, a later bootstrap is refused, and revoking it works as for any
// token.
func TestAclBootstrapToken(t *testing.T) {
	t.Parallel()
	c, tok := bootstrapACLCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := tokenClient(ctx, t, c, tok.String())
	who, err := cl.Acl().WhoAmI(ctx)
	if err != nil || who.Name != "admin" || who.Kind != "token" || len(who.Roles) != 1 || who.Roles[0] != "admin" {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	if _, err := cl.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Acl().Bootstrap(ctx, "", "")
	sdkRefused(t, "a bootstrap after the token's", err, codes.FailedPrecondition, pb.ReasonAclBootstrapped, "already")
	toks, boot, enforced, err := cl.Acl().Tokens(ctx, "")
	if err != nil || len(toks) != 1 || !boot || !enforced || !strings.HasPrefix(toks[0].CreatedBy, "member:c") {
		t.Fatalf("tokens %+v %v %v %v", toks, boot, enforced, err)
	}
}

// tokenClient is an SDK client of endpoints that presents token and no
// certificate.
func tokenClient(ctx context.Context, t *testing.T, c *Cluster, token string, endpoints ...string) *client.Client {
	t.Helper()
	conf, err := client.LoadTLS("", "", c.TLS().CA())
	if err != nil {
		t.Fatal(err)
	}
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cl, err := client.New(ctx, client.Config{Endpoints: endpoints, TLS: conf, Token: token, AttemptTimeout: 2 * time.Second, SpreadOverMembers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// sdkRefused fails unless err is an SDK error of code (and reason, when
// given) whose message holds piece.
func sdkRefused(t *testing.T, what string, err error, code codes.Code, reason, piece string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != code || reason != "" && e.Reason != reason || !strings.Contains(e.Message, piece) {
		t.Fatalf("%s: %v, want %s %s %q", what, err, code, reason, piece)
	}
}

// TestAclEnforced: with --acl-enabled every user call needs a grant; the
// bootstrap happens once and makes the certificate user "admin" an
// admin; a reader reads and is refused every write and admin call with
// PermissionDenied naming the missing permission, changing nothing; a
// writer scoped to event-type and path prefixes is held to them, through
// followers too (forwarded calls carry the caller, which the leader
// checks again and journals as the actor); malformed, wrong, revoked and
// expired tokens are Unauthenticated with their reason; refusals are
// journaled as logbook.acl.denied audit events.
func TestAclEnforced(t *testing.T) {
	t.Parallel()
	c := aclCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin, _ := adminClient(ctx, t, c)
	j := admin.Journal()

	// Before the bootstrap: nobody has a role.
	_, err := j.Append(ctx, client.Event{Type: "app.x", Payload: []byte("x")})
	sdkRefused(t, "an append before the bootstrap", err, codes.PermissionDenied, pb.ReasonPermission, "not bootstrapped")
	who, err := admin.Acl().WhoAmI(ctx)
	if err != nil || who.Name != ClusterUser || who.Kind != "certificate" || who.Bootstrapped || !who.Enforced {
		t.Fatalf("whoami before the bootstrap: %+v %v", who, err)
	}
	boot, err := admin.Acl().Bootstrap(ctx, "", "first admin")
	if err != nil || !strings.HasPrefix(boot.Secret, "lbt_") || boot.User != ClusterUser {
		t.Fatalf("bootstrap: %+v %v", boot, err)
	}
	_, err = admin.Acl().Bootstrap(ctx, "", "again")
	sdkRefused(t, "a second bootstrap", err, codes.FailedPrecondition, pb.ReasonAclBootstrapped, "already bootstrapped")
	eventually(t, 20*time.Second, "every member applied the bootstrap", func() bool {
		for i := range c.Coordinators() {
			if !c.Coordinator(i).FSM().ACL().Bootstrapped {
				return false
			}
		}
		return true
	})
	if _, err := j.Append(ctx, client.Event{Type: "app.x", Payload: []byte("x")}); err != nil {
		t.Fatalf("the admin certificate after the bootstrap: %v", err)
	}

	// A reader and a scoped writer, created through a follower: the
	// leader journals the admin (forwarded) as the creator.
	li := c.LeaderIndex()
	var follower string
	for i := range c.Coordinators() {
		if i != li {
			follower = c.Config(i).GRPCAddr
			break
		}
	}
	adminTok := tokenClient(ctx, t, c, boot.Secret, follower)
	rita, err := adminTok.Acl().CreateToken(ctx, "rita", "reader", 0)
	if err != nil || rita.CreatedBy != "token:"+ClusterUser {
		t.Fatalf("create rita's token through a follower: %+v %v", rita, err)
	}
	if _, err := adminTok.Acl().Bind(ctx, "rita", "reader"); err != nil {
		t.Fatal(err)
	}
	grants := []client.Grant{{Level: "write", Scope: "journal", Prefixes: []string{"app."}}, {Level: "write", Scope: "fs", Prefixes: []string{"/wes"}}}
	if _, err := adminTok.Acl().PutRole(ctx, "wes-role", grants); err != nil {
		t.Fatal(err)
	}
	if _, err := adminTok.Acl().Bind(ctx, "wes", "wes-role"); err != nil {
		t.Fatal(err)
	}
	wes, err := adminTok.Acl().CreateToken(ctx, "wes", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(index uint64) {
		eventually(t, 20*time.Second, "every member applied the ACL change", func() bool {
			for i := range c.Coordinators() {
				if c.Coordinator(i).FSM().AppliedIndex() < index {
					return false
				}
			}
			return true
		})
	}
	wait(wes.Index)

	// The reader: reads, and nothing else; nothing changes.
	r := tokenClient(ctx, t, c, rita.Secret)
	before, err := j.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if evs, _, err := r.Journal().Read(ctx, 1, 10); err != nil || len(evs) == 0 {
		t.Fatalf("the reader reads: %d events, %v", len(evs), err)
	}
	_, err = r.Journal().Append(ctx, client.Event{Type: "app.y"})
	sdkRefused(t, "the reader appends", err, codes.PermissionDenied, pb.ReasonPermission, `user "rita" lacks write`)
	_, _, err = r.Journal().Trim(ctx, before.SafePos)
	sdkRefused(t, "the reader trims", err, codes.PermissionDenied, pb.ReasonPermission, "lacks admin")
	_, err = r.Journal().Reset(ctx, true)
	sdkRefused(t, "the reader resets", err, codes.PermissionDenied, pb.ReasonPermission, "lacks admin")
	_, err = r.Acl().CreateToken(ctx, "rita", "more", 0)
	sdkRefused(t, "the reader makes a token", err, codes.PermissionDenied, pb.ReasonPermission, "lacks admin")
	_, err = r.Acl().Bind(ctx, "rita", "admin")
	sdkRefused(t, "the reader makes herself admin", err, codes.PermissionDenied, pb.ReasonPermission, "lacks admin")
	// Only the refusals' audit records were journaled.
	if after, err := j.Positions(ctx); err != nil || after.TrimmedPos != before.TrimmedPos {
		t.Fatalf("the reader's refused calls trimmed the journal: %+v -> %+v (%v)", before, after, err)
	}
	evs, _, err := j.Read(ctx, before.SafePos+1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type != fsm.EventAclDenied {
			t.Fatalf("a refused call journaled %q", e.Type)
		}
	}
	if roles := c.Coordinator(li).FSM().ACL().RolesOf("rita"); len(roles) != 1 || roles[0] != "reader" {
		t.Fatalf("rita's roles %v", roles)
	}

	// The scoped writer, through every member (followers forward).
	w := tokenClient(ctx, t, c, wes.Secret)
	if _, err := w.Journal().Append(ctx, client.Event{Type: "app.orders", Payload: []byte("o")}); err != nil {
		t.Fatalf("wes appends app.*: %v", err)
	}
	_, err = w.Journal().Append(ctx, client.Event{Type: "app.ok"}, client.Event{Type: "billing.x"})
	sdkRefused(t, "wes appends billing.*", err, codes.PermissionDenied, pb.ReasonPermission, `lacks write on journal event type "billing.x"`)
	_, err = w.FS().List(ctx, "/wes")
	sdkRefused(t, "wes lists /wes (allowed: there is no such directory)", err, codes.NotFound, "", "/wes")
	_, err = w.FS().List(ctx, "/")
	sdkRefused(t, "wes lists /", err, codes.PermissionDenied, pb.ReasonPermission, `lacks read on path "/"`)
	_, err = w.FS().Delete(ctx, "/etc", true)
	sdkRefused(t, "wes deletes /etc", err, codes.PermissionDenied, pb.ReasonPermission, `lacks write on path "/etc"`)
	_, _, err = w.Journal().Read(ctx, 1, 10)
	sdkRefused(t, "wes reads the whole journal", err, codes.PermissionDenied, pb.ReasonPermission, "every journal event type")

	// Shutting a storage node down: by a coordinator for an admin only;
	// a node takes the call from coordinators alone.
	err = w.ShutdownNode(ctx, "n1", true)
	sdkRefused(t, "wes shuts a node down", err, codes.PermissionDenied, pb.ReasonPermission, "lacks admin on the cluster")
	direct := dialAs(t, c, c.Node(0).GRPCAddr(), ClusterUser, pki.RoleClient, pki.RoleNode)
	_, err = pb.NewDataNodeClient(direct).ShutdownNode(ctx, &pb.ShutdownNodeRequest{ForRestart: true})
	wantCode(t, "a client certificate calls the node's ShutdownNode", err, codes.PermissionDenied, pb.ReasonWrongRole)

	// Bad tokens.
	cc := dialAs(t, c, c.Endpoints()[0], "", "", "coordinator")
	for _, tc := range []struct{ header, reason string }{
		{"Bearer nonsense", pb.ReasonBadToken},
		{"Basic " + rita.Secret, pb.ReasonBadToken},
		{"Bearer " + rita.Secret[:len(rita.Secret)-4] + "AAAA", pb.ReasonBadToken},
		{"Bearer lbt_0123456789abcdef_" + strings.Repeat("A", 43), pb.ReasonTokenUnknown},
		{"Bearer " + strings.Repeat("x", 10_000), pb.ReasonBadToken},
	} {
		mctx := metadata.AppendToOutgoingContext(ctx, pb.MDAuthorization, tc.header)
		_, err := pb.NewJournalClient(cc).Positions(mctx, &pb.PositionsRequest{})
		wantCode(t, "token "+tc.header[:min(len(tc.header), 20)], err, codes.Unauthenticated, tc.reason)
		if strings.Contains(err.Error(), rita.Secret[len("lbt_0123456789abcdef_"):]) {
			t.Fatal("an error quotes the secret")
		}
	}
	// Revoked: refused by every member once applied.
	idx, err := adminTok.Acl().RevokeToken(ctx, rita.Accessor)
	if err != nil {
		t.Fatal(err)
	}
	wait(idx)
	_, _, err = r.Journal().Read(ctx, 1, 1)
	sdkRefused(t, "a revoked token", err, codes.Unauthenticated, pb.ReasonTokenUnknown, rita.Accessor)
	// Expired.
	short, err := adminTok.Acl().CreateToken(ctx, "rita", "short", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wait(short.Index)
	sc := tokenClient(ctx, t, c, short.Secret)
	eventually(t, 10*time.Second, "the short token expired", func() bool {
		_, _, err := sc.Journal().Read(ctx, 1, 1)
		var e *client.Error
		return errors.As(err, &e) && e.Reason == pb.ReasonTokenExpired
	})

	// The admin's shutdown goes through; admin operations are journaled
	// with who did them (a forwarded one with the original caller).
	if err := admin.ShutdownNode(ctx, "n1", false); err != nil {
		t.Fatalf("the admin shuts n1 down: %v", err)
	}
	if err := adminTok.Journal().SetPaused(ctx, false); err != nil {
		t.Fatalf("the admin token pauses nothing through a follower: %v", err)
	}
	eventually(t, 20*time.Second, "logbook.admin events naming their callers", func() bool {
		evs, _, err := j.Read(ctx, 1, 1000)
		var shutdown, paused bool
		for _, e := range evs {
			if e.Type != fsm.EventAdmin {
				continue
			}
			p := string(e.Payload)
			shutdown = shutdown || strings.Contains(p, "/logbook.v1.Cluster/ShutdownNode") && strings.Contains(p, "certificate:client:"+ClusterUser)
			paused = paused || strings.Contains(p, "/logbook.v1.Journal/SetPaused") && strings.Contains(p, "token:"+ClusterUser)
		}
		return err == nil && shutdown && paused
	})

	// The refusals were journaled (rate-limited), with who and what.
	eventually(t, 20*time.Second, "a logbook.acl.denied event", func() bool {
		evs, _, err := j.Read(ctx, 1, 1000)
		for _, e := range evs {
			if e.Type == fsm.EventAclDenied && bytes.Contains(e.Payload, []byte("token:")) {
				return true
			}
		}
		if err != nil {
			t.Logf("read: %v", err)
		}
		return false
	})
}
