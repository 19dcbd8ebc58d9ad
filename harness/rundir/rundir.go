package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Make creates <parent>/<kind>_<YYYYmmdd_HHMMSS> (local time, as the
// original), adding a suffix if two runs start in the same second; exact,
// when given, is the directory itself (created if missing).
func Make(exact, parent, kind string) (string, error) {
	if exact != "" {
		return exact, os.MkdirAll(exact, 0o755)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("output dir: %w", err)
	}
	base := filepath.Join(parent, kind+"_"+time.Now().Format("20060102_150405"))
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", fmt.Errorf("run dir: %w", err)
		}
		dir = base + "_" + strconv.Itoa(i)
	}
}
