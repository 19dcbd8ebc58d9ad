package envs

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
)

// files are the pins and Python programs, embedded so that a bench binary
// outside the source tree can still set up environments and run drivers.
//
//go:embed requirements/*.txt probe.py offline_common.py vllm_offline.py sglang_offline.py trtllm_offline.py
var files embed.FS

// ProbeScript is the version/import/CUDA probe run inside an environment.
func ProbeScript() string {
	data, _ := files.ReadFile("probe.py")
	return string(data)
}

// DriverFile is the offline driver of a backend.
func DriverFile(b Backend) string { return b.Name + "_offline.py" }

// WriteDrivers writes every offline driver and the module they share into
// dir (created if needed) and returns dir. The drivers run from files, not
// `python -c`, so their tracebacks name real lines.
func WriteDrivers(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"offline_common.py", "vllm_offline.py", "sglang_offline.py", "trtllm_offline.py"} {
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("write driver: %w", err)
		}
	}
	return nil
}
