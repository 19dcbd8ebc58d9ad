package traces

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary bytes to every loader. Parsing must never panic;
// an error must be a RowError or name the input; a success must satisfy the
// loaders' promises (non-negative lengths, sorted, file-order indices).
//
//	go test ./traces -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, path := range []string{"testdata/qwen_sample.jsonl", "testdata/burstgpt_sample.csv"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
	}
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:50.9951690,396,109"), uint8(0))
	f.Add([]byte(`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}`+"\n"), uint8(0))
	f.Add([]byte(`{"timestamp": 1e400, "input_length": -1}`), uint8(2))
	f.Add([]byte("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\"5,x\n"), uint8(4))
	formats := append([]Format{FormatAuto}, Formats...)
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		format := formats[int(pick)%len(formats)]
		tr, err := Parse(bytes.NewReader(data), "fuzz", Options{Format: format})
		if err != nil {
			var re *RowError
			if errors.As(err, &re) && (re.File != "fuzz" || re.Line < 1) {
				t.Fatalf("row error without file:line: %#v", re)
			}
			return
		}
		if len(tr.Rows) == 0 {
			t.Fatal("success with no rows")
		}
		seen := make([]bool, len(tr.Rows))
		for i, r := range tr.Rows {
			if r.InputLen < 0 || r.OutputLen < 0 {
				t.Fatalf("row %d: negative length %+v", i, r)
			}
			if i > 0 && r.TimestampS < tr.Rows[i-1].TimestampS {
				t.Fatalf("rows not sorted at %d", i)
			}
			if r.Index < 0 || r.Index >= len(seen) || seen[r.Index] {
				t.Fatalf("row %d: bad or repeated Index %d", i, r.Index)
			}
			seen[r.Index] = true
		}
	})
}
