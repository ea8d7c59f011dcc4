package replica

import (
	"path/filepath"
	"strconv"
	"strings"
)

// On-disk names (doc.go specifies them).
const (
	dirCurrent    = "current"
	dirFinalized  = "finalized"
	dirRbw        = "rbw"
	dirTmp        = "tmp"
	dirTrash      = "trash"
	storageIDFile = ".storage-id"
	blockPrefix   = "blk_"
	metaSuffix    = ".meta"
	truncSuffix   = ".trunc"   // temporary meta written by truncate, see doc.go
	restartSuffix = ".restart" // rbw/blk_<id>.restart: the restart marker, see doc.go
	maxPoolIDLen  = 128
)

// dirKind says which directory of a block pool holds a replica's files.
type dirKind uint8

const (
	inFinalized dirKind = iota
	inRbw
	inTmp
)

func (k dirKind) String() string {
	switch k {
	case inFinalized:
		return dirFinalized
	case inRbw:
		return dirRbw
	}
	return dirTmp
}

// ValidatePoolID checks a block pool id: 1-128 bytes of [A-Za-z0-9._-],
// starting with a letter or digit (so never "", ".", ".." or a path).
func ValidatePoolID(bpid string) error {
	if len(bpid) == 0 || len(bpid) > maxPoolIDLen {
		return newErr(KindInvalidArgument, "bad-pool-id", "block pool id must be 1-%d bytes, got %d", maxPoolIDLen, len(bpid))
	}
	for i := 0; i < len(bpid); i++ {
		c := bpid[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return newErr(KindInvalidArgument, "bad-pool-id", "block pool id %q: only [A-Za-z0-9._-], starting alphanumeric", bpid)
		}
	}
	return nil
}

func blockName(id uint64) string { return blockPrefix + strconv.FormatUint(id, 10) }

func restartName(id uint64) string { return blockName(id) + restartSuffix }

func metaName(id, gs uint64) string {
	return blockPrefix + strconv.FormatUint(id, 10) + "_" + strconv.FormatUint(gs, 10) + metaSuffix
}

// parseUintCanonical parses a decimal uint64 with no sign or leading zero, so
// that each id has exactly one file name.
func parseUintCanonical(s string) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// fileName is a parsed replica file name.
type fileName struct {
	id      uint64
	gs      uint64
	meta    bool // blk_<id>_<gs>.meta
	trunc   bool // blk_<id>_<gs>.meta.trunc
	restart bool // blk_<id>.restart
}

func parseFileName(name string) (fileName, bool) {
	if !strings.HasPrefix(name, blockPrefix) {
		return fileName{}, false
	}
	rest := name[len(blockPrefix):]
	var f fileName
	switch {
	case strings.HasSuffix(rest, metaSuffix+truncSuffix):
		f.meta, f.trunc = true, true
		rest = strings.TrimSuffix(rest, metaSuffix+truncSuffix)
	case strings.HasSuffix(rest, metaSuffix):
		f.meta = true
		rest = strings.TrimSuffix(rest, metaSuffix)
	}
	if !f.meta {
		if strings.HasSuffix(rest, restartSuffix) {
			f.restart = true
			rest = strings.TrimSuffix(rest, restartSuffix)
		}
		id, ok := parseUintCanonical(rest)
		f.id = id
		return f, ok
	}
	idS, gsS, ok := strings.Cut(rest, "_")
	if !ok {
		return fileName{}, false
	}
	id, ok1 := parseUintCanonical(idS)
	gs, ok2 := parseUintCanonical(gsS)
	f.id, f.gs = id, gs
	return f, ok1 && ok2
}

// idToSubdirs is the 32x32 finalized layout: subdir((id>>16)&31)/subdir((id>>8)&31).
func idToSubdirs(id uint64) (uint64, uint64) { return (id >> 16) & 0x1F, (id >> 8) & 0x1F }

func finalizedSubdir(id uint64) string {
	a, b := idToSubdirs(id)
	return filepath.Join("subdir"+strconv.FormatUint(a, 10), "subdir"+strconv.FormatUint(b, 10))
}

// poolPaths are the directories of one block pool on one volume.
type poolPaths struct {
	root      string // <vol>/current/<bpid>
	finalized string // root/current/finalized
	rbw       string // root/current/rbw
	tmp       string // root/tmp
	trash     string // root/trash
}

func newPoolPaths(volPath, bpid string) poolPaths {
	root := filepath.Join(volPath, dirCurrent, bpid)
	return poolPaths{
		root:      root,
		finalized: filepath.Join(root, dirCurrent, dirFinalized),
		rbw:       filepath.Join(root, dirCurrent, dirRbw),
		tmp:       filepath.Join(root, dirTmp),
		trash:     filepath.Join(root, dirTrash),
	}
}

// dir returns the directory holding a replica with this id in kind.
func (p poolPaths) dir(k dirKind, id uint64) string {
	switch k {
	case inFinalized:
		return filepath.Join(p.finalized, finalizedSubdir(id))
	case inRbw:
		return p.rbw
	}
	return p.tmp
}
