package fsm

import (
	"testing"

	"github.com/hashicorp/raft"
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
