package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// GPT-2 splits text into pieces before BPE with the regular expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (OpenAI's encoder.py; HF's ByteLevel pre-tokenizer uses the same one). Go's
// RE2 has no lookahead, and a hand-written scanner of the same alternatives is
// several times faster than a backtracking regexp package, so pieceEnd spells
// the expression out. \s is Unicode White_Space (unicode.IsSpace: the same set
// for Oniguruma, which HF's fast tokenizer uses, and Python's regex module).

type runeClass uint8

const (
	classOther runeClass = iota // [^\s\p{L}\p{N}]
	classLetter
	classNumber
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]runeClass) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = classOfRune(rune(c))
	}
	return t
}()

func classOfRune(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// classAt returns the class of the rune at s[i] and its width in bytes.
// s must be valid UTF-8.
func classAt(s string, i int) (runeClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return classOfRune(r), size
}

// runEnd returns the end of the run of runes of class cls starting at i.
func runEnd(s string, i int, cls runeClass) int {
	for i < len(s) {
		c, size := classAt(s, i)
		if c != cls {
			break
		}
		i += size
	}
	return i
}

// contractionLen returns the length of the contraction ('s 't 're 've 'm 'll
// 'd) at s[i:], or 0 if there is none. Matching is case-sensitive, like GPT-2's.
func contractionLen(s string, i int) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	switch s[i+1] {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2] == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2] == 'l' {
			return 3
		}
	}
	return 0
}

// pieceEnd returns the end of the piece that starts at s[start]; the
// alternatives are tried in the expression's order. s must be valid UTF-8
// and start < len(s).
func pieceEnd(s string, start int) int {
	if n := contractionLen(s, start); n > 0 {
		return start + n
	}
	// " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": one optional U+0020, then a
	// run of one class. They fail only where that run would start with \s.
	body := start
	if s[start] == ' ' && start+1 < len(s) {
		body = start + 1
	}
	cls, _ := classAt(s, body)
	if cls != classSpace {
		return runEnd(s, body, cls)
	}
	// "\s+(?!\S)|\s+": a whitespace run, less its last rune when a non-space
	// follows and the run is longer than that one rune, so that the last
	// space can prefix the next word.
	end := runEnd(s, start, classSpace)
	if end == len(s) {
		return end
	}
	_, lastSize := utf8.DecodeLastRuneInString(s[start:end])
	if end-lastSize > start {
		return end - lastSize
	}
	return end
}
