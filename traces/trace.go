// Package traces reads public LLM-serving request traces (Azure 2023/2024
// CSV, Mooncake JSONL, Qwen-Bailian JSONL, BurstGPT CSV), fits their lengths
// to a model's context exactly as the original harness did, turns timestamps
// into a replay schedule, and synthesises exact token-id prompts.
//
// It owns the bundled trace files in data/ (see data/README.md for sources
// and licenses) and embeds the default one, so `bench` works from any
// directory. It imports nothing from engine/ or harness/: a tokenizer, where
// one is needed, comes in through the TextCodec interface.
package traces

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Row is one request of a trace.
type Row struct {
	Index      int     // position among the file's data rows, 0-based, in file order
	TimestampS float64 // arrival time in seconds (unit per format; only differences matter)
	InputLen   int     // prompt tokens
	OutputLen  int     // generated tokens
	HashIDs    []int64 // prefix-block hashes (Mooncake, Qwen); nil when the format has none

	// Conversation structure (Qwen-Bailian, synthetic sessions; HasChat
	// false elsewhere). ChatID names this request; ParentChatID names the
	// request whose answer this one continues, < 0 for a first turn; Turn is
	// 1-based. A negative ChatID (absent in the file) is never a parent.
	HasChat      bool
	ChatID       int64
	ParentChatID int64
	Turn         int
}

// Format names a trace file format.
type Format string

const (
	FormatAuto     Format = ""         // detect from the content
	FormatAzure    Format = "azure"    // CSV TIMESTAMP,ContextTokens,GeneratedTokens; wall-clock timestamps
	FormatMooncake Format = "mooncake" // JSONL timestamp (ms), input_length, output_length, hash_ids (512-token blocks)
	FormatQwen     Format = "qwen"     // JSONL timestamp (s), chat_id, parent_chat_id, turn, type, hash_ids (16-token blocks)
	FormatBurstGPT Format = "burstgpt" // CSV Timestamp (s),Model,Request tokens,Response tokens,Total tokens,Log Type
)

// Formats lists the formats a user can name, for help texts.
var Formats = []Format{FormatAzure, FormatMooncake, FormatQwen, FormatBurstGPT}

// ParseFormat accepts a format name as a user types it; "" and "auto" mean
// detect from the content.
func ParseFormat(s string) (Format, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" || name == "auto" {
		return FormatAuto, nil
	}
	for _, f := range Formats {
		if string(f) == name {
			return f, nil
		}
	}
	return FormatAuto, fmt.Errorf("unknown trace format %q (want auto, azure, mooncake, qwen or burstgpt)", s)
}

// BlockSizeTokens is the number of prompt tokens each hash id stands for:
// 512 for Mooncake (FAST25-release README), 16 for Qwen-Bailian (the
// "blksz_16" of its file names). 0 for formats without hash ids.
func (f Format) BlockSizeTokens() int {
	switch f {
	case FormatMooncake:
		return 512
	case FormatQwen:
		return 16
	}
	return 0
}

// Options control Load and Parse.
type Options struct {
	Format Format // FormatAuto detects from the content
	N      int    // read at most the first N data rows in file order; <= 0 reads all
}

// Trace is a loaded trace: its rows sorted by time.
type Trace struct {
	Name   string // the file path, or the embedded default's name
	Format Format
	Rows   []Row // the first N rows of the file, stably sorted by TimestampS
}

// RowError is a malformed row: file, 1-based line and the field at fault.
type RowError struct {
	File   string
	Line   int
	Field  string // "" when the row as a whole is at fault (not JSON, wrong column count)
	Reason string
}

func (e *RowError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s:%d: field %q: %s", e.File, e.Line, e.Field, e.Reason)
}

// DefaultName is the embedded default trace: the Azure 2023 conversation
// trace, the trace `bench online` replays when no --trace is given.
const DefaultName = "traces/data/azure2023_conv.csv"

//go:embed data/azure2023_conv.csv
var defaultTrace []byte

