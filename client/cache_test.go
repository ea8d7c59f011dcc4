package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// The SDK's cache-directive calls against real coordinators and nodes: a
// directive round trip, the leader's view of it, and the bad-input errors.
// (Which nodes cache what is tested in internal/coordserver; these nodes
// have no locked memory, so nothing gets cached here.)
func TestFSCacheDirectives(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	fs := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := fs.Create(ctx, "/c/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(randomBytes(1000, 7)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	d, err := fs.AddCacheDirective(ctx, "/c/f", 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID == 0 || d.Path != "/c/f" || d.Replication != 2 || d.Created.IsZero() {
		t.Fatalf("added %+v", d)
	}
	var e *Error
	if _, err := fs.AddCacheDirective(ctx, "/c/f", 1); !errors.As(err, &e) || e.Code != codes.AlreadyExists {
		t.Fatalf("a second directive for the path: %v, want AlreadyExists", err)
	}
	for _, c := range []struct {
		path string
		repl uint32
		want error
	}{
		{"/c/missing", 1, ErrNotFound},
		{"relative", 1, ErrInvalidArgument},
		{"/c/f", 0, ErrInvalidArgument},
		{"/c/f", 4, ErrInvalidArgument}, // above the file's replication
	} {
		if _, err := fs.AddCacheDirective(ctx, c.path, c.repl); !errors.Is(err, c.want) {
			t.Errorf("add %q replication %d: %v, want %v", c.path, c.repl, err, c.want)
		}
	}

	ds, err := fs.ListCacheDirectives(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].ID != d.ID || ds[0].BlocksNeeded != 1 || ds[0].BytesNeeded != 2*1000 || ds[0].BlocksCached != 0 {
		t.Fatalf("listed %+v, want directive %d: 1 block and 2000 bytes needed, none cached", ds, d.ID)
	}
	if err := fs.RemoveCacheDirective(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if ds, err := fs.ListCacheDirectives(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("after remove: %+v, %v", ds, err)
	}
	if err := fs.RemoveCacheDirective(ctx, d.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing it again: %v, want NotFound", err)
	}
}
