package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Where captures may write. POST /start_profile is a network request, so its
// output_dir must not name any directory the server process can create:
// with Options.Dir set, it must resolve inside Dir (Dir itself included),
// and a relative one is taken relative to Dir. "Resolve" follows the
// symlinks of the part of the path that exists, so a link inside Dir that
// points out of it does not count as inside. The check and the MkdirAll
// after it are not atomic: someone who can make symlinks in Dir between the
// two can still redirect a capture, but that needs a local account, not
// just the HTTP API.

// outputDir returns the directory a capture asked for requested writes to,
// or an error naming the allowed directory.
func (p *Profiler) outputDir(requested string) (string, error) {
	root := p.opts.Dir
	if root == "" { // no confinement (tests, library use): as requested
		if requested == "" {
			return "", errors.New("output_dir is required")
		}
		return requested, nil
	}
	dir := requested
	if dir == "" {
		dir = root
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	dir = filepath.Clean(dir)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("profile directory: %w", err)
	}
	realDir, err := resolveExisting(dir)
	if err != nil || !isWithin(realRoot, realDir) {
		return "", fmt.Errorf("output_dir %q is outside the profile directory %s: name a directory inside it, "+
			"or a path relative to it (roseinfer serve --profile-dir sets it)", requested, root)
	}
	return dir, nil
}

// resolveExisting evaluates the symlinks of the longest part of the clean,
// absolute path that exists and appends the rest, which holds no symlink
// because it does not exist yet. A dangling symlink is an error: MkdirAll
// would create its target, wherever that is.
func resolveExisting(path string) (string, error) {
	existing, rest := path, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(real, rest), nil
}

// isWithin reports whether path is root or below it; both are clean and
// absolute.
func isWithin(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
