package replicatest

import (
	"fmt"
	"testing"

	"github.com/logbookhq/logbook/replica"
)

// The §R2.16 transition table, cell by cell. Every replica is set up with
// id tid, GS 100 and 1000 bytes (not chunk aligned); RUR has recovery id
// 200. An operation's arguments are the valid ones for that replica, so the
// cell's outcome depends on the state alone.

const (
	tid    = 900
	tgs    = 100
	tlen   = 1000
	tnewGS = 150
	trid   = 200
)

// from is a row of the table: a replica state (or none).
type from string

const (
	fromNone      from = "none"
	fromTemporary from = "TEMPORARY"
	fromRBW       from = "RBW"
	fromRWR       from = "RWR"
	fromRUR       from = "RUR"
	fromFinalized from = "FINALIZED"
)

var rows = []from{fromNone, fromTemporary, fromRBW, fromRWR, fromRUR, fromFinalized}

// outcome of one cell: an error kind, or the state (and GS) afterwards;
// nilInfo for initReplicaRecovery of a missing replica.
type outcome struct {
	err     replica.ErrorKind
	state   replica.State
	gs      uint64
	nilInfo bool
}

func fail(k replica.ErrorKind) outcome       { return outcome{err: k} }
func to(st replica.State, gs uint64) outcome { return outcome{state: st, gs: gs} }

const (
	rnf = replica.KindNotFound
	rae = replica.KindAlreadyExists
	bad = replica.KindInvalidState
	rip = replica.KindRecoveryInProgress
)

var (
	tmp  = replica.StateTemporary
	rbwS = replica.StateRBW
	rur  = replica.StateRUR
	fin  = replica.StateFinalized
)

type op struct {
	name string
	run  func(s replica.Store) error
	want map[from]outcome
}

func b(gs uint64) replica.Block { return replica.Block{ID: tid, GS: gs, NumBytes: tlen} }

var ops = []op{
	{"createRbw", func(s replica.Store) error {
		w, err := s.CreateRbw(ctx, Pool, replica.Block{ID: tid, GS: tgs}, replica.CreateOptions{})
		closeW(w)
		return err
	}, map[from]outcome{fromNone: to(rbwS, tgs), fromTemporary: fail(rae), fromRBW: fail(rae), fromRWR: fail(rae), fromRUR: fail(rae), fromFinalized: fail(rae)}},
	{"createTemporary/same-GS/transfer", func(s replica.Store) error {
		w, err := s.CreateTemporary(ctx, Pool, replica.Block{ID: tid, GS: tgs}, true, replica.CreateOptions{})
		closeW(w)
		return err
	}, map[from]outcome{fromNone: to(tmp, tgs), fromTemporary: fail(rae), fromRBW: fail(rae), fromRWR: fail(rae), fromRUR: fail(rae), fromFinalized: fail(rae)}},
	{"createTemporary/newer-GS/not-transfer", func(s replica.Store) error {
		w, err := s.CreateTemporary(ctx, Pool, replica.Block{ID: tid, GS: tnewGS}, false, replica.CreateOptions{})
		closeW(w)
		return err
	}, map[from]outcome{fromNone: to(tmp, tnewGS), fromTemporary: to(tmp, tnewGS), fromRBW: to(tmp, tnewGS), fromRWR: fail(rae), fromRUR: fail(rae), fromFinalized: fail(rae)}},
	{"createTemporary/newer-GS/transfer", func(s replica.Store) error {
		w, err := s.CreateTemporary(ctx, Pool, replica.Block{ID: tid, GS: tnewGS}, true, replica.CreateOptions{})
		closeW(w)
		return err
	}, map[from]outcome{fromNone: to(tmp, tnewGS), fromTemporary: to(tmp, tnewGS), fromRBW: to(tmp, tnewGS), fromRWR: to(tmp, tnewGS), fromRUR: to(tmp, tnewGS), fromFinalized: to(tmp, tnewGS)}},
	{"convertTemporaryToRbw", func(s replica.Store) error {
		_, err := s.ConvertTemporaryToRbw(ctx, Pool, b(tgs))
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: to(rbwS, tgs), fromRBW: fail(rae), fromRWR: fail(rae), fromRUR: fail(rae), fromFinalized: fail(rae)}},
	{"append", func(s replica.Store) error {
		w, err := s.Append(ctx, Pool, b(tgs), tnewGS, tlen)
		closeW(w)
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: fail(rnf), fromRBW: fail(rnf), fromRWR: fail(rnf), fromRUR: fail(rnf), fromFinalized: to(rbwS, tnewGS)}},
	{"recoverAppend", func(s replica.Store) error {
		w, err := s.RecoverAppend(ctx, Pool, b(tgs), tnewGS, tlen)
		closeW(w)
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: fail(rnf), fromRBW: to(rbwS, tnewGS), fromRWR: fail(rnf), fromRUR: fail(rnf), fromFinalized: to(rbwS, tnewGS)}},
	{"recoverClose", func(s replica.Store) error {
		_, err := s.RecoverClose(ctx, Pool, b(tgs), tnewGS, tlen)
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: fail(rnf), fromRBW: to(fin, tnewGS), fromRWR: fail(rnf), fromRUR: fail(rnf), fromFinalized: to(fin, tnewGS)}},
	{"recoverRbw", func(s replica.Store) error {
		w, err := s.RecoverRbw(ctx, Pool, b(tgs), tnewGS, tlen, tlen)
		closeW(w)
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: fail(rnf), fromRBW: to(rbwS, tnewGS), fromRWR: fail(rnf), fromRUR: fail(rnf), fromFinalized: fail(rnf)}},
	{"finalize", func(s replica.Store) error {
		_, err := s.FinalizeBlock(ctx, Pool, b(tgs))
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: to(fin, tgs), fromRBW: to(fin, tgs), fromRWR: to(fin, tgs), fromRUR: to(fin, tgs), fromFinalized: to(fin, tgs)}},
	{"initReplicaRecovery", func(s replica.Store) error {
		info, err := s.InitReplicaRecovery(ctx, Pool, b(tgs), 300)
		if err == nil && info == nil {
			return errNilInfo
		}
		return err
	}, map[from]outcome{fromNone: {nilInfo: true}, fromTemporary: fail(bad), fromRBW: to(rur, tgs), fromRWR: to(rur, tgs), fromRUR: to(rur, tgs), fromFinalized: to(rur, tgs)}},
	{"initReplicaRecovery/same-id", func(s replica.Store) error {
		info, err := s.InitReplicaRecovery(ctx, Pool, b(tgs), trid)
		if err == nil && info == nil {
			return errNilInfo
		}
		return err
	}, map[from]outcome{fromNone: {nilInfo: true}, fromTemporary: fail(bad), fromRBW: to(rur, tgs), fromRWR: to(rur, tgs), fromRUR: fail(rip), fromFinalized: to(rur, tgs)}},
	{"updateReplicaUnderRecovery", func(s replica.Store) error {
		_, err := s.UpdateReplicaUnderRecovery(ctx, Pool, b(tgs), trid, tid, tlen-100)
		return err
	}, map[from]outcome{fromNone: fail(rnf), fromTemporary: fail(bad), fromRBW: fail(bad), fromRWR: fail(bad), fromRUR: to(fin, trid), fromFinalized: fail(bad)}},
}

