package results

import (
	"slices"
	"strconv"
	"strings"
)

// Backend labels follow the original's grammar: a base
// backend name, for roseinfer optionally followed by "+token" suffixes that
// name an ablation (roseinfer+flashinfer+nofuse). Tables and figures show a
// display name built from the tokens; rows and series are ordered by the
// canonical label.

// fixedDisplayNames are the original's hand-picked names.
var fixedDisplayNames = map[string]string{
	"roseinfer":            "roseinfer",
	"roseinfer+flashinfer": "roseinfer (flashinfer)",
	"roseinfer+flashattn":  "roseinfer (flash-attn)",
	"roseinfer+chunked":    "roseinfer (chunked prefill)",
	"roseinfer+inproc":     "roseinfer (in-proc)",
	"vllm":                 "vLLM",
	"sglang":               "SGLang",
	"trtllm":               "TensorRT-LLM",
}

// tokenText is the per-token text inside "roseinfer (a, b, ...)".
var tokenText = map[string]string{
	"flashinfer": "flashinfer",
	"flashattn":  "flash-attn",
	"naive":      "naive",
	"chunked":    "chunked prefill",
	"auto2":      "prefill auto2",
	"inproc":     "in-proc",
	"nofuse":     "-fused ops",
	"nomlp":      "-fused MLP",
	"nosampler":  "-fused sampler",
	"nokv":       "-fused KV",
	"nooverlap":  "-overlap sched",
	"nothr":      "-thr cap",
	"noaff":      "-affinity",
	"noasync":    "-async stream",
	"nofill":     "-fill tgt",
	"nodrain":    "-cmd budg",
	"queueipc":   "+queue ipc",
	"nobatch":    "-batch send",
	"noflat":     "-flat evts",
	"nogc":       "-gc freeze",
	"nofastsse":  "-fast SSE",
	"mpasync":    "+mp async admit",
	"nompasync":  "-mp async admit",
	"streamtok":  "+stream tok",
	"slowcnt":    "-fast cnt",
}

// numberedTokens are prefixes followed by a count (kv256, batch16, tok2).
var numberedTokens = []string{"kv", "batch", "tok"}

// droppedTokens were written by old versions for features now on by default.
var droppedTokens = map[string]bool{"gcfreeze": true, "fastsse": true}

// BackendDisplayName is the name tables and legends show for a label:
// "vllm" -> "vLLM", "roseinfer+flashattn+nofuse" -> "roseinfer (flash-attn,
// -fused ops)". Unknown roseinfer tokens are shown as written; labels of other
// backends are shown unchanged.
func BackendDisplayName(label string) string {
	if name, ok := fixedDisplayNames[label]; ok {
		return name
	}
	tokens := RoseinferTokens(label)
	if tokens == nil {
		return label
	}
	var parts []string
	for _, tok := range tokens {
		if text := TokenText(tok); text != "" {
			parts = append(parts, text)
		}
	}
	if len(parts) == 0 {
		return "roseinfer"
	}
	return "roseinfer (" + strings.Join(parts, ", ") + ")"
}

// TokenText is the display text of one label token ("" for tokens the
// display drops). Counted tokens keep their number: kv256 -> "+kv256".
func TokenText(tok string) string {
	if droppedTokens[tok] {
		return ""
	}
	if text, ok := tokenText[tok]; ok {
		return text
	}
	for _, prefix := range numberedTokens {
		if n, ok := countSuffix(tok, prefix); ok {
			return "+" + prefix + strconv.Itoa(n)
		}
	}
	return tok
}

// RoseinferTokens returns the "+" suffix tokens of a roseinfer label (empty,
// non-nil for plain "roseinfer"), or nil when the label is another backend's.
func RoseinferTokens(label string) []string {
	if label != "roseinfer" && !strings.HasPrefix(label, "roseinfer+") {
		return nil
	}
	tokens := []string{}
	for _, tok := range strings.Split(label, "+")[1:] {
		if tok != "" {
			tokens = append(tokens, tok)
		}
	}
	return tokens
}

// CanonicalLabels maps each label of one results file to its canonical form,
// reconciling the two generations of the GC-freeze / fast-SSE tokens: old
// files marked the features as on (+gcfreeze, +fastsse), new ones mark them
// as off (+nogc, +nofastsse). If any label uses the new tokens, or none uses
// the old ones, the old tokens are dropped; otherwise their absence becomes
// +nogc / +nofastsse so old files compare with new ones.
func CanonicalLabels(labels []string) map[string]string {
	hasNew, hasOld := false, false
	for _, label := range labels {
		for _, tok := range RoseinferTokens(label) {
			hasNew = hasNew || tok == "nogc" || tok == "nofastsse"
			hasOld = hasOld || tok == "gcfreeze" || tok == "fastsse"
		}
	}
	oldScheme := hasOld && !hasNew
	out := make(map[string]string, len(labels))
	for _, label := range labels {
		tokens := RoseinferTokens(label)
		if tokens == nil {
			out[label] = label
			continue
		}
		gcOn := slices.Contains(tokens, "gcfreeze")
		sseOn := slices.Contains(tokens, "fastsse")
		kept := []string{"roseinfer"}
		for _, tok := range tokens {
			if !droppedTokens[tok] {
				kept = append(kept, tok)
			}
		}
		if oldScheme {
			if !gcOn {
				kept = append(kept, "nogc")
			}
			if !sseOn {
				kept = append(kept, "nofastsse")
			}
		}
		out[label] = strings.Join(kept, "+")
	}
	return out
}

// countSuffix reports whether tok is prefix followed by decimal digits only.
func countSuffix(tok, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(tok, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}
