//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clusterState is what a refused call must leave as it was.
type clusterState struct {
	journal   journalSnapshot
	consumers []string // name and acked seq
	// namespace is `fs ls -R /` with each file's stat: a line per entry.
	namespace []string
	// replicas is every node's replica list, a line per replica.
	replicas []string
	// data is each node's replica of each of the files' blocks, read
	// whole ("node block-id" -> bytes).
	data    map[string][]byte
	members []string // leader, then each member and its suffrage
	nodes   []string // each registered node and whether it is live
}

func (s clusterState) String() string {
	n := 0
	for _, b := range s.data {
		n += len(b)
	}
	return fmt.Sprintf("%d events (%+v), consumers %v, %d namespace entries, %d replicas (%d of the files' read whole, %d bytes), members %v, nodes %v",
		len(s.journal.events), s.journal.pos, s.consumers, len(s.namespace), len(s.replicas), len(s.data), n, s.members, s.nodes)
}

// state takes the cluster's state as admin (c), reading the replicas of
// files' blocks on every node.
func (fc *fsCluster) state(ctx context.Context, t *testing.T, c *client.Client, files []string) clusterState {
	t.Helper()
	s := clusterState{journal: journalState(ctx, t, fc.cluster), data: map[string][]byte{}}
	cs, err := c.Journal().Consumers().List(ctx)
	if err != nil {
		t.Fatalf("consumers: %v", err)
	}
	for _, x := range cs {
		s.consumers = append(s.consumers, fmt.Sprintf("%s@%d", x.Name, x.AckedSeq))
	}
	if s.namespace, err = listRecursive(ctx, c, "/", 1000); err != nil {
		t.Fatalf("fs ls -R /: %v", err)
	}
	for _, n := range fc.nodes {
		dn, err := fc.dataNode(n)
		if err != nil {
			t.Fatal(err)
		}
		r, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: pool})
		if err != nil {
			t.Fatalf("%s: list replicas: %v", n, err)
		}
		for _, x := range r.Replicas {
			s.replicas = append(s.replicas, fmt.Sprintf("%s: block %d GS %d %s bytes %d/%d acked %d visible %d recovery %d storage %s",
				n, x.BlockId, x.Gs, x.State, x.NumBytes, x.BytesOnDisk, x.BytesAcked, x.VisibleLength, x.RecoveryId, x.StorageId))
		}
	}
	slices.Sort(s.replicas)
	for _, f := range files {
		info, err := c.FS().Stat(ctx, f)
		if err != nil {
			t.Fatalf("stat %s: %v", f, err)
		}
		for _, b := range info.Blocks {
			for _, n := range fc.nodes {
				rep, err := fc.replicaOn(ctx, n, b.ID)
				if err != nil {
					t.Fatal(err)
				}
				if rep == nil {
					continue
				}
				got, err := fc.readReplica(ctx, n, b.ID, b.GS, b.Token)
				if err != nil {
					t.Fatalf("read %s's replica of block %d: %v", n, b.ID, err)
				}
				s.data[fmt.Sprintf("%s block %d", n, b.ID)] = got
			}
		}
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	s.members = append(s.members, "leader "+st.LeaderID)
	for _, m := range st.Members {
		s.members = append(s.members, m.ID+" "+m.Suffrage)
	}
	slices.Sort(s.members[1:])
	nl, err := c.Nodes(ctx)
	if err != nil {
		t.Fatalf("nodes: %v", err)
	}
	for _, n := range nl.Nodes {
		s.nodes = append(s.nodes, fmt.Sprintf("%s live %v", n.ID, n.Live))
	}
	slices.Sort(s.nodes)
	return s
}

// same says how after differs from s (nil: not at all, but for
// logbook.acl.denied audit events appended to the journal).
func (s clusterState) same(after clusterState) error {
	var errs []error
	if err := s.journal.sameBut(after.journal, "logbook.acl.denied"); err != nil {
		errs = append(errs, fmt.Errorf("journal: %w", err))
	}
	for _, l := range []struct {
		what          string
		before, after []string
	}{
		{"consumers", s.consumers, after.consumers},
		{"namespace", s.namespace, after.namespace},
		{"replicas", s.replicas, after.replicas},
		{"members", s.members, after.members},
		{"nodes", s.nodes, after.nodes},
	} {
		if !slices.Equal(l.before, l.after) {
			errs = append(errs, fmt.Errorf("%s: before\n\t%s\nafter\n\t%s", l.what, strings.Join(l.before, "\n\t"), strings.Join(l.after, "\n\t")))
		}
	}
	for k, b := range s.data {
		if a, ok := after.data[k]; !ok || !bytes.Equal(a, b) {
			errs = append(errs, fmt.Errorf("%s: %d bytes before, %d after (present %v), not identical", k, len(b), len(a), ok))
		}
	}
	for k := range after.data {
		if _, ok := s.data[k]; !ok {
			errs = append(errs, fmt.Errorf("%s: a replica that was not there before", k))
		}
	}
	return errors.Join(errs...)
}

