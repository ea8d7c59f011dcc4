package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// format2FixtureLogs is the history testdata/snapshot-v2.bin was written
// from (by the build before the namespace, snapshot format 2): sessions and
// members from randomLogs, then journal commands (segments, consumers,
// trims, resets) from randomJournalLogs, re-indexed after them.
func format2FixtureLogs(t testing.TB) []*raft.Log {
	logs := randomLogs(t, 11, 120)
	for _, l := range randomJournalLogs(t, 12, 200) {
		c := *l
		c.Index += 120
		logs = append(logs, &c)
	}
	return logs
}

// format3FixtureLogs is the history testdata/snapshot-v3.bin was written
// from (by the build before cache directives, snapshot format 3): the
// format-2 fixture's history, a SET_FORMAT to log format 3, then
// randomNamespaceLogs re-indexed after them.
func format3FixtureLogs(t testing.TB) []*raft.Log {
	logs := format2FixtureLogs(t)
	base := uint64(len(logs))
	logs = append(logs, cmdEntry(t, base+1, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: 3}))
	for _, l := range randomNamespaceLogs(t, 13, 300) {
		c := *l
		c.Index += base + 1
		logs = append(logs, &c)
	}
	return logs
}

// restoreFixture restores testdata/snapshot-v<version>.bin, requires it
// to be the state logs produce, and to be rewritten as the current format
// without change. check inspects the restored state.
func restoreFixture(t *testing.T, version uint32, logs []*raft.Log, check func(*State)) *FSM {
	t.Helper()
	return restoreFixtureFile(t, fmt.Sprintf("testdata/snapshot-v%d.bin", version), version, logs, check)
}

// restoreFixtureFile is restoreFixture for a fixture of snapshot format
// version stored in the file name.
func restoreFixtureFile(t *testing.T, name string, version uint32, logs []*raft.Log, check func(*State)) *FSM {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint32(data[8:12]); v != version {
		t.Fatalf("fixture is format %d", v)
	}
	old := New(nil)
	if err := old.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	ref := New(nil)
	ref.ApplyBatch(logs)
	var ho, hr [32]byte
	old.View(func(s *State) { ho = s.Hash(); check(s) })
	ref.View(func(s *State) { hr = s.Hash() })
	if ho != hr {
		t.Fatalf("format-%d fixture does not restore to the state that produced it", version)
	}
	again := snapshotBytes(t, old)
	// Without access control a state snapshots in format 5 (snapshot.go).
	if v := binary.BigEndian.Uint32(again[8:12]); v != aclSnapshotFormat-1 {
		t.Fatalf("rewritten as format %d", v)
	}
	round := New(nil)
	if err := round.Restore(nopCloser{bytes.NewReader(again)}); err != nil {
		t.Fatal(err)
	}
	round.View(func(s *State) { hr = s.Hash() })
	if hr != ho {
		t.Fatalf("the rewrite of the format-%d fixture changed the state", version)
	}
	return old
}

// format4FixtureLogs is the history testdata/snapshot-v4.bin was written
// from (by the build before the session floors, snapshot format 4): the
// format-3 fixture's history, a SET_FORMAT to log format 4, a cache
// directive on each of the first three files by path, a client
// that never acks sending 41 entries of 100 requests (its oldest 4
// results dropped), a RESET (sessions outlive it) and a few appends after.
func format4FixtureLogs(t testing.TB) []*raft.Log {
	logs := format3FixtureLogs(t)
	idx := uint64(len(logs))
	next := func() uint64 { idx++; return idx }
	logs = append(logs, cmdEntry(t, next(), pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: 4}))
	f := New(nil)
	f.ApplyBatch(logs)
	var paths []string
	f.View(func(s *State) {
		for _, f := range s.ns.files.sorted()[:3] {
			paths = append(paths, f.Path)
		}
	})
	for i, p := range paths {
		logs = append(logs, nsEntry(t, next(), int64(i+1), &pb.NamespaceCommand{Op: opAddCache(p, uint32(i+1))}))
	}
	seq := uint64(0)
	for range 41 {
		var ops []*pb.AppendOp
		for range 100 {
			seq++
			ops = append(ops, op("fixture-noack", seq, 0, "n"))
		}
		logs = append(logs, appendEntry(t, next(), ops...))
	}
	logs = append(logs, cmdEntry(t, next(), pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{}))
	for i := range 5 {
		logs = append(logs, appendEntry(t, next(), op("fixture-acks", uint64(i+1), uint64(i), "after-reset")))
	}
	return logs
}

// format5FixtureLogs is the history testdata/snapshot-v5.bin was written
// from (by the build before sessions expire when idle: log format 8,
// snapshot format 5): the format-4 fixture's history, then entries of log
// format 8 proposed one second apart (entry i at i seconds): a SET_FORMAT
// to 8, three opened sessions, two appends in each, and a CLOSE_SESSION of
// the second.
func format5FixtureLogs(t testing.TB) []*raft.Log {
	logs := format4FixtureLogs(t)
	idx := uint64(len(logs))
	add := func(typ pb.CommandType, m proto.Message) uint64 {
		t.Helper()
		idx++
		data, err := EncodeCommandVersion(SessionCloseFormat, typ, m, int64(idx)*int64(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
		return idx
	}
	add(pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionCloseFormat})
	var ids []string
	for _, c := range []string{"fixture-a", "fixture-b", "fixture-c"} {
		ids = append(ids, SessionID(c, add(pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: c})))
	}
	for seq := uint64(1); seq <= 2; seq++ {
		for _, id := range ids {
			o := op(id, seq, seq-1, "opened")
			o.SessionEstablished = seq > 1
			add(pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{o}})
		}
	}
	add(pb.CommandType_COMMAND_TYPE_CLOSE_SESSION, &pb.CloseSessionCommand{SessionId: ids[1]})
	return logs
}
