package ab

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// Kinds of side.
const (
	KindBinary = "binary" // a roseinfer executable
	KindCommit = "commit" // a git commit, built with go build
	KindURL    = "url"    // a server someone else runs
)

// SideSpec is one side as given on the command line.
type SideSpec struct {
	Spec string   // --a / --b: an executable, a git commit or a base URL
	Args []string // --a-args / --b-args: extra `roseinfer serve` flags for this side only
}

// Side is one side resolved: what runs, and how it was found. It is
// recorded in the results' meta.
type Side struct {
	Label  string   `json:"label"` // A or B
	Spec   string   `json:"spec"`  // as given
	Kind   string   `json:"kind"`
	Binary string   `json:"binary,omitempty"` // the executable launched (binary, commit)
	Commit string   `json:"commit,omitempty"` // full hash (commit)
	URL    string   `json:"url,omitempty"`    // (url)
	Args   []string `json:"args,omitempty"`   // this side's extra serve flags
}

// String is a one-line description, e.g. "commit 3f2a9c1e0b7d (HEAD~1) --sim-step-us 1200".
func (s Side) String() string {
	var what string
	switch s.Kind {
	case KindCommit:
		what = "commit " + shortHash(s.Commit)
		if s.Spec != s.Commit && s.Spec != shortHash(s.Commit) {
			what += " (" + s.Spec + ")"
		}
	case KindURL:
		what = s.URL
	default:
		what = s.Binary
	}
	if len(s.Args) > 0 {
		what += " " + strings.Join(s.Args, " ")
	}
	return what
}

func shortHash(h string) string { return h[:min(12, len(h))] }

// resolve decides what a side is: a base URL (http:// or https://), an
// existing executable file, or a commit of the git repository at repo, in
// that order. flag names the flag for error messages (--a or --b).
func resolve(ctx context.Context, flag, label string, spec SideSpec, repo string) (Side, error) {
	s := Side{Label: label, Spec: spec.Spec, Args: spec.Args}
	v := strings.TrimSpace(spec.Spec)
	switch {
	case v == "":
		return s, fmt.Errorf("%s is empty: want a roseinfer executable, a git commit or a base URL", flag)
	case strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://"):
		if len(spec.Args) > 0 {
			return s, fmt.Errorf("%s-args: %s is a running server (%s); its flags are set where it was started", flag, label, v)
		}
		s.Kind, s.URL = KindURL, strings.TrimRight(v, "/")
		return s, nil
	}
	if fi, err := os.Stat(v); err == nil {
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return s, fmt.Errorf("%s %s: not an executable file", flag, v)
		}
		abs, err := filepath.Abs(v)
		if err != nil {
			return s, fmt.Errorf("%s %s: %w", flag, v, err)
		}
		s.Kind, s.Binary = KindBinary, abs
		return s, nil
	}
	hash, err := revParse(ctx, repo, v)
	if err != nil {
		return s, fmt.Errorf("%s %q: not a URL (http://...), an executable file, or a commit of the git repository %s: %w", flag, v, repo, err)
	}
	s.Kind, s.Commit = KindCommit, hash
	return s, nil
}

// revParse resolves rev to a full commit hash in the repository at repo.
func revParse(ctx context.Context, repo, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", errors.New("a revision cannot start with '-'")
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("git rev-parse: %s", msg)
		}
		return "", fmt.Errorf("git rev-parse: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildCommit writes the commit's tree into dir/src-<hash> (git archive: no
// worktree, no checkout, the repository untouched) and builds its
// cmd/roseinfer there, returning the executable's path. The Go build cache
// makes a commit built before quick to build again.
func buildCommit(ctx context.Context, repo, commit, dir string) (string, error) {
	src := filepath.Join(dir, "src-"+shortHash(commit))
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", commit)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", shortHash(commit), err)
	}
	extractErr := extractTar(stdout, src)
	io.Copy(io.Discard, stdout) // let git finish even when extraction stopped early
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", shortHash(commit), err, strings.TrimSpace(stderr.String()))
	}
	if extractErr != nil {
		return "", fmt.Errorf("unpacking commit %s: %w", shortHash(commit), extractErr)
	}
	if _, err := os.Stat(filepath.Join(src, "cmd", "roseinfer")); err != nil {
		return "", fmt.Errorf("commit %s has no cmd/roseinfer to build", shortHash(commit))
	}
	return backend.BuildRoseinfer(ctx, src, filepath.Join(dir, "bin-"+shortHash(commit)))
}

// extractTar writes a git archive's directories, files and symbolic links
// under dir, refusing any path that would land outside it.
func extractTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			if name == "." {
				continue
			}
			return fmt.Errorf("archive entry %q leaves the directory", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Symlink(h.Linkname, path)
			}
		}
		// Other entries (git's pax header carrying the commit id) hold no file.
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