// listRecursive is `fs ls -R dir` with a stat of every file, a line per
// entry, visiting at most limit directories.
func listRecursive(ctx context.Context, c *client.Client, dir string, limit int) ([]string, error) {
	var out []string
	queue := []string{dir}
	for n := 0; len(queue) > 0; n++ {
		if n == limit {
			return nil, fmt.Errorf("more than %d directories", limit)
		}
		d := queue[0]
		queue = queue[1:]
		entries, err := c.FS().List(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", d, err)
		}
		for _, e := range entries {
			if e.Dir {
				out = append(out, "dir "+e.Path)
				queue = append(queue, e.Path)
				continue
			}
			info, err := c.FS().Stat(ctx, e.Path)
			if err != nil {
				return nil, fmt.Errorf("stat %s: %w", e.Path, err)
			}
			line := fmt.Sprintf("file %s length %d replication %d block size %d open %v holder %q modified %d",
				info.Path, info.Length, info.Replication, info.BlockSize, info.UnderConstruction, info.LeaseHolder, info.Modified.UnixNano())
			for _, b := range info.Blocks {
				line += fmt.Sprintf("; block %d GS %d length %d %v on %v", b.ID, b.GS, b.Length, b.State, slices.Sorted(slices.Values(b.Expected)))
			}
			out = append(out, line)
		}
	}
	return out, nil
}

// adminDoes makes, as admin, the destructive calls that are safe in the
// test (TestDestructiveOpsRefused says which and why), each checked to
// have taken effect.
func (fc *fsCluster) adminDoes(ctx context.Context, t *testing.T, c *client.Client, files []string) {
	t.Helper()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("admin: %s: %v", what, err)
		}
		fc.logf("admin: %s", what)
	}

	err := c.Journal().Consumers().Remove(ctx, refusalConsumer)
	if err == nil {
		var cs []client.Consumer
		cs, err = c.Journal().Consumers().List(ctx)
		if err == nil && slices.ContainsFunc(cs, func(x client.Consumer) bool { return x.Name == refusalConsumer }) {
			err = fmt.Errorf("still listed: %+v", cs)
		}
	}
	step("RemoveConsumer "+refusalConsumer+": gone from the list", err)

	trimmed, segs, err := c.Journal().Trim(ctx, 0)
	step(fmt.Sprintf("Trim: trimmed to %d, %d segments", trimmed, segs), err)

	// Delete the second file; its block goes from every node.
	gone := fc.lastBlock(t, files[1])
	_, err = c.FS().Delete(ctx, files[1], false)
	if err == nil {
		if _, serr := c.FS().Stat(ctx, files[1]); status.Code(serr) != codes.NotFound {
			err = fmt.Errorf("stat after the delete: %v, want NotFound", serr)
		}
	}
	if err == nil {
		err = poll(60*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
			for _, n := range fc.nodes {
				if r, err := fc.replicaOn(ctx, n, gone.Id); err != nil || r != nil {
					return fmt.Errorf("%s: %v, %v", n, r, err)
				}
			}
			return nil
		})
	}
	step(fmt.Sprintf("Namespace.Delete %s: NotFound, block %d gone from every node", files[1], gone.Id), err)

	old := fc.leader()
	to := fc.others(old)[0]
	got, err := c.Cluster().TransferLeadership(ctx, to)
	if err == nil && got != to {
		err = fmt.Errorf("leader %s, asked for %s", got, to)
	}
	if err == nil {
		fc.leader(to)
	}
	step(fmt.Sprintf("TransferLeadership %s -> %s", old, to), err)

	victim := fc.nodes[len(fc.nodes)-1]
	err = c.ShutdownNode(ctx, victim, false)
	if err == nil {
		_, err = fc.exitedAt(victim)
	}
	step(fmt.Sprintf("ShutdownNode %s: its container exited", victim), err)

	// Each admin call so far journaled who made it (before the reset
	// drops the events).
	j := journalState(ctx, t, fc.cluster)
	var did []string
	for _, a := range auditEvents(t, j.events, 0, "logbook.admin") {
		if strings.Contains(a.GetActor(), "admin") {
			did = append(did, a.GetAdmin().GetMethod())
		}
	}
	for _, m := range []string{"/logbook.v1.Journal/Trim", "/logbook.v1.Cluster/TransferLeadership", "/logbook.v1.Cluster/ShutdownNode"} {
		if !slices.Contains(did, m) {
			t.Errorf("admin: no logbook.admin event of admin for %s, only %v", m, did)
		}
	}
	fc.logf("admin: audited as admin: %v", did)

	last := j.events[len(j.events)-1].Seq
	trimmed, err = c.Journal().Reset(ctx, true)
	if err == nil && trimmed < last {
		err = fmt.Errorf("trimmed to %d, the journal held events up to %d", trimmed, last)
	}
	step(fmt.Sprintf("Reset: trimmed to %d (events were up to %d)", trimmed, last), err)

	leader := fc.leader()
	removed := fc.others(leader)[0]
	_, err = c.Cluster().RemoveServer(ctx, removed)
	if err == nil {
		_, err = fc.exitedAt(removed)
	}
	if err == nil {
		err = poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			st, err := c.Status(ctx)
			if err == nil && (len(st.Members) != len(fc.members)-1 || slices.ContainsFunc(st.Members, func(m client.Member) bool { return m.ID == removed })) {
				err = fmt.Errorf("members %+v", st.Members)
			}
			return err
		})
	}
	step(fmt.Sprintf("RemoveServer %s: it stopped, %d members left", removed, len(fc.members)-1), err)
}