var errNilInfo = fmt.Errorf("no replica (nil info)")

func closeW(w replica.Writer) {
	if w != nil {
		w.Close()
	}
}

// setup builds the row's replica in a fresh store; it returns the store
// (possibly restarted).
func setup(t *testing.T, f Factory, row from) replica.Store {
	t.Helper()
	s := open(t, f)
	data := Data(99, tlen)
	switch row {
	case fromNone:
	case fromTemporary:
		w, err := s.CreateTemporary(ctx, Pool, replica.Block{ID: tid, GS: tgs, NumBytes: tlen}, true, replica.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		Write(t, w, 0, data)
	case fromRBW:
		rbw(t, s, tid, tgs, data)
	case fromRWR:
		w := rbw(t, s, tid, tgs, data)
		w.Sync()
		s = restart(t, f, s)
		WantState(t, s, tid, replica.StateRWR, tgs)
	case fromRUR:
		rbw(t, s, tid, tgs, data)
		if _, err := s.InitReplicaRecovery(ctx, Pool, b(tgs), trid); err != nil {
			t.Fatal(err)
		}
	case fromFinalized:
		finalized(t, s, tid, tgs, data)
	}
	return s
}

// RunTransitionTable checks every cell of design §R2.16 (plus the restart
// column) against f.
func RunTransitionTable(t *testing.T, f Factory) {
	for _, o := range ops {
		for _, row := range rows {
			want := o.want[row]
			t.Run(o.name+"/"+string(row), func(t *testing.T) {
				s := setup(t, f, row)
				before, _ := s.GetReplica(Pool, tid)
				err := o.run(s)
				switch {
				case want.nilInfo:
					if err != errNilInfo {
						t.Fatalf("want nil info, got %v", err)
					}
				case want.err != replica.KindUnknown:
					WantKind(t, err, want.err)
					// A refused operation leaves the replica as it was
					// (except that a writer may have been stopped).
					after, _ := s.GetReplica(Pool, tid)
					if after.State != before.State || after.GS != before.GS || after.NumBytes != before.NumBytes {
						t.Fatalf("refused op changed the replica: %+v → %+v", before, after)
					}
				default:
					if err != nil {
						t.Fatalf("want %v GS %d, got error %v", want.state, want.gs, err)
					}
					ri := WantState(t, s, tid, want.state, want.gs)
					if ri.State == replica.StateFinalized && row != fromNone && ri.NumBytes > 0 {
						if got := ReadAll(t, s, ri.Block()); int64(len(got)) != ri.NumBytes {
							t.Fatalf("read %d of %d bytes", len(got), ri.NumBytes)
						}
					}
				}
			})
		}
	}
	// The restart column.
	restartWant := map[from]*replica.State{
		fromTemporary: nil, fromRBW: &[]replica.State{replica.StateRWR}[0], fromRWR: &[]replica.State{replica.StateRWR}[0],
		fromRUR: &[]replica.State{replica.StateRWR}[0], fromFinalized: &[]replica.State{replica.StateFinalized}[0],
	}
	for row, want := range restartWant {
		t.Run("restart/"+string(row), func(t *testing.T) {
			s := setup(t, f, row)
			s = restart(t, f, s)
			ri, err := s.GetReplica(Pool, tid)
			if want == nil {
				WantKind(t, err, replica.KindNotFound)
				return
			}
			if err != nil || ri.State != *want || ri.GS != tgs {
				t.Fatalf("after restart: %+v, %v; want %v", ri, err, *want)
			}
		})
	}
}
