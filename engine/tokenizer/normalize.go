package tokenizer

import "golang.org/x/text/unicode/norm"

// nfcString is HF's NFC normalizer (Qwen2's tokenizer.json has one). The quick
// check keeps already-normalized text, nearly all text, free of copies.
func nfcString(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	return norm.NFC.String(s)
}
