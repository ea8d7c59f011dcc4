package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/leaserecovery"
)

// maxReplication is the largest replication factor the coordinators take
// (fsm.MaxReplication).
const maxReplication = 16

// openLocalSource opens what fs put reads: a regular file, or something
// that streams (a pipe, a device); a directory or a missing file fails
// before anything is created in the cluster.
func openLocalSource(name string) (*os.File, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory: fs put writes one file (LOCAL is a file, or - for stdin)", name)
	}
	return os.Open(name)
}

// warnReplication says, as HDFS does, when the replication asked for is
// above the live storage nodes: the file is written with fewer replicas and
// stays under-replicated until more nodes are live. A cluster that does not
// answer the node list gets no warning.
func warnReplication(ctx context.Context, w io.Writer, c *client.Client, replication uint32) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	nl, err := c.Nodes(lctx)
	if err != nil {
		return
	}
	live := 0
	for _, n := range nl.Nodes {
		if n.Live {
			live++
		}
	}
	if int(replication) > live {
		fmt.Fprintf(w, "warning: replication %d is above the %d live storage nodes: the file's blocks stay under-replicated until more nodes are live\n", replication, live)
	}
}

// abandon removes a file fs put created and could not finish, so that no
// lease and no partial file are left; it returns what to add to the error.
func abandon(c *client.Client, path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.FS().Delete(ctx, path, false); err != nil && !errors.Is(err, client.ErrNotFound) {
		return fmt.Sprintf(" (and %s could not be removed: %v; it is left open: free it with coord fs recover-lease %s, or rm it)", path, err, path)
	}
	return fmt.Sprintf(" (the partial %s was removed)", path)
}

// leaseHint adds to a refusal because another client holds path's lease
// what frees it.
func leaseHint(err error, path string) error {
	var e *client.Error
	if errors.As(err, &e) && e.Reason == leaserecovery.ReasonLeaseHeld {
		return fmt.Errorf("%w (if its writer is gone: coord fs recover-lease %s)", err, path)
	}
	return err
}
