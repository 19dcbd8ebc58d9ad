//go:build !unix

package model

import "os"

// mapFile reads the whole file where mmap is not available.
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() {}, nil
}
