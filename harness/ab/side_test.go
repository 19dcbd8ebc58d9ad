package ab

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestOrderIsABBA(t *testing.T) {
	for n, want := range map[int]string{1: "AB", 2: "ABBA", 3: "ABBAAB", 4: "ABBAABBA"} {
		if got := OrderString(Order(n)); got != want {
			t.Errorf("Order(%d) = %s, want %s", n, got, want)
		}
	}
	// With an even number of pairs both sides sit at the same mean
	// position, so a linear drift adds the same to each.
	for n := 2; n <= 16; n += 2 {
		var sum [2]int
		for pos, side := range Order(n) {
			sum[side] += pos
		}
		if sum[0] != sum[1] {
			t.Errorf("Order(%d): A's positions sum to %d, B's to %d", n, sum[0], sum[1])
		}
	}
}

// git runs git in dir and fails the test on error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// fakeRepo is a git repository whose cmd/roseinfer prints what its commit
// says: a module small enough to build in a test, with no dependency.
func fakeRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir = t.TempDir()
	git(t, dir, "init", "-q")
	write := func(say string) {
		files := map[string]string{
			"go.mod":                "module example.com/fake\n\ngo 1.22\n",
			"cmd/roseinfer/main.go": "package main\n\nfunc main() { println(\"" + say + "\") }\n",
		}
		for name, content := range files {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", say)
	}
	write("first")
	first = git(t, dir, "rev-parse", "HEAD")
	write("second")
	second = git(t, dir, "rev-parse", "HEAD")
	return dir, first, second
}

func TestResolveSides(t *testing.T) {
	repo, first, _ := fakeRepo(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "roseinfer")
	plain := filepath.Join(dir, "notes.txt")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{exe, 0o755}, {plain, 0o644}} {
		if err := os.WriteFile(f.path, []byte("x"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	good := []struct {
		spec SideSpec
		want Side
	}{
		{SideSpec{Spec: "http://10.0.0.5:8000/"}, Side{Kind: KindURL, URL: "http://10.0.0.5:8000"}},
		{SideSpec{Spec: exe, Args: []string{"--sim-step-us", "1200"}}, Side{Kind: KindBinary, Binary: exe, Args: []string{"--sim-step-us", "1200"}}},
		{SideSpec{Spec: "HEAD~1"}, Side{Kind: KindCommit, Commit: first}},
		{SideSpec{Spec: first[:8]}, Side{Kind: KindCommit, Commit: first}},
	}
	for _, c := range good {
		got, err := resolve(ctx, "--a", "A", c.spec, repo)
		if err != nil {
			t.Errorf("%q: %v", c.spec.Spec, err)
			continue
		}
		if got.Kind != c.want.Kind || got.URL != c.want.URL || got.Binary != c.want.Binary || got.Commit != c.want.Commit ||
			strings.Join(got.Args, " ") != strings.Join(c.want.Args, " ") {
			t.Errorf("%q: got %+v, want %+v", c.spec.Spec, got, c.want)
		}
	}
	bad := []struct {
		spec SideSpec
		want string
	}{
		{SideSpec{Spec: ""}, "--b is empty"},
		{SideSpec{Spec: "http://x:1", Args: []string{"--x"}}, "--b-args: B is a running server"},
		{SideSpec{Spec: plain}, "not an executable file"},
		{SideSpec{Spec: dir}, "not an executable file"},
		{SideSpec{Spec: "no-such-branch"}, `--b "no-such-branch": not a URL (http://...), an executable file, or a commit`},
		{SideSpec{Spec: "--upload-pack=x"}, "cannot start with '-'"},
	}
	for _, c := range bad {
		_, err := resolve(ctx, "--b", "B", c.spec, repo)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.spec.Spec, err, c.want)
		}
	}
}

// A commit is unpacked with git archive and built; the binary is that
// commit's, whatever the working tree holds.
func TestBuildCommit(t *testing.T) {
	repo, first, _ := fakeRepo(t)
	bin, err := buildCommit(context.Background(), repo, first, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "first" {
		t.Errorf("built binary said %q (%v), want the first commit's \"first\"", out, err)
	}
	if git(t, repo, "status", "--porcelain") != "" || len(strings.Split(git(t, repo, "worktree", "list"), "\n")) != 1 {
		t.Error("building a commit changed the repository")
	}
}

func TestExtractTarStaysInside(t *testing.T) {
	for _, name := range []string{"../escape", "/abs/path", "a/../../escape"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		tw.Write([]byte("x"))
		tw.Close()
		dir := t.TempDir()
		if err := extractTar(&buf, dir); err == nil || !strings.Contains(err.Error(), "leaves the directory") {
			t.Errorf("entry %q: got %v, want it refused", name, err)
		}
	}
}
