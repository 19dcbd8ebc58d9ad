package tokenizer

// GPT-2's byte-level alphabet. vocab.json and merges.txt spell every byte as one
// printable rune so that token strings never contain spaces or control
// characters; this file holds that bijection (bytes_to_unicode in OpenAI's
// encoder.py and in HF's ByteLevel pre-tokenizer).

// byteOrder lists the 256 bytes in bytes_to_unicode order: printable Latin-1
// first, then the rest. GPT-2 gives byte byteOrder[i] the id i.
var byteOrder [256]byte

// byteRune maps a byte to the rune that spells it in vocab.json/merges.txt.
var byteRune [256]rune

// runeByte is the inverse of byteRune; runes outside the alphabet are absent.
var runeByte = make(map[rune]byte, 256)

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n, shifted := 0, 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			byteOrder[n] = byte(b)
			byteRune[b] = rune(b)
			n++
		}
	}
	for b := 0; b < 256; b++ {
		if !printable(b) {
			byteOrder[n] = byte(b)
			byteRune[b] = rune(256 + shifted)
			n++
			shifted++
		}
	}
	for b, r := range byteRune {
		runeByte[r] = byte(b)
	}
}

// byteLevelString spells raw token bytes in the byte-level alphabet.
func byteLevelString(raw []byte) string {
	out := make([]rune, len(raw))
	for i, b := range raw {
		out[i] = byteRune[b]
	}
	return string(out)
}

// byteLevelBytes converts a vocab.json/merges.txt token string back to raw
// bytes. ok is false if a rune is outside the byte-level alphabet.
func byteLevelBytes(s string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(s))
	for _, r := range s {
		b, found := runeByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}
