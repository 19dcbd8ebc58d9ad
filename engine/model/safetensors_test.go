package model

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// smallConfig keeps file tests fast: every tensor kind, a few hundred values.
var smallConfig = Config{NumLayers: 2, NumHeads: 2, Channels: 8, MaxSeqLen: 16, VocabSize: 50, LayerNormEpsilon: 1e-5, EOSTokenID: 49}

func TestCheckpointRoundTrip(t *testing.T) {
	w, err := InitRandom(smallConfig, 7)
	if err != nil {
		t.Fatal(err)
	}
	// Exact expectations per dtype: fp32 is lossless; fp16/bf16 equal the
	// rounded value, which is within half an ulp of the original.
	tests := []struct {
		dtype  DType
		round  func(float32) float32
		relTol float64
	}{
		{FP32, func(x float32) float32 { return x }, 0},
		{FP16, func(x float32) float32 { return f16ToF32(f32ToF16(x)) }, 1.0 / 2048},
		{BF16, func(x float32) float32 { return bf16ToF32(f32ToBF16(x)) }, 1.0 / 256},
	}
	for _, tt := range tests {
		t.Run(tt.dtype.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := WriteCheckpoint(dir, w.Config, w, tt.dtype); err != nil {
				t.Fatal(err)
			}
			got, err := LoadCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Config != w.Config {
				t.Fatalf("config %+v, want %+v", got.Config, w.Config)
			}
			for i, x := range w.Data {
				if want := tt.round(x); got.Data[i] != want {
					t.Fatalf("value %d: got %g, want %g (from %g)", i, got.Data[i], want, x)
				}
				// Half an ulp relative, or half of fp16's smallest subnormal.
				if diff := math.Abs(float64(got.Data[i] - x)); diff > tt.relTol*math.Abs(float64(x))+0x1p-25 {
					t.Fatalf("value %d: error %g too large for %g", i, diff, x)
				}
			}
		})
	}
}

func TestWriteCheckpointRejectsMismatchedConfig(t *testing.T) {
	w, _ := InitRandom(smallConfig, 1)
	other := smallConfig
	other.MaxSeqLen = 32
	if err := WriteCheckpoint(t.TempDir(), other, w, FP32); err == nil {
		t.Error("mismatched config: no error")
	}
}

// fileWith builds a safetensors image from (name, dtype, shape, data) rows
// laid out back to back, in the row order given.
type stRow struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

