package tokenizer

import "unicode/utf8"

// Two different repairs of invalid UTF-8 meet in this package, on purpose:
//
//   - Input text: a Go string with invalid bytes is read the way encoding/json
//     reads a request body, each byte that utf8.DecodeRuneInString rejects
//     becoming one U+FFFD. So Encode(raw) == Encode(the JSON-decoded raw), and a
//     prompt gets the same ids whether it came over HTTP or from Go code.
//   - Output bytes: token bytes that do not form valid UTF-8 become U+FFFD by
//     "maximal subpart" substitution, which is what Python's
//     bytes.decode(errors="replace") and Rust's String::from_utf8_lossy do, so
//     Decode matches HF's decode (slow and fast) byte for byte.
//
// The two differ only on truncated sequences: "\xe2\x82A" is two U+FFFD then A
// on input, one U+FFFD then A on output.

// validInputText returns s with every byte that utf8.DecodeRuneInString
// rejects replaced by U+FFFD (encoding/json's rule). Valid s is returned as is.
func validInputText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

// continuationRanges gives, for each lead byte of a multi-byte sequence, the
// allowed range of each following byte (RFC 3629, excluding overlongs and
// surrogates). A lead byte with no entry is invalid on its own.
func continuationRanges(lead byte) [][2]byte {
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		return [][2]byte{{0x80, 0xBF}}
	case lead == 0xE0:
		return [][2]byte{{0xA0, 0xBF}, {0x80, 0xBF}}
	case lead == 0xED:
		return [][2]byte{{0x80, 0x9F}, {0x80, 0xBF}}
	case lead >= 0xE1 && lead <= 0xEF:
		return [][2]byte{{0x80, 0xBF}, {0x80, 0xBF}}
	case lead == 0xF0:
		return [][2]byte{{0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}
	case lead >= 0xF1 && lead <= 0xF3:
		return [][2]byte{{0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}
	case lead == 0xF4:
		return [][2]byte{{0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}
	}
	return nil
}

// invalidPrefix inspects b, which must not start with a valid rune. It returns
// the length of the maximal subpart at its start (the bytes one U+FFFD
// replaces) and whether those bytes are a truncated character that more bytes
// could still complete.
func invalidPrefix(b []byte) (n int, truncated bool) {
	ranges := continuationRanges(b[0])
	n = 1
	for _, rg := range ranges {
		if n == len(b) {
			return n, true
		}
		if b[n] < rg[0] || b[n] > rg[1] {
			return n, false
		}
		n++
	}
	return n, false
}

// appendLossy appends b to dst, replacing each maximal invalid subpart with
// U+FFFD.
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			dst = append(dst, b[0])
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, b[:size]...)
			b = b[size:]
			continue
		}
		n, _ := invalidPrefix(b)
		dst = utf8.AppendRune(dst, utf8.RuneError)
		b = b[n:]
	}
	return dst
}

// completeLen returns how many leading bytes of b can be converted to text now:
// all of b except a trailing truncated character that later bytes may finish.
func completeLen(b []byte) int {
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			i += size
			continue
		}
		n, truncated := invalidPrefix(b[i:])
		if truncated {
			return i
		}
		i += n
	}
	return i
}
