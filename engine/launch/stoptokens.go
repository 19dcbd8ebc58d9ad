package launch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/roseinfer/roseinfer/engine/model"
)

// GenerationConfigFile is the file of an HF checkpoint directory that holds
// generation defaults; roseinfer reads only its eos_token_id.
const GenerationConfigFile = "generation_config.json"

// StopTokenIDs are the ids that end a generation of the checkpoint in dir
// (engine.Config.StopTokens): generation_config.json's eos_token_id, as
// vLLM and HF generate read it (Qwen3 lists <|im_end|> and <|endoftext|>
// there while its config.json names only <|im_end|>). Without that file,
// or without the key in it, config.json's eos_token_id. Either key may be
// one id or a list of ids; every id must lie inside vocabSize. A file that
// is not a JSON object, or a key of another shape, is an error naming the
// file and the key. nil when neither file names an id.
func StopTokenIDs(dir string, vocabSize int) ([]int32, error) {
	ids, found, err := readEOSTokenIDs(filepath.Join(dir, GenerationConfigFile), vocabSize)
	if err != nil || found {
		return ids, err
	}
	ids, _, err = readEOSTokenIDs(filepath.Join(dir, model.ConfigFile), vocabSize)
	return ids, err
}

// readEOSTokenIDs reads eos_token_id from the JSON object in path; found is
// false when the file does not exist or the key is absent or null.
func readEOSTokenIDs(path string, vocabSize int) (ids []int32, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	raw := bytes.TrimSpace(doc["eos_token_id"])
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false, nil
	}
	ids, err = parseTokenIDs(raw, vocabSize)
	if err != nil {
		return nil, false, fmt.Errorf("%s: eos_token_id: %w", path, err)
	}
	return ids, true, nil
}

// parseTokenIDs reads an id or a list of ids (HF writes either), keeping
// the first of each repeated id.
func parseTokenIDs(raw json.RawMessage, vocabSize int) ([]int32, error) {
	var list []int64
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []int64{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s is neither a token id nor a list of token ids", raw)
	}
	var ids []int32
	for _, id := range list {
		if id < 0 || id >= int64(vocabSize) {
			return nil, fmt.Errorf("token id %d is outside the model's vocabulary of %d", id, vocabSize)
		}
		if !slices.Contains(ids, int32(id)) {
			ids = append(ids, int32(id))
		}
	}
	return ids, nil
}
