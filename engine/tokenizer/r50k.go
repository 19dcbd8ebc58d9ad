package tokenizer

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"sync"
)

//go:generate go test -run TestR50kMergesFile -update .

// GPT-2's vocabulary is fully determined by its merge list: ids 0..255 are the
// single bytes in bytes_to_unicode order, id 256+i is the concatenation of
// merge i's two parts, and <|endoftext|> is 50256. So all the binary embeds is
// the 50,000 merges as little-endian uint16 id pairs (200 KB), derived from
// OpenAI's r50k_base (whose ranks are GPT-2's ids) by TestR50kMergesFile;
// TestWrittenFilesAreGPT2 checks the merges.txt they give against the MD5 of
// GPT-2's own. Embedding tiktoken-go-loader instead would add its four
// encodings (7 MB) to the binary and a 50k-entry base64 parse at startup.

const (
	r50kMergesFile   = "r50k_merges.bin"
	numR50kMergeable = 50256
	gpt2EndOfText    = "<|endoftext|>"
	gpt2EOS          = 50256
)

//go:embed r50k_merges.bin
var r50kMerges []byte

var defaultTok = sync.OnceValues(buildGPT2)

// Default returns the GPT-2 tokenizer built from data compiled into the
// binary; it reads no files. The result is shared and safe for concurrent use.
func Default() (*Tokenizer, error) { return defaultTok() }

func buildGPT2() (*Tokenizer, error) {
	numMerges := numR50kMergeable - 256
	if len(r50kMerges) != 4*numMerges {
		return nil, fmt.Errorf("embedded %s has %d bytes, want %d", r50kMergesFile, len(r50kMerges), 4*numMerges)
	}
	spec := vocabSpec{
		tokens: make([][]byte, gpt2EOS+1),
		merges: make([][2]int32, numMerges),
		added:  []addedToken{{content: gpt2EndOfText, id: gpt2EOS, special: true}},
		eos:    gpt2EOS,
	}
	for i, b := range byteOrder {
		spec.tokens[i] = []byte{b}
	}
	for i := range spec.merges {
		left := int32(binary.LittleEndian.Uint16(r50kMerges[4*i:]))
		right := int32(binary.LittleEndian.Uint16(r50kMerges[4*i+2:]))
		id := 256 + i
		if left >= int32(id) || right >= int32(id) {
			return nil, fmt.Errorf("embedded %s: merge %d uses a later token", r50kMergesFile, i)
		}
		spec.merges[i] = [2]int32{left, right}
		spec.tokens[id] = append(append(make([]byte, 0, len(spec.tokens[left])+len(spec.tokens[right])),
			spec.tokens[left]...), spec.tokens[right]...)
	}
	spec.tokens[gpt2EOS] = []byte(gpt2EndOfText)
	return newTokenizer(spec)
}
