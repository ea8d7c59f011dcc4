package fsm

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzReadSnapshot: any byte string either restores or fails with a clear
// error; it never panics or allocates without bound.
func FuzzReadSnapshot(f *testing.F) {
	st := New(nil)
	st.ApplyBatch(randomLogs(f, 3, 50))
	snap, _ := st.Snapshot()
	var sink memSink
	snap.Persist(&sink)
	f.Add(sink.Bytes())
	f.Add([]byte("LBKSNAP\n\x00\x00\x00\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err == nil && s == nil {
			t.Fatal("nil state without error")
		}
	})
}

// FuzzApply: an arbitrary committed entry either applies or halts the FSM;
// it never panics.
func FuzzApply(f *testing.F) {
	f.Add(appendEntry(f, 1, op("c", 1, 0, "a")).Data)
	f.Add([]byte{0x08, 0x01, 0x10, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(nil)
		m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
	})
}
