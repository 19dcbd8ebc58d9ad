package traces

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Totals below were computed independently with Python's csv/json modules:
//
//	rows = list(csv.DictReader(open(f, newline=""))); sum(int(r["ContextTokens"]) for r in rows) ...
//	rows = [json.loads(l) for l in open(f)]; sum(r["input_length"] for r in rows) ...
func TestBundledTraces(t *testing.T) {
	tests := []struct {
		path                  string
		format                Format
		count                 int
		sumIn, sumOut, sumIDs int
		first, last           Row // in time order (these files are already sorted)
	}{
		{
			path: "data/azure2023_conv.csv", format: FormatAzure, count: 19366,
			sumIn: 22361870, sumOut: 4088665,
			first: Row{Index: 0, TimestampS: unix(t, "2023-11-16T18:15:46.6805900Z"), InputLen: 374, OutputLen: 44},
			last:  Row{Index: 19365, TimestampS: unix(t, "2023-11-16T19:14:08.4025270Z"), InputLen: 197, OutputLen: 183},
		},
		{
			path: "data/azure2023_code.csv", format: FormatAzure, count: 8819,
			sumIn: 18059974, sumOut: 245896,
			first: Row{Index: 0, TimestampS: unix(t, "2023-11-16T18:17:03.9799600Z"), InputLen: 4808, OutputLen: 10},
			last:  Row{Index: 8818, TimestampS: unix(t, "2023-11-16T19:14:19.9280160Z"), InputLen: 549, OutputLen: 173},
		},
		{
			path: "data/mooncake_conversation.jsonl", format: FormatMooncake, count: 12031,
			sumIn: 144793823, sumOut: 4122048, sumIDs: 288500,
			first: Row{Index: 0, TimestampS: 0, InputLen: 6758, OutputLen: 500, HashIDs: seq(0, 13)},
			last: Row{Index: 12030, TimestampS: 3536.999, InputLen: 20774, OutputLen: 508,
				HashIDs: append([]int64{0}, seq(182750, 182789)...)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			tr, err := Load(tt.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Format != tt.format || tr.Name != tt.path {
				t.Errorf("format, name = %q, %q; want %q, %q", tr.Format, tr.Name, tt.format, tt.path)
			}
			if len(tr.Rows) != tt.count {
				t.Fatalf("rows = %d, want %d", len(tr.Rows), tt.count)
			}
			var sumIn, sumOut, sumIDs int
			for i, r := range tr.Rows {
				sumIn += r.InputLen
				sumOut += r.OutputLen
				sumIDs += len(r.HashIDs)
				if r.Index != i {
					t.Fatalf("row %d has Index %d: a sorted file must keep file order", i, r.Index)
				}
			}
			if sumIn != tt.sumIn || sumOut != tt.sumOut || sumIDs != tt.sumIDs {
				t.Errorf("sums in/out/ids = %d/%d/%d, want %d/%d/%d", sumIn, sumOut, sumIDs, tt.sumIn, tt.sumOut, tt.sumIDs)
			}
			checkRow(t, "first", tr.Rows[0], tt.first)
			checkRow(t, "last", tr.Rows[len(tr.Rows)-1], tt.last)
		})
	}
}

func TestDefaultTraceIsEmbeddedAzureConv(t *testing.T) {
	emb, err := Load("", Options{N: 1000})
	if err != nil {
		t.Fatal(err)
	}
	file, err := Load("data/azure2023_conv.csv", Options{N: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if emb.Name != DefaultName || emb.Format != FormatAzure {
		t.Errorf("default = %q (%s)", emb.Name, emb.Format)
	}
	if !reflect.DeepEqual(emb.Rows, file.Rows) {
		t.Error("embedded default differs from data/azure2023_conv.csv")
	}
}

func TestQwenSample(t *testing.T) {
	tr, err := Load("testdata/qwen_sample.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatQwen {
		t.Fatalf("format = %q, want qwen", tr.Format)
	}
	// Sorted by time (seconds, not ms); the two 2.75 s rows keep file order.
	want := []Row{
		{Index: 1, TimestampS: 0.25, InputLen: 16, OutputLen: 3, HashIDs: []int64{3},
			HasChat: true, ChatID: 1002, ParentChatID: -1, Turn: 1},
		{Index: 0, TimestampS: 0.5, InputLen: 40, OutputLen: 12, HashIDs: []int64{0, 1, 2},
			HasChat: true, ChatID: 1001, ParentChatID: -1, Turn: 1},
		{Index: 2, TimestampS: 2.75, InputLen: 70, OutputLen: 30, HashIDs: []int64{0, 1, 9, 10, 11},
			HasChat: true, ChatID: 1003, ParentChatID: 1001, Turn: 2},
		{Index: 3, TimestampS: 2.75, InputLen: 33, OutputLen: 1, HashIDs: []int64{6, 7, 8},
			HasChat: true, ChatID: 1004, ParentChatID: -1, Turn: 1},
	}
	if !reflect.DeepEqual(tr.Rows, want) {
		t.Errorf("rows =\n%+v\nwant\n%+v", tr.Rows, want)
	}
	if n := BlockSizeMismatches(tr.Rows, tr.Format.BlockSizeTokens()); n != 0 {
		t.Errorf("%d rows do not match 16-token blocks", n)
	}
}

func TestBurstGPTSample(t *testing.T) {
	tr, err := Load("testdata/burstgpt_sample.csv", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatBurstGPT {
		t.Fatalf("format = %q, want burstgpt", tr.Format)
	}
	want := []Row{
		{Index: 0, TimestampS: 5, InputLen: 472, OutputLen: 18},
		{Index: 4, TimestampS: 30.5, InputLen: 25, OutputLen: 9},
		{Index: 1, TimestampS: 45, InputLen: 1087, OutputLen: 0},
		{Index: 2, TimestampS: 118, InputLen: 417, OutputLen: 276},
		{Index: 3, TimestampS: 118, InputLen: 1360, OutputLen: 188},
	}
	if !reflect.DeepEqual(tr.Rows, want) {
		t.Errorf("rows =\n%+v\nwant\n%+v", tr.Rows, want)
	}
}

func TestInlineVariants(t *testing.T) {
	tests := []struct {
		name, content string
		opts          Options
		want          []Row
	}{
		{
			name: "BurstGPT_3 columns",
			content: "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
				"7,abc,1.5,ChatGPT,10,20,30,Conversation log\n",
			want: []Row{{TimestampS: 7, InputLen: 10, OutputLen: 20}},
		},
		{
			name: "Azure 2024 timestamps with zone, with and without fraction",
			content: "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" +
				"2024-05-10 00:00:00.009930+00:00,5,6\r\n2024-05-10 00:00:01+00:00,7,8",
			want: []Row{
				{Index: 0, TimestampS: unix(t, "2024-05-10T00:00:00.00993Z"), InputLen: 5, OutputLen: 6},
				{Index: 1, TimestampS: unix(t, "2024-05-10T00:00:01Z"), InputLen: 7, OutputLen: 8},
			},
		},
		{
			name:    "UTF-8 BOM, blank lines, CRLF",
			content: "\xef\xbb\xbf{\"timestamp\": 1500, \"input_length\": 3, \"output_length\": 4}\r\n\n\r\n",
			want:    []Row{{TimestampS: 1.5, InputLen: 3, OutputLen: 4}},
		},
		{
			name:    "format override reads a Qwen file as Mooncake (ms)",
			content: `{"chat_id": 1, "timestamp": 2000, "input_length": 3, "output_length": 4}`,
			opts:    Options{Format: FormatMooncake},
			want:    []Row{{TimestampS: 2, InputLen: 3, OutputLen: 4}},
		},
		{
			name:    "integral floats and big hash ids",
			content: `{"timestamp": 1, "input_length": 512.0, "output_length": 1e2, "hash_ids": [9007199254740993]}`,
			want:    []Row{{TimestampS: 0.001, InputLen: 512, OutputLen: 100, HashIDs: []int64{9007199254740993}}},
		},
		{
			name:    "first N rows in file order, then sorted",
			content: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:09,1,1\n2023-01-01 00:00:05,2,2\n2023-01-01 00:00:01,3,3\n",
			opts:    Options{N: 2},
			want: []Row{
				{Index: 1, TimestampS: unix(t, "2023-01-01T00:00:05Z"), InputLen: 2, OutputLen: 2},
				{Index: 0, TimestampS: unix(t, "2023-01-01T00:00:09Z"), InputLen: 1, OutputLen: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Parse(strings.NewReader(tt.content), "inline", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tr.Rows, tt.want) {
				t.Errorf("rows =\n%+v\nwant\n%+v", tr.Rows, tt.want)
			}
		})
	}
}

func TestMalformedRows(t *testing.T) {
	const azureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	const okAzure = "2023-11-16 18:15:46.6805900,374,44\n"
	const burstHeader = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
	const okMoon = `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}` + "\n"
	tests := []struct {
		name, content string
		format        Format
		line          int
		field         string
		reason        string // substring
	}{
		{"azure timestamp", azureHeader + okAzure + "16/11/2023 18:15,374,44\n", "", 3, "TIMESTAMP", "not a timestamp"},
		{"azure input not an integer", azureHeader + "2023-11-16 18:15:46,3.5,44\n", "", 2, "ContextTokens", "not an integer"},
		{"azure negative output", azureHeader + "2023-11-16 18:15:46,3,-44\n", "", 2, "GeneratedTokens", "negative: -44"},
		{"azure too large", azureHeader + "2023-11-16 18:15:46,9999999999,1\n", "", 2, "ContextTokens", "too large"},
		{"azure missing column", azureHeader + okAzure + okAzure + "2023-11-16 18:15:46,3\n", "", 4, "GeneratedTokens", "missing"},
		{"azure extra column", azureHeader + "2023-11-16 18:15:46,3,4,5\n", "", 2, "", "4 columns, header has 3"},
		{"azure header lacks a column", "TIMESTAMP,ContextTokens\n" + "2023-11-16 18:15:46,3\n", FormatAzure, 1, "GeneratedTokens", "column missing from header"},
		{"csv syntax", azureHeader + "2023-11-16 18:15:46,\"3,4\n", "", 2, "", "quote"},
		{"burstgpt timestamp", burstHeader + "abc,ChatGPT,1,2,3,API log\n", "", 2, "Timestamp", "not a finite number"},
		{"burstgpt NaN timestamp", burstHeader + "NaN,ChatGPT,1,2,3,API log\n", "", 2, "Timestamp", "not a finite number"},
		{"burstgpt response tokens", burstHeader + "1,ChatGPT,1,2.5,3,API log\n", "", 2, "Response tokens", "not an integer"},
		{"jsonl invalid JSON", okMoon + "\n" + `{"timestamp": 0, "input_length": 1` + "\n", "", 3, "", "invalid JSON"},
		{"jsonl not an object", okMoon + "[1, 2]\n", FormatMooncake, 2, "", "not a JSON object"},
		{"jsonl missing field", `{"timestamp": 0, "output_length": 1}`, "", 1, "input_length", "missing"},
		{"jsonl timestamp type", `{"timestamp": "0", "input_length": 1, "output_length": 1}`, "", 1, "timestamp", "want a number, got a string"},
		{"jsonl output not integral", `{"timestamp": 0, "input_length": 1, "output_length": 1.5}`, "", 1, "output_length", "not an integer"},
		{"jsonl negative input", `{"timestamp": 0, "input_length": -1, "output_length": 1}`, "", 1, "input_length", "negative"},
		{"jsonl hash_ids type", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 5}`, "", 1, "hash_ids", "want an array"},
		{"jsonl hash_ids element", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, "x"]}`, "", 1, "hash_ids", "element 1"},
		{"qwen turn type", `{"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": "one"}`, "", 1, "turn", "want a number"},
		{"qwen type type", `{"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1, "type": 3}`, "", 1, "type", "want a string"},
		{"qwen chat_id type", `{"chat_id": "a", "timestamp": 0, "input_length": 1, "output_length": 1}`, "", 1, "chat_id", "want a number"},
		{"qwen parent_chat_id not integral", `{"chat_id": 1, "parent_chat_id": 0.5, "timestamp": 0, "input_length": 1, "output_length": 1}`, "", 1, "parent_chat_id", "not an integer"},
		{"qwen negative turn", `{"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": -2}`, "", 1, "turn", "out of range"},
		{"qwen repeated chat_id", `{"chat_id": 7, "timestamp": 0, "input_length": 1, "output_length": 1}` + "\n\n" +
			`{"chat_id": 7, "timestamp": 1, "input_length": 1, "output_length": 1}`, "", 3, "chat_id", "repeats the chat_id of line 1"},
		{"qwen child before its parent", `{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" +
			`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 2, "input_length": 1, "output_length": 1}`, "", 1, "parent_chat_id", "does not come before"},
		{"qwen child on an earlier line at the same time", `{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" +
			`{"chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}`, "", 1, "parent_chat_id", "line 2"},
		{"qwen own parent", `{"chat_id": 1, "parent_chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}`, "", 1, "parent_chat_id", "does not come before"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "trace"+string(rune('a'+i))+".txt")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, Options{Format: tt.format})
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RowError", err)
			}
			if re.File != path || re.Line != tt.line || re.Field != tt.field || !strings.Contains(re.Reason, tt.reason) {
				t.Errorf("got %s:%d field %q reason %q; want line %d field %q reason ~%q",
					re.File, re.Line, re.Field, re.Reason, tt.line, tt.field, tt.reason)
			}
			prefix := path + ":" + itoa(tt.line) + ": "
			if tt.field != "" {
				prefix += `field "` + tt.field + `": `
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start with %q", err.Error(), prefix)
			}
		})
	}
}