// LoadDefault parses the embedded default trace (DefaultName).
func LoadDefault(opts Options) (*Trace, error) {
	return Parse(bytes.NewReader(defaultTrace), DefaultName, opts)
}

// Load reads the trace file at path; an empty path loads the embedded
// default (DefaultName).
func Load(path string, opts Options) (*Trace, error) {
	if path == "" {
		return LoadDefault(opts)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return Parse(f, path, opts)
}

// maxSniffBytes bounds how far detection looks for the first non-empty line.
// A Qwen line with thousands of hash ids is tens of KiB; 1 MiB is plenty.
const maxSniffBytes = 1 << 20

// Parse reads a trace from r; name is used in error messages.
func Parse(r io.Reader, name string, opts Options) (*Trace, error) {
	format := opts.Format
	if format == FormatAuto {
		first, whole, err := firstLine(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if format, err = Detect(first); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r = whole
	}
	br := bufio.NewReader(r)
	var rows []Row
	var err error
	switch format {
	case FormatAzure, FormatBurstGPT:
		rows, err = parseCSV(br, name, format, opts.N)
	case FormatMooncake, FormatQwen:
		rows, err = parseJSONL(br, name, format, opts.N)
	default:
		return nil, fmt.Errorf("%s: unknown trace format %q", name, format)
	}
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no data rows", name)
	}
	sortRows(rows)
	return &Trace{Name: name, Format: format, Rows: rows}, nil
}

// sortRows sorts by time. Stable: rows with equal timestamps (Mooncake has
// many) keep file order.
func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TimestampS < rows[j].TimestampS })
}

// firstLine returns the first non-blank line, and a reader that still yields
// the whole input (what was read to find the line, then the rest of r).
func firstLine(r io.Reader) ([]byte, io.Reader, error) {
	var buf []byte
	chunk := make([]byte, 32<<10)
	for start := 0; ; {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		atEOF := errors.Is(err, io.EOF)
		if err != nil && !atEOF {
			return nil, nil, fmt.Errorf("read trace: %w", err)
		}
		for {
			i := bytes.IndexByte(buf[start:], '\n')
			if i < 0 && !atEOF {
				break // the line goes on past what we have read
			}
			end := len(buf)
			if i >= 0 {
				end = start + i
			}
			if line := bytes.TrimSpace(bytes.TrimPrefix(buf[start:end], utf8BOM)); len(line) > 0 {
				return line, io.MultiReader(bytes.NewReader(buf), r), nil
			}
			if i < 0 {
				return nil, nil, errors.New("empty trace")
			}
			start = end + 1
		}
		if len(buf)-start > maxSniffBytes {
			return nil, nil, fmt.Errorf("first line longer than %d bytes; name the format", maxSniffBytes)
		}
	}
}

// Detect names the format of a trace from its first non-empty line: a JSON
// object is Qwen-Bailian if it has any of Qwen's conversation fields, else
// Mooncake; a CSV header is Azure or BurstGPT by its column names.
func Detect(firstLine []byte) (Format, error) {
	line := bytes.TrimSpace(bytes.TrimPrefix(firstLine, utf8BOM))
	if len(line) > 0 && line[0] == '{' {
		obj, err := jsonObject(line)
		if err != nil {
			return FormatAuto, fmt.Errorf("cannot detect format: first line: %v", err)
		}
		for _, key := range []string{"chat_id", "parent_chat_id", "turn", "type"} {
			if obj.Get(key).Exists() {
				return FormatQwen, nil
			}
		}
		return FormatMooncake, nil
	}
	cols := csvHeader(string(line))
	has := func(name string) bool {
		_, ok := cols[name]
		return ok
	}
	switch {
	case has("timestamp") && has("contexttokens") && has("generatedtokens"):
		return FormatAzure, nil
	case has("timestamp") && has("request tokens") && has("response tokens"):
		return FormatBurstGPT, nil
	}
	return FormatAuto, fmt.Errorf("cannot detect format from first line %q; name it (azure, mooncake, qwen, burstgpt)", truncate(string(line), 80))
}

var utf8BOM = []byte("\xef\xbb\xbf")

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
