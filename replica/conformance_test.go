package replica_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/logbookhq/logbook/replica"
	"github.com/logbookhq/logbook/replica/replicatest"
)

func testConfig() replica.Config {
	cfg := replica.DefaultConfig()
	cfg.DirScanInterval = 0
	cfg.BlockScanBytesPerSecond = 0
	cfg.BlockSize = 1 << 20
	return cfg
}

func diskFactory() replicatest.Factory {
	openAt := func(t *testing.T, dirs []string) replica.Store {
		cfg := testConfig()
		for _, d := range dirs {
			cfg.Volumes = append(cfg.Volumes, replica.VolumeConfig{Path: d})
		}
		d, err := replica.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AddBlockPool(context.Background(), replicatest.Pool); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dirsOf := map[replica.Store][]string{}
	return replicatest.Factory{
		Open: func(t *testing.T) replica.Store {
			root := t.TempDir()
			dirs := []string{filepath.Join(root, "v0"), filepath.Join(root, "v1")}
			s := openAt(t, dirs)
			dirsOf[s] = dirs
			return s
		},
		Restart: func(t *testing.T, s replica.Store) replica.Store {
			s.Close()
			s2 := openAt(t, dirsOf[s])
			dirsOf[s2] = dirsOf[s]
			return s2
		},
	}
}

func memFactory() replicatest.Factory {
	fsOf := map[replica.Store]*replica.MemFS{}
	openOn := func(t *testing.T, m *replica.MemFS) replica.Store {
		d, err := replica.NewMemStore(context.Background(), testConfig(), m)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AddBlockPool(context.Background(), replicatest.Pool); err != nil {
			t.Fatal(err)
		}
		fsOf[d] = m
		return d
	}
	return replicatest.Factory{
		Open: func(t *testing.T) replica.Store { return openOn(t, replica.NewMemFS()) },
		Restart: func(t *testing.T, s replica.Store) replica.Store {
			s.Close()
			return openOn(t, fsOf[s])
		},
	}
}

func TestConformanceDisk(t *testing.T) { replicatest.Run(t, diskFactory()) }
func TestConformanceMem(t *testing.T)  { replicatest.Run(t, memFactory()) }
