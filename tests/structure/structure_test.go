// Package structure holds the repository's guard rails: tests that fail
// when the code drifts from the shape docs/design.md describes ("Layout"):
// a domain package that reaches gRPC, a hand-written file past the size
// where it usually holds two ideas, a doc that points outside the
// repository.
package structure

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/logbookhq/logbook"

// domainPackages own Logbook's rules and formats. They never import gRPC,
// directly or through another package: servers translate at the edge
// (docs/design.md, "Layout").
var domainPackages = []string{
	"fsm", "fsm/fsmpb", "journal", "journal/export", "leaserecovery", "replica", "membership", "internal/blocks",
	"internal/authz",
	"internal/blocktoken",
}

// raftFree are domain packages that reach Raft only through an interface
// of their own (the block manager's Leadership and Proposer): they do not
// import hashicorp/raft themselves.
var raftFree = []string{"internal/blocks", "leaserecovery", "replica", "membership", "internal/authz", "internal/blocktoken"}

// maxLines bounds a hand-written, non-test Go file.
const maxLines = 800

// repoRoot is the module root: two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// trackedFiles lists the repository's files as git knows them, or, outside
// a git checkout, every file under root but .git.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if _, err := os.Stat(filepath.Join(root, f)); err == nil && f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDomainPackagesImportNoGRPC(t *testing.T) {
	root := repoRoot(t)
	for _, p := range domainPackages {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+p)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "grpc") {
				t.Errorf("%s/%s imports %s (directly or through another package): domain packages never reach gRPC", module, p, dep)
			}
		}
	}
}

func TestRaftBehindInterfaces(t *testing.T) {
	root := repoRoot(t)
	for _, p := range raftFree {
		cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./"+p)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if strings.HasPrefix(imp, "github.com/hashicorp/raft") {
				t.Errorf("%s/%s imports %s: it reaches Raft through its own interfaces", module, p, imp)
			}
		}
	}
}

func TestHandWrittenFilesStaySmall(t *testing.T) {
	root := repoRoot(t)
	for _, f := range trackedFiles(t, root) {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, ".pb.go") || strings.HasPrefix(f, "third_party/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\n// Code generated ")) || bytes.HasPrefix(data, []byte("// Code generated ")) {
			continue
		}
		if n := bytes.Count(data, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: it probably holds two ideas; split it", f, n, maxLines)
		}
	}
}

// outside matches a reference to a place that is not in the repository a
// user clones: the workplace's shared notes, by any path.
var outside = regexp.MustCompile(`\.\./shared\b|/work/shared\b|\bshared/(DESIGN|STYLE)\.md|\bspecs/(mdlog|replica-recovery|raft-practice|performance-notes)\.md`)

// mdLink is a relative markdown link target: ](path) or ](path#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)\s#]+)(#[^)\s]*)?\)`)

func TestDocsStayInsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	self := "tests/structure/structure_test.go"
	for _, f := range trackedFiles(t, root) {
		if f == self || strings.HasPrefix(f, "third_party/") || !isText(f) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			if m := outside.FindString(text); m != "" {
				t.Errorf("%s:%d refers to %q, outside the repository: put what users need into docs/", f, line, m)
			}
			if !strings.HasSuffix(f, ".md") {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				p := filepath.Join(root, filepath.Dir(f), target)
				if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d links to %s, outside the repository", f, line, target)
				} else if _, err := os.Stat(p); err != nil {
					t.Errorf("%s:%d links to %s, which does not exist", f, line, target)
				}
			}
		}
	}
}

func isText(f string) bool {
	switch filepath.Ext(f) {
	case ".go", ".md", ".proto", ".sh", ".yml", ".yaml", ".txt", ".mod":
		return true
	}
	base := filepath.Base(f)
	return base == "Makefile" || base == "Dockerfile" || base == "run" || base == "CODEOWNERS"
}
