package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKernelOverrideDir: the lab's kernel directory replaces embedded files
// of the same name and adds new ones, sources and headers alike.
func TestKernelOverrideDir(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"qwen3.cu": "// variant\n", "extra.cuh": "// header\n", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer func(old string) { labKernelDir = old }(labKernelDir)
	labKernelDir = dir
	files, headers, err := kernelSources()
	if err != nil {
		t.Fatal(err)
	}
	if files["qwen3.cu"] != "// variant\n" || headers["extra.cuh"] != "// header\n" {
		t.Fatalf("override not applied: qwen3.cu %q, extra.cuh %q", files["qwen3.cu"][:min(20, len(files["qwen3.cu"]))], headers["extra.cuh"])
	}
	if _, ok := files["gemv.cu"]; !ok {
		t.Fatal("embedded gemv.cu lost")
	}
	if _, ok := files["notes.txt"]; ok {
		t.Fatal("a file that is neither .cu nor .cuh was taken")
	}
	labKernelDir = filepath.Join(dir, "missing")
	if _, _, err := kernelSources(); err == nil {
		t.Fatal("a missing override directory gave no error")
	}
}
