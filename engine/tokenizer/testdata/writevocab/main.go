// Command writevocab writes the built-in GPT-2 tokenizer's HF files into a
// directory, the input of make_fixtures.py:
//
//	go run ./engine/tokenizer/testdata/writevocab .gpu/tok
package main

import (
	"fmt"
	"os"

	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: writevocab DIR")
		os.Exit(2)
	}
	tok, err := tokenizer.Default()
	if err == nil {
		err = tok.WriteFiles(os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "writevocab:", err)
		os.Exit(1)
	}
}
