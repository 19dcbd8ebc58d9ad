package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/gpt2"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// Model is what prompts need to know of a checkpoint directory (--model
// DIR): its context length and the token ids a prompt may use.
type Model struct {
	Family     string // config.json's model_type as engine/model resolves it ("gpt2", "qwen3")
	ContextLen int    // config.json's positions: n_positions (GPT-2), max_position_embeddings (Qwen3)
	// TokenIDs are the ids prompts are drawn from: every regular token of
	// the model's tokenizer, in id order, never an added or special one.
	// Nil for GPT-2, whose prompts keep the original harness's draws
	// (pinned by golden tests) over the GPT-2 range.
	TokenIDs  []int32
	Tokenizer *tokenizer.Tokenizer // for text prompts (chat, text-only servers)
}

// IsModelDir reports whether path is a checkpoint directory (one holding
// config.json), as opposed to a model id sent to a running server.
func IsModelDir(path string) bool {
	if path == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(path, "config.json"))
	return err == nil && st.Mode().IsRegular()
}

// ReadModel reads config.json through engine/model (which dispatches on
// model_type) and the directory's tokenizer.
func ReadModel(dir string) (*Model, error) {
	cfg, err := model.ReadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	m := &Model{Family: cfg.Family, ContextLen: cfg.MaxSeqLen}
	if m.Family == "" {
		m.Family = gpt2.Family.Name
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer of %s: %w", dir, err)
	}
	m.Tokenizer = tok
	if m.Family == gpt2.Family.Name {
		return m, nil
	}
	added, err := addedTokenIDs(dir)
	if err != nil {
		return nil, err
	}
	m.TokenIDs = regularTokenIDs(tok, added)
	if len(m.TokenIDs) == 0 {
		return nil, fmt.Errorf("tokenizer of %s has no regular tokens to draw prompts from", dir)
	}
	return m, nil
}

// regularTokenIDs are the ids below the tokenizer's VocabSize (not the
// model's vocab_size: Qwen3 pads its embedding past the tokenizer) that
// stand for bytes and are neither added nor special.
func regularTokenIDs(tok *tokenizer.Tokenizer, added map[int32]bool) []int32 {
	ids := make([]int32, 0, tok.VocabSize())
	for id := int32(0); int(id) < tok.VocabSize(); id++ {
		if !added[id] && !tok.IsSpecial(id) && tok.TokenBytes(id) != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// addedTokenIDs are the HF "added tokens" of a directory: tokenizer.json's
// added_tokens and tokenizer_config.json's added_tokens_decoder, special or
// not (Qwen3's <think> and <tool_call> are added but not special; a prompt
// of them would not be random text). engine/tokenizer knows the same set
// but exports only IsSpecial.
func addedTokenIDs(dir string) (map[int32]bool, error) {
	added := map[int32]bool{}
	var tj struct {
		AddedTokens []struct {
			ID int32 `json:"id"`
		} `json:"added_tokens"`
	}
	if err := readJSONIfPresent(filepath.Join(dir, "tokenizer.json"), &tj); err != nil {
		return nil, err
	}
	for _, a := range tj.AddedTokens {
		added[a.ID] = true
	}
	var tc struct {
		Decoder map[string]json.RawMessage `json:"added_tokens_decoder"`
	}
	if err := readJSONIfPresent(filepath.Join(dir, "tokenizer_config.json"), &tc); err != nil {
		return nil, err
	}
	for key := range tc.Decoder {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: added_tokens_decoder key %q is not an id", filepath.Join(dir, "tokenizer_config.json"), key)
		}
		added[int32(id)] = true
	}
	return added, nil
}

func readJSONIfPresent(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
