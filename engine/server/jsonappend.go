package server

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The SSE hot path builds each chunk by appending bytes to a reused buffer
// instead of marshalling a struct: encoding/json allocates per call, and a
// streaming server writes one chunk per token per request. strconv.AppendQuote
// is not usable because its \x escapes are not JSON.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Like encoding/json it
// replaces invalid UTF-8 with U+FFFD and escapes U+2028/U+2029 (they end lines
// in JavaScript); unlike it, it leaves <, > and & alone (no HTML embedding).
func appendJSONString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONFloat appends f the way encoding/json would for a float32 value,
// except that NaN and ±Inf (a log-probability of an impossible token) become
// null instead of an error.
func appendJSONFloat(dst []byte, f float32) []byte {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
}

// appendSeconds appends a duration in seconds with microsecond resolution,
// the server clock's useful precision.
func appendSeconds(dst []byte, s float64) []byte {
	return strconv.AppendFloat(dst, math.Round(s*1e6)/1e6, 'f', -1, 64)
}
