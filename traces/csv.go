package traces

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// csvColumns are the columns a CSV format needs, as the upstream headers
// spell them; matching is case-insensitive and ignores surrounding spaces, so
// BurstGPT_3's extra "Session ID"/"Elapsed time" columns are simply skipped.
type csvColumns struct{ timestamp, input, output string }

var csvFormats = map[Format]csvColumns{
	FormatAzure:    {"TIMESTAMP", "ContextTokens", "GeneratedTokens"},
	FormatBurstGPT: {"Timestamp", "Request tokens", "Response tokens"},
}

// csvHeader maps normalised column names of a header line to their index.
// Used for detection only; parsing reads the header with encoding/csv.
func csvHeader(line string) map[string]int {
	cols := map[string]int{}
	for i, name := range strings.Split(line, ",") {
		cols[normColumn(name)] = i
	}
	return cols
}

func normColumn(name string) string {
	name = strings.TrimPrefix(name, string(utf8BOM))
	return strings.ToLower(strings.Trim(strings.TrimSpace(name), `"`))
}

func parseCSV(r io.Reader, file string, format Format, limit int) ([]Row, error) {
	want := csvFormats[format]
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // we check counts ourselves to name the missing column
	header, err := cr.Read()
	if err != nil {
		return nil, csvError(file, err)
	}
	header = append([]string(nil), header...)
	index := map[string]int{}
	for i, name := range header {
		index[normColumn(name)] = i
	}
	headerLine, _ := cr.FieldPos(0)
	col := func(name string) (int, error) {
		i, ok := index[normColumn(name)]
		if !ok {
			return 0, &RowError{File: file, Line: headerLine, Field: name, Reason: "column missing from header"}
		}
		return i, nil
	}
	tsCol, err := col(want.timestamp)
	if err != nil {
		return nil, err
	}
	inCol, err := col(want.input)
	if err != nil {
		return nil, err
	}
	outCol, err := col(want.output)
	if err != nil {
		return nil, err
	}

	var rows []Row
	for limit <= 0 || len(rows) < limit {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvError(file, err)
		}
		line, _ := cr.FieldPos(0)
		fail := func(field, reason string) error {
			return &RowError{File: file, Line: line, Field: field, Reason: reason}
		}
		if len(rec) < len(header) {
			return nil, fail(strings.TrimSpace(header[len(rec)]), "missing (row has fewer columns than the header)")
		}
		if len(rec) > len(header) {
			return nil, fail("", fmt.Sprintf("%d columns, header has %d", len(rec), len(header)))
		}
		row := Row{Index: len(rows)}
		var reason string
		if format == FormatAzure {
			row.TimestampS, reason = parseWallClock(rec[tsCol])
		} else {
			row.TimestampS, reason = parseSeconds(rec[tsCol])
		}
		if reason != "" {
			return nil, fail(want.timestamp, reason)
		}
		if row.InputLen, reason = parseTokens(rec[inCol]); reason != "" {
			return nil, fail(want.input, reason)
		}
		if row.OutputLen, reason = parseTokens(rec[outCol]); reason != "" {
			return nil, fail(want.output, reason)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &RowError{File: file, Line: pe.Line, Reason: pe.Err.Error()}
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty trace", file)
	}
	return fmt.Errorf("%s: %w", file, err)
}

// Azure 2023 writes "2023-11-16 18:15:46.6805900" (no zone: taken as UTC);
// Azure 2024 writes "2024-05-10 00:00:00.009930+00:00", sometimes without the
// fraction. Go accepts a fractional second after the seconds field even when
// the layout has none, so two layouts cover all three.
var wallClockLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05Z07:00"}

// parseWallClock returns Unix seconds. float64 holds them to about 0.24 µs,
// far below any send lag we can measure; the schedule only uses differences.
func parseWallClock(s string) (float64, string) {
	s = strings.TrimSpace(s)
	for _, layout := range wallClockLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return float64(t.Unix()) + float64(t.Nanosecond())/1e9, ""
		}
	}
	return 0, fmt.Sprintf("not a timestamp like 2023-11-16 18:15:46.6805900: %q", truncate(s, 40))
}

func parseSeconds(s string) (float64, string) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Sprintf("not a finite number: %q", truncate(s, 40))
	}
	return v, ""
}

// maxTokens bounds a length field: no real request is a billion tokens, and
// the bound keeps sums of lengths far from int overflow.
const maxTokens = 1 << 30

func parseTokens(s string) (int, string) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("not an integer: %q", truncate(s, 40))
	}
	return checkTokens(v)
}

func checkTokens(v int64) (int, string) {
	if v < 0 {
		return 0, fmt.Sprintf("negative: %d", v)
	}
	if v > maxTokens {
		return 0, fmt.Sprintf("too large: %d", v)
	}
	return int(v), ""
}
