package export_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/logbookhq/logbook/journal/export"
)

func Example() {
	var file bytes.Buffer
	w, err := export.NewWriter(&file, export.Header{ClusterID: "c1", Source: "m1", FirstSeq: 7, LastSeq: 8, EventCount: 2})
	if err != nil {
		panic(err)
	}
	for seq := uint64(7); seq <= 8; seq++ {
		if err := w.Write(export.Event{Seq: seq, Type: "mknod", Payload: []byte("x")}); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	data := file.Bytes()

	r, err := export.NewReader(bytes.NewReader(data))
	if err != nil {
		panic(err)
	}
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Seq, e.Type)
	}

	data[len(data)-30] ^= 1 // damage the last record
	fmt.Println(export.Inspect(bytes.NewReader(data)))
	// Output:
	// 7 mknod
	// 8 mknod
	// header: OK: cluster "c1" source "m1" created unset; 2 events, seq 7..8
	// records: 1 good, seq 7..7
	// trailer: intact at offset 150 but record count 2, found 1
	// damaged ranges: 1
	//   [104, 150) after seq 7: crc mismatch
	// integrity DAMAGED
}