func fileWith(rows []stRow, extraHeader string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"__metadata__":{"format":"pt"}` + extraHeader)
	var buf []byte
	for _, r := range rows {
		dims := make([]string, len(r.shape))
		for i, d := range r.shape {
			dims[i] = itoa(d)
		}
		sb.WriteString(`,"` + r.name + `":{"dtype":"` + r.dtype + `","shape":[` + strings.Join(dims, ",") +
			`],"data_offsets":[` + itoa(len(buf)) + `,` + itoa(len(buf)+len(r.data)) + `]}`)
		buf = append(buf, r.data...)
	}
	sb.WriteString("}")
	return withHeader([]byte(sb.String()), buf)
}

func withHeader(header, buf []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, buf...)
}

func itoa(i int) string { return strconv.Itoa(i) }

// tensorRows encodes w's tensors as F32 rows in file layout, optionally
// renaming them.
func tensorRows(w *Weights, rename func(string) string) []stRow {
	var rows []stRow
	var scratch []float32
	for _, t := range fileTensors(w) {
		data := make([]byte, 4*len(t.data))
		for i, v := range t.fileLayout(&scratch) {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		rows = append(rows, stRow{rename(t.name), "F32", t.shape, data})
	}
	return rows
}

func TestReadSafetensorsNames(t *testing.T) {
	w, _ := InitRandom(smallConfig, 3)
	mask := stRow{"h.0.attn.bias", "F32", []int{1, 1, 2, 2}, make([]byte, 16)}
	tests := []struct {
		name    string
		rows    []stRow
		wantErr string
	}{
		{"plain names", tensorRows(w, func(s string) string { return s }), ""},
		{"transformer. prefix", tensorRows(w, func(s string) string { return "transformer." + s }), ""},
		{"mask buffers and lm_head ignored", append(tensorRows(w, func(s string) string { return s }),
			mask, stRow{"h.1.attn.masked_bias", "F32", []int{}, make([]byte, 4)},
			stRow{"lm_head.weight", "F32", []int{1}, make([]byte, 4)}), ""},
		{"both spellings", append(tensorRows(w, func(s string) string { return s }),
			stRow{"transformer.ln_f.bias", "F32", []int{8}, make([]byte, 32)}), `are both "ln_f.bias"`},
		{"unknown tensor", append(tensorRows(w, func(s string) string { return s }),
			stRow{"h.9.mlp.c_fc.weight", "F32", []int{1}, make([]byte, 4)}), "unexpected tensor"},
		{"missing tensor", tensorRows(w, func(s string) string { return s })[1:], "missing tensor \"wte.weight\""},
		{"wrong shape", append(tensorRows(w, func(s string) string { return s })[:len(fileTensors(w))-1],
			stRow{"ln_f.bias", "F32", []int{2, 4}, make([]byte, 32)}), "shape [2 4]"},
		{"integer dtype", append(tensorRows(w, func(s string) string { return s })[:len(fileTensors(w))-1],
			stRow{"ln_f.bias", "I32", []int{8}, make([]byte, 32)}), "I32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := NewWeights(smallConfig)
			err := ReadSafetensors(fileWith(tt.rows, ""), got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range w.Data {
				if got.Data[i] != w.Data[i] {
					t.Fatalf("value %d: got %g, want %g", i, got.Data[i], w.Data[i])
				}
			}
		})
	}
}

// TestMalformedSafetensors feeds broken files: each must give an error that
// names the problem, never a panic or an out-of-range read.
func TestMalformedSafetensors(t *testing.T) {
	one := []stRow{{"a", "F32", []int{2}, make([]byte, 8)}}
	good := fileWith(one, "")
	tests := []struct {
		name    string
		file    []byte
		wantErr string
	}{
		{"empty", nil, "shorter than"},
		{"short length", []byte{1, 2, 3}, "shorter than"},
		{"header past end", withHeader(nil, nil)[:8], ""}, // zero-length header: bad JSON
		{"huge header length", append(binary.LittleEndian.AppendUint64(nil, 1<<62), '{', '}'), "exceeds"},
		{"header longer than file", append(binary.LittleEndian.AppendUint64(nil, 100), '{', '}'), "exceeds"},
		{"not json", withHeader([]byte("{nope"), nil), "JSON"},
		{"json array", withHeader([]byte("[]"), nil), "JSON"},
		{"entry not object", withHeader([]byte(`{"a":3}`), nil), "bad entry"},
		{"bad metadata", withHeader([]byte(`{"__metadata__":{"k":1}}`), nil), "__metadata__"},
		{"unknown dtype", withHeader([]byte(`{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`), make([]byte, 4)), "unknown dtype"},
		{"missing shape", withHeader([]byte(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`), make([]byte, 4)), "missing shape"},
		{"one offset", withHeader([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`), make([]byte, 4)), "data_offsets"},
		{"offset past buffer", withHeader([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`), make([]byte, 4)), "outside"},
		{"reversed offsets", withHeader([]byte(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`), make([]byte, 4)), "outside"},
		{"negative dim", withHeader([]byte(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`), make([]byte, 4)), "negative"},
		{"shape/bytes mismatch", withHeader([]byte(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`), make([]byte, 8)), "needs 12 bytes"},
		{"overflowing shape", withHeader([]byte(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}`), make([]byte, 8)), "bytes"},
		{"float offsets", withHeader([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0.5,4]}}`), make([]byte, 4)), "bad entry"},
		{"hole", withHeader([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`), make([]byte, 8)), "hole"},
		{"overlap", withHeader([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`), make([]byte, 8)), "overlap"},
		{"trailing bytes", append(good, 0, 0, 0, 0), "cover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseSafetensors(tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
			w, _ := NewWeights(smallConfig)
			if err := ReadSafetensors(tt.file, w); err == nil {
				t.Fatal("ReadSafetensors: no error")
			}
		})
	}
	if _, _, err := parseSafetensors(good); err != nil {
		t.Fatalf("control file rejected: %v", err)
	}
}

func TestLoadCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "config") {
		t.Errorf("no config.json: err = %v", err)
	}
	if err := WriteConfig(filepath.Join(dir, ConfigFile), smallConfig, "float32"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), SafetensorsFile) {
		t.Errorf("no safetensors: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SafetensorsFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "shorter") {
		t.Errorf("empty safetensors: err = %v", err)
	}
}

func FuzzReadSafetensors(f *testing.F) {
	w, _ := InitRandom(smallConfig, 1)
	f.Add(fileWith(tensorRows(w, func(s string) string { return s }), ""))
	f.Add(fileWith([]stRow{{"a", "F16", []int{2}, make([]byte, 4)}}, ""))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, file []byte) {
		got, _ := NewWeights(smallConfig)
		_ = ReadSafetensors(file, got) // must not panic
	})
}

// TestTinyCheckpointBytes pins the files `roseinfer init-model --preset tiny
// --seed 3` writes: a change to the tensor names, their order, the file
// layout (Conv1D matrices stored (in, out)), the init draw or config.json
// shows up here as a new hash, never silently.
func TestTinyCheckpointBytes(t *testing.T) {
	cfg, _ := Preset("tiny")
	w, err := InitRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteCheckpoint(dir, cfg, w, FP32); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		ConfigFile:      "99d7614f8a23a8260b18057971a499144d2215951a09b8d110f0adc7a9891586",
		SafetensorsFile: "d1b46eb4a7cc8c9e56448f29d368e9c9e2b20d02ceac163d21a50a57f766ccf0",
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != want {
			t.Errorf("%s: sha256 %s, want %s", name, got, want)
		}
	}
}
