package traces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// parseJSONL reads Mooncake or Qwen-Bailian lines. Both carry timestamp,
// input_length, output_length and hash_ids; Mooncake's timestamp is in
// milliseconds, Qwen's in seconds. Qwen's conversation fields chat_id,
// parent_chat_id and turn are kept (checkChats); type is checked, not kept.
func parseJSONL(br *bufio.Reader, file string, format Format, limit int) ([]Row, error) {
	var rows []Row
	var lines []int // each row's line, for the conversation checks
	lineNo := 0
	for limit <= 0 || len(rows) < limit {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 {
			lineNo++
			line := bytes.TrimSpace(raw)
			if lineNo == 1 {
				line = bytes.TrimPrefix(line, utf8BOM)
			}
			if len(line) > 0 {
				row, field, reason := parseJSONRow(line, format)
				if reason != "" {
					return nil, &RowError{File: file, Line: lineNo, Field: field, Reason: reason}
				}
				row.Index = len(rows)
				rows = append(rows, row)
				lines = append(lines, lineNo)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read: %w", file, err)
		}
	}
	if format == FormatQwen {
		if err := checkChats(rows, lines, file); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// checkChats rejects conversation links a replay cannot follow: a chat_id
// given twice, and a turn that does not come after its parent (a later
// timestamp, or the same one on a later line), which also rules out cycles.
// A parent_chat_id naming no row read is fine: the turn replays as a first
// turn (its parent may lie beyond --n).
func checkChats(rows []Row, lines []int, file string) error {
	byID := make(map[int64]int, len(rows))
	for i, r := range rows {
		if r.ChatID < 0 {
			continue
		}
		if j, dup := byID[r.ChatID]; dup {
			return &RowError{File: file, Line: lines[i], Field: "chat_id",
				Reason: fmt.Sprintf("%d repeats the chat_id of line %d", r.ChatID, lines[j])}
		}
		byID[r.ChatID] = i
	}
	for i, r := range rows {
		if r.ParentChatID < 0 {
			continue
		}
		j, ok := byID[r.ParentChatID]
		if !ok {
			continue
		}
		p := rows[j]
		if p.TimestampS > r.TimestampS || (p.TimestampS == r.TimestampS && lines[j] >= lines[i]) {
			return &RowError{File: file, Line: lines[i], Field: "parent_chat_id",
				Reason: fmt.Sprintf("parent %d (line %d, timestamp %v) does not come before this turn (timestamp %v)",
					r.ParentChatID, lines[j], p.TimestampS, r.TimestampS)}
		}
	}
	return nil
}

func jsonObject(line []byte) (gjson.Result, error) {
	if !gjson.ValidBytes(line) {
		return gjson.Result{}, errors.New("invalid JSON")
	}
	obj := gjson.ParseBytes(line)
	if !obj.IsObject() {
		return gjson.Result{}, errors.New("not a JSON object")
	}
	return obj, nil
}

// parseJSONRow returns the row, or the field at fault and why.
func parseJSONRow(line []byte, format Format) (Row, string, string) {
	obj, err := jsonObject(line)
	if err != nil {
		return Row{}, "", err.Error()
	}
	var row Row
	ts := obj.Get("timestamp")
	if reason := requireNumber(ts); reason != "" {
		return Row{}, "timestamp", reason
	}
	row.TimestampS = ts.Num
	if format == FormatMooncake {
		row.TimestampS /= 1000
	}
	var reason string
	if row.InputLen, reason = jsonTokens(obj.Get("input_length")); reason != "" {
		return Row{}, "input_length", reason
	}
	if row.OutputLen, reason = jsonTokens(obj.Get("output_length")); reason != "" {
		return Row{}, "output_length", reason
	}
	if ids := obj.Get("hash_ids"); ids.Exists() {
		if row.HashIDs, reason = jsonInts(ids); reason != "" {
			return Row{}, "hash_ids", reason
		}
	}
	if format == FormatQwen {
		row.HasChat, row.ChatID, row.ParentChatID = true, -1, -1
		for _, f := range []struct {
			key string
			dst *int64
		}{{"chat_id", &row.ChatID}, {"parent_chat_id", &row.ParentChatID}} {
			if v := obj.Get(f.key); v.Exists() {
				if *f.dst, reason = jsonInt(v); reason != "" {
					return Row{}, f.key, reason
				}
			}
		}
		if v := obj.Get("turn"); v.Exists() {
			turn, reason := jsonInt(v)
			if reason == "" && (turn < 0 || turn > math.MaxInt32) {
				reason = fmt.Sprintf("out of range: %d", turn)
			}
			if reason != "" {
				return Row{}, "turn", reason
			}
			row.Turn = int(turn)
		}
		if v := obj.Get("type"); v.Exists() && v.Type != gjson.String {
			return Row{}, "type", "want a string, got " + jsonType(v)
		}
	}
	return row, "", ""
}

func requireNumber(v gjson.Result) string {
	if !v.Exists() {
		return "missing"
	}
	if v.Type != gjson.Number {
		return "want a number, got " + jsonType(v)
	}
	if math.IsInf(v.Num, 0) || math.IsNaN(v.Num) {
		return "not a finite number: " + truncate(v.Raw, 40)
	}
	return ""
}

func jsonTokens(v gjson.Result) (int, string) {
	n, reason := jsonInt(v)
	if reason != "" {
		return 0, reason
	}
	return checkTokens(n)
}

// jsonInt reads an integer, accepting integral floats such as 512.0.
// Raw is parsed first so ids beyond 2^53 keep every digit.
func jsonInt(v gjson.Result) (int64, string) {
	if reason := requireNumber(v); reason != "" {
		return 0, reason
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, ""
	}
	if v.Num != math.Trunc(v.Num) || math.Abs(v.Num) >= 1<<63 {
		return 0, "not an integer: " + truncate(v.Raw, 40)
	}
	return int64(v.Num), ""
}

func jsonInts(v gjson.Result) ([]int64, string) {
	if !v.IsArray() {
		return nil, "want an array of integers, got " + jsonType(v)
	}
	elems := v.Array()
	ids := make([]int64, len(elems))
	for i, e := range elems {
		n, reason := jsonInt(e)
		if reason != "" {
			return nil, fmt.Sprintf("element %d: %s", i, reason)
		}
		ids[i] = n
	}
	return ids, ""
}

func jsonType(v gjson.Result) string {
	switch {
	case v.IsArray():
		return "an array"
	case v.IsObject():
		return "an object"
	}
	switch v.Type {
	case gjson.String:
		return "a string"
	case gjson.True, gjson.False:
		return "a boolean"
	case gjson.Null:
		return "null"
	}
	return v.Type.String()
}
