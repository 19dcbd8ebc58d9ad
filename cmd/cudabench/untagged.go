//go:build !cudalab

// Command cudabench needs the CUDA device's lab, which only cudalab builds
// contain: go build -tags cudalab ./cmd/cudabench.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "cudabench: built without the device's lab; build it with: go build -tags cudalab ./cmd/cudabench")
	os.Exit(2)
}