func TestUnreadableTraces(t *testing.T) {
	tests := []struct {
		name, content string
		format        Format
		want          string
	}{
		{"empty", "", "", "empty trace"},
		{"blank lines only", "\n \r\n", "", "empty trace"},
		{"header only", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "", "no data rows"},
		{"unknown CSV header", "a,b,c\n1,2,3\n", "", "cannot detect format"},
		{"undetectable JSON", "{\"a\": \n", "", "cannot detect format"},
		{"unknown format", "x", Format("parquet"), "unknown trace format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.content), "x.txt", Options{Format: tt.format})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "x.txt: ") {
				t.Errorf("err = %v, want x.txt: ...%s...", err, tt.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.csv"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatAuto, "auto": FormatAuto, "Azure": FormatAzure,
		" mooncake ": FormatMooncake, "qwen": FormatQwen, "burstgpt": FormatBurstGPT} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("csv"); err == nil {
		t.Error("ParseFormat(csv): no error")
	}
	if FormatMooncake.BlockSizeTokens() != 512 || FormatQwen.BlockSizeTokens() != 16 || FormatAzure.BlockSizeTokens() != 0 {
		t.Error("block sizes: want mooncake 512, qwen 16, azure 0")
	}
}

func TestBlockSizeMismatchesOnMooncake(t *testing.T) {
	tr, err := Load("data/mooncake_conversation.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := BlockSizeMismatches(tr.Rows, 512); n != 0 {
		t.Errorf("512-token blocks: %d mismatches, want 0", n)
	}
	// The known pitfall: Qwen's 16-token blocks on a Mooncake trace.
	if n := BlockSizeMismatches(tr.Rows, 16); n != len(tr.Rows) {
		t.Errorf("16-token blocks: %d mismatches, want all %d", n, len(tr.Rows))
	}
}

func checkRow(t *testing.T, what string, got, want Row) {
	t.Helper()
	// Wall-clock seconds as float64 carry ~0.24 µs of rounding.
	if math.Abs(got.TimestampS-want.TimestampS) > 1e-6 {
		t.Errorf("%s timestamp = %.7f, want %.7f", what, got.TimestampS, want.TimestampS)
	}
	got.TimestampS, want.TimestampS = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s row = %+v, want %+v", what, got, want)
	}
}

func unix(t *testing.T, rfc3339 string) float64 {
	t.Helper()
	ts, err := parseRFC3339(rfc3339)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func seq(lo, hi int64) []int64 {
	var s []int64
	for v := lo; v <= hi; v++ {
		s = append(s, v)
	}
	return slices.Clip(s)
}

func parseRFC3339(s string) (float64, error) {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return float64(ts.Unix()) + float64(ts.Nanosecond())/1e9, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
