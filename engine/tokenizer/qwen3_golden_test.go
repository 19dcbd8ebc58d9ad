// The fixture this test reads (testdata/qwen3_hf_ids.json) is made where
// python3 has tokenizers, by testdata/make_qwen3_ids.py.

package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// qwen3Fixture is testdata/qwen3_hf_ids.json as make_qwen3_ids.py writes it:
// HF tokenizers' ids and decodes for every line of qwen3_corpus.jsonl and
// for random strings of tricky pieces.
type qwen3Fixture struct {
	Tokenizers             string            `json:"tokenizers"`
	TransformersMismatches []json.RawMessage `json:"transformers_mismatches"`
	TransformersError      string            `json:"transformers_error"`
	Cases                  []qwen3Case       `json:"cases"`
	RandomCases            []qwen3Case       `json:"random_cases"`
}

type qwen3Case struct {
	Line               int     `json:"line"` // corpus line, 1-based (corpus cases)
	Text               string  `json:"text"` // the string (random cases)
	IDs                []int32 `json:"ids"`
	Decoded            string  `json:"decoded"`
	DecodedSkipSpecial string  `json:"decoded_skip_special"`
}

const qwen3FixturePath = "testdata/qwen3_hf_ids.json"

func readQwen3Corpus(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("testdata/qwen3_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("qwen3_corpus.jsonl line %d: %v", len(texts)+1, err)
		}
		texts = append(texts, e.Text)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return texts
}

// TestQwen3GoldenIDs: Encode gives exactly HF tokenizers' ids, and Decode and
// DecodeSkipSpecial its decodes, on every corpus line and random string. The
// fixture is generated where tokenizers is installed; without it the test
// fails (it never skips) with the command that makes it.
func TestQwen3GoldenIDs(t *testing.T) {
	data, err := os.ReadFile(qwen3FixturePath)
	if err != nil {
		t.Fatalf("%v: the golden ids are missing; make them where python3 has tokenizers (see make_qwen3_ids.py):\n"+
			"  mkdir -p DIR && gunzip -c engine/tokenizer/data/qwen3/tokenizer.json.gz > DIR/tokenizer.json && "+
			"cp engine/tokenizer/data/qwen3/tokenizer_config.json DIR/\n"+
			"  python3 engine/tokenizer/testdata/make_qwen3_ids.py --tokenizer-dir DIR "+
			"--corpus engine/tokenizer/testdata/qwen3_corpus.jsonl --out engine/tokenizer/testdata/qwen3_hf_ids.json", err)
	}
	var fx qwen3Fixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatalf("%s: %v", qwen3FixturePath, err)
	}
	texts := readQwen3Corpus(t)
	if len(fx.Cases) != len(texts) {
		t.Fatalf("%s has %d cases, qwen3_corpus.jsonl %d lines: regenerate the fixture", qwen3FixturePath, len(fx.Cases), len(texts))
	}
	if len(fx.RandomCases) == 0 {
		t.Fatalf("%s has no random cases", qwen3FixturePath)
	}
	if fx.TransformersError != "" || len(fx.TransformersMismatches) > 0 {
		t.Logf("transformers cross-check (informational): error %q, %d mismatches", fx.TransformersError, len(fx.TransformersMismatches))
	}
	tok := mustQwen3(t)
	failures := 0
	check := func(name, text string, c qwen3Case) {
		got := tok.Encode(text)
		if !slices.Equal(got, c.IDs) {
			failures++
			i := 0
			for i < len(got) && i < len(c.IDs) && got[i] == c.IDs[i] {
				i++
			}
			t.Errorf("%s %q:\n first difference at id %d of %d\n got  %v\n want %v", name, clip(text), i, len(c.IDs), clipIDs(got, i), clipIDs(c.IDs, i))
		}
		if d := tok.Decode(c.IDs); d != c.Decoded {
			failures++
			t.Errorf("%s: Decode(HF ids) = %q, HF %q", name, clip(d), clip(c.Decoded))
		}
		if d := tok.DecodeSkipSpecial(c.IDs); d != c.DecodedSkipSpecial {
			failures++
			t.Errorf("%s: DecodeSkipSpecial(HF ids) = %q, HF %q", name, clip(d), clip(c.DecodedSkipSpecial))
		}
		if failures > 20 {
			t.FailNow()
		}
	}
	for i, c := range fx.Cases {
		check("corpus line "+itoa(c.Line), texts[i], c)
	}
	for i, c := range fx.RandomCases {
		check("random case "+itoa(i), c.Text, c)
	}
	t.Logf("tokenizers %s: %d corpus lines and %d random strings agree", fx.Tokenizers, len(fx.Cases), len(fx.RandomCases))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func clip(s string) string {
	if r := []rune(s); len(r) > 120 {
		return string(r[:120]) + "…"
	}
	return s
}

// clipIDs shows ids around index i.
func clipIDs(ids []int32, i int) []int32 {
	lo, hi := max(0, i-3), min(len(ids), i+5)
	return ids[lo:hi]
}
