package tokenizer

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// corpusEntry is one line of testdata/corpus.jsonl (see make_fixtures.py).
type corpusEntry struct {
	Text *string `json:"text"`
	B64  *string `json:"b64"`
	IDs  []int32 `json:"ids"`
	Note string  `json:"note"`
}

// hfFixture is testdata/hf_ids.json as make_fixtures.py writes it.
type hfFixture struct {
	Source     string            `json:"source"`
	Compared   []string          `json:"compared"`
	Mismatches []json.RawMessage `json:"mismatches"`
	Cases      []struct {
		Line    int     `json:"line"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"cases"`
	RandomCases []struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	} `json:"random_cases"`
}

func readCorpus(t testing.TB) []corpusEntry {
	t.Helper()
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e corpusEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// input returns the entry's text as Go receives it: invalid bytes included.
func (e corpusEntry) input(t testing.TB) string {
	switch {
	case e.Text != nil:
		return *e.Text
	case e.B64 != nil:
		raw, err := base64.StdEncoding.DecodeString(*e.B64)
		if err != nil {
			t.Fatalf("bad b64 %q: %v", *e.B64, err)
		}
		return string(raw)
	}
	return ""
}

func readFixture(t *testing.T) hfFixture {
	t.Helper()
	data, err := os.ReadFile("testdata/hf_ids.json")
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatal("testdata/hf_ids.json is missing: generate it with testdata/make_fixtures.py " +
			"(transformers needed; its docstring has the commands)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var fx hfFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatalf("testdata/hf_ids.json: %v", err)
	}
	if fx.Source != "transformers" || !slices.Contains(fx.Compared, "fast") {
		t.Fatalf("testdata/hf_ids.json was not produced by HF transformers (source %q, compared %v)",
			fx.Source, fx.Compared)
	}
	if len(fx.Mismatches) > 0 {
		t.Fatalf("testdata/hf_ids.json records %d disagreements between HF implementations", len(fx.Mismatches))
	}
	return fx
}

// TestMatchesHF compares every corpus line with HF's GPT-2 tokenizer: ids,
// decoded text, and the streamed detokenizer output, for the built-in
// tokenizer and for one loaded back from the files WriteFiles writes.
func TestMatchesHF(t *testing.T) {
	corpus, fx := readCorpus(t), readFixture(t)
	if len(fx.Cases) != len(corpus) {
		t.Fatalf("fixture has %d cases, corpus %d lines: regenerate with make_fixtures.py", len(fx.Cases), len(corpus))
	}
	builtin := mustDefault(t)
	dir := t.TempDir()
	if err := builtin.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]*Tokenizer{"Default": builtin, "Load(WriteFiles)": loaded} {
		for i, e := range corpus {
			want := fx.Cases[i]
			ids := e.IDs
			if e.IDs == nil {
				ids = tok.Encode(e.input(t))
				if !slices.Equal(ids, want.IDs) {
					t.Errorf("%s: line %d %q (%s):\n got %v\nwant %v", name, i+1, abbrev(e.input(t)), e.Note, ids, want.IDs)
					continue
				}
			}
			if got := tok.Decode(ids); got != want.Decoded {
				t.Errorf("%s: line %d: Decode(%v) = %q, want %q", name, i+1, ids, got, want.Decoded)
			}
			if got := streamDecode(t, tok, ids); got != want.Decoded {
				t.Errorf("%s: line %d: detokenizer gave %q, want %q", name, i+1, got, want.Decoded)
			}
		}
		for _, rc := range fx.RandomCases {
			if ids := tok.Encode(rc.Text); !slices.Equal(ids, rc.IDs) {
				t.Errorf("%s: random text %q:\n got %v\nwant %v", name, rc.Text, ids, rc.IDs)
			} else if got := tok.Decode(ids); got != rc.Text {
				t.Errorf("%s: Decode(Encode(%q)) = %q", name, rc.Text, got)
			}
		}
	}
}

// streamDecode runs ids through a Detokenizer, checking every piece is
// valid UTF-8, and returns the joined pieces.
func streamDecode(t *testing.T, tok *Tokenizer, ids []int32) string {
	t.Helper()
	d := tok.NewDetokenizer()
	var b strings.Builder
	for _, id := range ids {
		piece := d.Add(id)
		if !utf8.ValidString(piece) {
			t.Errorf("detokenizer emitted invalid UTF-8 %q for id %d of %v", piece, id, ids)
		}
		b.WriteString(piece)
	}
	b.WriteString(d.Flush())
	return b.String()
}

func abbrev(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
