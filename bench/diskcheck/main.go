// Command diskcheck measures what a synced log append costs on the disk
// under a directory: a 12 KB pwrite followed by fdatasync into a file whose
// blocks are already written (as a zeroed raft-wal segment's are), first
// in one file alone, then in three files at once (the three members of a
// local cluster sharing one disk). It prints the median and p90 of each.
//
// A day's disk moves Logbook's figures more than most changes do: on the
// project's machines the same append took 67–73 µs on some days and
// 150–600 µs on others (docs/benchmarks.md), and three syncs at once took
// more than twice as long as one. bench/etcd-vs-logbook.sh runs this before
// each pair, in its data directory, so that every comparison records the
// disk it ran on.
//
//	go run ./bench/diskcheck --dir /tmp --n 400
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/logbookhq/logbook/internal/durable"
)

const (
	appendBytes = 12 << 10
	fileBytes   = 16 << 20
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure (three files of 16 MiB are written there and removed)")
	n := flag.Int("n", 400, "synced appends per file, 1..4096 (16 MiB of 12 KB appends is 1365; later ones wrap)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	flag.Parse()
	if *n < 1 || *n > 4096 {
		fmt.Fprintln(os.Stderr, "diskcheck: --n must be 1..4096")
		os.Exit(2)
	}
	alone, err := measure(*dir, 1, *n)
	if err == nil {
		var three []time.Duration
		if three, err = measure(*dir, 3, *n); err == nil {
			report(*asJSON, alone, three)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "diskcheck:", err)
	os.Exit(1)
}

// measure runs files writers at once, each making n synced appends into
// its own pre-written file, and returns every append's time.
func measure(dir string, files, n int) ([]time.Duration, error) {
	type result struct {
		times []time.Duration
		err   error
	}
	out := make([]result, files)
	var wg sync.WaitGroup
	// The files are written and synced before any writer starts timing, so
	// the writers do not overlap with each other's setup.
	fs := make([]*os.File, files)
	for i := range fs {
		f, err := prepare(filepath.Join(dir, fmt.Sprintf(".diskcheck-%d-%d", os.Getpid(), i)))
		if err != nil {
			for _, g := range fs[:i] {
				cleanup(g)
			}
			return nil, err
		}
		fs[i] = f
	}
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].times, out[i].err = appends(f, n)
		}()
	}
	wg.Wait()
	var all []time.Duration
	var err error
	for i, r := range out {
		cleanup(fs[i])
		if r.err != nil && err == nil {
			err = r.err
		}
		all = append(all, r.times...)
	}
	return all, err
}

// prepare creates path full of written zeros, synced.
func prepare(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err = f.Write(make([]byte, fileBytes)); err == nil {
		err = f.Sync()
	}
	if err != nil {
		cleanup(f)
		return nil, err
	}
	return f, nil
}

func cleanup(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

func appends(f *os.File, n int) ([]time.Duration, error) {
	buf := make([]byte, appendBytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	times := make([]time.Duration, 0, n)
	per := fileBytes / appendBytes
	for i := range n {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i%per)*appendBytes); err != nil {
			return times, err
		}
		if err := durable.DataSync(f); err != nil {
			return times, err
		}
		times = append(times, time.Since(start))
	}
	return times, nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func report(asJSON bool, alone, three []time.Duration) {
	if asJSON {
		json.NewEncoder(os.Stdout).Encode(map[string]any{
			"append_bytes": appendBytes,
			"alone_p50_us": us(quantile(alone, .5)), "alone_p90_us": us(quantile(alone, .9)),
			"three_p50_us": us(quantile(three, .5)), "three_p90_us": us(quantile(three, .9)),
		})
		return
	}
	fmt.Printf("disk:       12 KB pwrite + fdatasync: alone p50 %.0f µs, p90 %.0f µs; three files at once p50 %.0f µs, p90 %.0f µs\n",
		us(quantile(alone, .5)), us(quantile(alone, .9)), us(quantile(three, .5)), us(quantile(three, .9)))
}
