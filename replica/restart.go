package replica

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxRestartMarker bounds what is read of a restart marker (a decimal
// Unix time in milliseconds and a newline).
const maxRestartMarker = 64

// WriteRestartMarker records that the node is going down for a quick
// restart (HDFS's restart-for-upgrade shutdown): the RBW replica's data and
// checksums are fsynced, then rbw/blk_<id>.restart is written durably with
// the expiry as a decimal Unix time in milliseconds. A load before the
// expiry brings the replica back RBW, so its writer can resume it with a
// pipeline recovery; after it, or without a marker, the replica comes back
// RWR for block recovery. The marker is deleted at the next load either
// way. Only an RBW replica gets one (KindNotFound otherwise); a writer
// still attached is left alone (its unacked bytes are the writer's to
// resend).
func (d *Dataset) WriteRestartMarker(bpid string, id uint64, expiry time.Time) error {
	const op = "write-restart-marker"
	var data, meta, dir string
	err := d.view(op, bpid, id, func(_ *blockPool, r *replica) error {
		switch {
		case r == nil:
			return errNoReplica()
		case r.state != StateRBW:
			return newErr(KindNotFound, "non-rbw-replica", "replica is %v, not RBW", r.state)
		}
		data, meta, dir = r.dataPath(), r.metaPath(), r.dirPath()
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range []string{data, meta} {
		if err := syncFile(d.fs, p); err != nil {
			return at(ioErr(err), op, bpid, id)
		}
	}
	body := strconv.FormatInt(expiry.UnixMilli(), 10) + "\n"
	if err := writeFileDurable(d.fs, filepath.Join(dir, restartName(id)), []byte(body)); err != nil {
		return at(ioErr(err), op, bpid, id)
	}
	if err := d.fs.SyncDir(dir); err != nil {
		return at(ioErr(err), op, bpid, id)
	}
	return nil
}

// restartMarkerLive reads a restart marker: true if it holds an expiry
// still in the future. Anything unreadable counts as expired.
func (d *Dataset) restartMarkerLive(path string) bool {
	if st, err := d.fs.Stat(path); err != nil || st.Size > maxRestartMarker {
		return false
	}
	b, err := readFile(d.fs, path)
	if err != nil {
		return false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return false
	}
	return time.Now().Before(time.UnixMilli(ms))
}
