package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Qwen2 (and Qwen2.5, Qwen3) split text before byte-level BPE with the
// tokenizer.json Split pre-tokenizer
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (behavior Isolated: every match is a piece, and so is every gap between
// matches, though the alternatives cover every rune so there is none). As for
// GPT-2, Go's RE2 has no lookahead, so qwen2PieceEnd spells the expression out;
// the rune classes are pretokenize.go's.
const qwen2SplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// splitKind is the pre-tokenizer of a Tokenizer.
type splitKind uint8

const (
	splitGPT2  splitKind = iota // ByteLevel with GPT-2's regex (pieceEnd)
	splitQwen2                  // Split with qwen2SplitRegex, then ByteLevel without regex
)

// contractionLenFold is contractionLen without regard to case, as Qwen2's
// (?i:...) group matches: ASCII case, plus U+017F LATIN SMALL LETTER LONG S,
// whose simple case fold is 's' (Oniguruma and Rust's regex both fold it).
func contractionLenFold(s string, i int) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	if strings.HasPrefix(s[i+1:], "\u017f") {
		return 1 + len("\u017f")
	}
	lower := func(c byte) byte { return c | 0x20 } // only compared with ASCII letters below
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return 3
		}
	}
	return 0
}

// qwen2PieceEnd returns the end of the piece that starts at s[start]; the
// alternatives are tried in the expression's order, and the first that
// matches wins (not the longest). s must be valid UTF-8 and start < len(s).
func qwen2PieceEnd(s string, start int) int {
	if n := contractionLenFold(s, start); n > 0 {
		return start + n
	}
	cls, size := classAt(s, start)
	// "[^\r\n\p{L}\p{N}]?\p{L}+": a letter run, with one leading rune of any
	// other kind but a line break or number.
	if cls == classLetter {
		return runEnd(s, start, classLetter)
	}
	if cls != classNumber && s[start] != '\r' && s[start] != '\n' && start+size < len(s) {
		if next, _ := classAt(s, start+size); next == classLetter {
			return runEnd(s, start+size, classLetter)
		}
	}
	// "\p{N}": one digit at a time.
	if cls == classNumber {
		return start + size
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*": punctuation and symbols with an optional
	// leading U+0020, taking the line breaks that follow.
	body := start
	if s[start] == ' ' && start+1 < len(s) {
		body = start + 1
	}
	if c, _ := classAt(s, body); c == classOther {
		end := runEnd(s, body, classOther)
		for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
			end++
		}
		return end
	}
	// Only whitespace is left. "\s*[\r\n]+": the greedy \s* backs off to the
	// last line break of the run, so the piece ends just after it.
	end := runEnd(s, start, classSpace)
	if i := strings.LastIndexAny(s[start:end], "\r\n"); i >= 0 {
		return start + i + 1
	}
	// "\s+(?!\S)|\s+" as in GPT-2's expression.
	if end == len(s) {
		return end
	}
	_, lastSize := utf8.DecodeLastRuneInString(s[start:end])
	if end-lastSize > start {
		return end - lastSize
	}
	return end
}
