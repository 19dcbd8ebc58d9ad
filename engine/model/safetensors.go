package model

// The safetensors format, parsed by hand (it is small): bytes [0,8) are a
// little-endian u64 N, bytes [8,8+N) a JSON object (padded with spaces), then
// the byte buffer. Each JSON entry is
//
//	"name": {"dtype": "F32", "shape": [d0, d1], "data_offsets": [begin, end]}
//
// with offsets relative to the buffer; an optional "__metadata__" maps strings
// to strings. Data is dense, row-major, little-endian, and the buffer is
// covered exactly: no overlaps, no holes.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// maxHeaderBytes bounds the JSON header so that a corrupt length cannot make
// us allocate gigabytes. GPT-2 medium's header is about 30 KB.
const maxHeaderBytes = 100 << 20

// stEntry is one tensor's header entry, validated against the buffer.
type stEntry struct {
	name       string
	dtype      string
	shape      []int
	begin, end int // byte offsets into the buffer
}

// stElementSizes are the safetensors dtypes and their sizes in bytes.
var stElementSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// parseSafetensors validates a whole file image and returns its entries by
// name and the byte buffer they index.
func parseSafetensors(file []byte) (map[string]stEntry, []byte, error) {
	if len(file) < 8 {
		return nil, nil, fmt.Errorf("file of %d bytes is shorter than the 8-byte header length", len(file))
	}
	n := binary.LittleEndian.Uint64(file[:8])
	if n > maxHeaderBytes || n > uint64(len(file)-8) {
		return nil, nil, fmt.Errorf("header length %d exceeds the file (%d bytes) or the %d-byte cap", n, len(file), maxHeaderBytes)
	}
	header, buf := file[8:8+n], file[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, nil, fmt.Errorf("decode header JSON: %w", err)
	}
	entries := make(map[string]stEntry, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, nil, fmt.Errorf("__metadata__ is not a string map: %w", err)
			}
			continue
		}
		e, err := parseEntry(name, msg, len(buf))
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		entries[name] = e
	}
	if err := checkCoverage(entries, len(buf)); err != nil {
		return nil, nil, err
	}
	return entries, buf, nil
}

func parseEntry(name string, msg json.RawMessage, bufLen int) (stEntry, error) {
	var h struct {
		DType       string  `json:"dtype"`
		Shape       []int64 `json:"shape"`
		DataOffsets []int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(msg, &h); err != nil {
		return stEntry{}, fmt.Errorf("bad entry: %w", err)
	}
	size, ok := stElementSizes[h.DType]
	if !ok {
		return stEntry{}, fmt.Errorf("unknown dtype %q", h.DType)
	}
	if h.Shape == nil {
		return stEntry{}, errors.New("missing shape")
	}
	if len(h.DataOffsets) != 2 {
		return stEntry{}, fmt.Errorf("data_offsets has %d values, want 2", len(h.DataOffsets))
	}
	begin, end := h.DataOffsets[0], h.DataOffsets[1]
	if begin < 0 || end < begin || end > int64(bufLen) {
		return stEntry{}, fmt.Errorf("data_offsets [%d, %d] outside the %d-byte buffer", begin, end, bufLen)
	}
	// numel*size must equal the byte span; bounding numel by the span
	// first keeps the product from overflowing.
	numel := int64(1)
	shape := make([]int, len(h.Shape))
	for i, d := range h.Shape {
		if d < 0 {
			return stEntry{}, fmt.Errorf("negative dimension in shape %v", h.Shape)
		}
		if d != 0 && numel > int64(bufLen)/d {
			numel = int64(bufLen) + 1 // larger than any span: reported below
		} else {
			numel *= d
		}
		shape[i] = int(d)
	}
	if numel > int64(bufLen) || numel*int64(size) != end-begin {
		return stEntry{}, fmt.Errorf("shape %v of %s needs %d bytes but data_offsets span %d", h.Shape, h.DType, numel*int64(size), end-begin)
	}
	return stEntry{name: name, dtype: h.DType, shape: shape, begin: int(begin), end: int(end)}, nil
}

// checkCoverage enforces the format's rule that tensors tile the buffer: no
// overlap (two tensors sharing bytes) and no hole.
func checkCoverage(entries map[string]stEntry, bufLen int) error {
	sorted := make([]stEntry, 0, len(entries))
	for _, e := range entries {
		sorted = append(sorted, e)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].begin != sorted[j].begin {
			return sorted[i].begin < sorted[j].begin
		}
		return sorted[i].end < sorted[j].end
	})
	pos := 0
	for _, e := range sorted {
		if e.begin != pos {
			return fmt.Errorf("tensor %q starts at byte %d, want %d (tensors overlap or leave a hole)", e.name, e.begin, pos)
		}
		pos = e.end
	}
	if pos != bufLen {
		return fmt.Errorf("tensors cover %d of %d buffer bytes", pos, bufLen)
	}
	return nil
}

// readSafetensors fills w from a safetensors file image, through its
// family's checkpoint names (arch.Family.FileName says which names it
// accepts and which it skips); F32, F16 and BF16 become fp32, and matrices
// the file stores transposed are turned into the canonical layout.
func readSafetensors(file []byte, w *Weights) error {
	entries, buf, err := parseSafetensors(file)
	if err != nil {
		return err
	}
	f, err := arch.Lookup(w.Config.Family)
	if err != nil {
		return err
	}
	byName := make(map[string]stEntry, len(entries))
	for name, e := range entries {
		short, ok := f.FileName(name)
		if !ok {
			continue
		}
		if prev, dup := byName[short]; dup {
			return fmt.Errorf("tensors %q and %q are both %q", prev.name, name, short)
		}
		byName[short] = e
	}
	var scratch []float32
	for _, ft := range fileTensors(w) {
		e, ok := byName[ft.name]
		if !ok {
			return fmt.Errorf("missing tensor %q", ft.name)
		}
		delete(byName, ft.name)
		if !equalShape(e.shape, ft.shape) {
			return fmt.Errorf("tensor %q has shape %v, config wants %v", ft.name, e.shape, ft.shape)
		}
		dst := ft.data
		if ft.transposed {
			if cap(scratch) < len(ft.data) {
				scratch = make([]float32, len(ft.data))
			}
			dst = scratch[:len(ft.data)]
		}
		if err := decodeInto(dst, e.dtype, buf[e.begin:e.end]); err != nil {
			return fmt.Errorf("tensor %q: %w", ft.name, err)
		}
		if ft.transposed {
			ft.load(dst)
		}
	}
	for name := range byName {
		return fmt.Errorf("unexpected tensor %q (not a %s parameter)", name, f.Title)
	}
	return nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// decodeInto widens little-endian F32/F16/BF16 bytes into dst.
func decodeInto(dst []float32, dtype string, src []byte) error {
	switch dtype {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = f16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = bf16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	default:
		return fmt.Errorf("dtype %s is not a float type this loader reads (F32, F16, BF16)", dtype)
	}
	return nil
}

// writeSafetensors streams tensors to path in the given dtype and in their
// file layout, in the order given, through a temporary file and a rename.
func writeSafetensors(path string, tensors []fileTensor, dtype DType) (err error) {
	header, err := safetensorsHeader(tensors, dtype)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("model: create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes 0600
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	var lenBytes [8]byte
	binary.LittleEndian.PutUint64(lenBytes[:], uint64(len(header)))
	bw.Write(lenBytes[:])
	bw.Write(header)
	// Encode in chunks: one bufio call per 16K values, not per value.
	chunk := make([]byte, 0, 1<<16)
	var scratch []float32
	for i := range tensors {
		for _, v := range tensors[i].fileLayout(&scratch) {
			switch dtype {
			case FP32:
				chunk = binary.LittleEndian.AppendUint32(chunk, math.Float32bits(v))
			case FP16:
				chunk = binary.LittleEndian.AppendUint16(chunk, f32ToF16(v))
			case BF16:
				chunk = binary.LittleEndian.AppendUint16(chunk, f32ToBF16(v))
			}
			if len(chunk) == cap(chunk) {
				bw.Write(chunk)
				chunk = chunk[:0]
			}
		}
	}
	bw.Write(chunk)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	return nil
}

// safetensorsHeader builds the JSON header, keys in tensor order after
// __metadata__ {"format": "pt"} (transformers refuses files without it),
// padded with spaces to a multiple of 8 so the buffer starts aligned.
func safetensorsHeader(tensors []fileTensor, dtype DType) ([]byte, error) {
	if !dtype.valid() {
		return nil, fmt.Errorf("model: invalid dtype %v", dtype)
	}
	var sb strings.Builder
	sb.WriteString(`{"__metadata__":{"format":"pt"}`)
	off := 0
	for _, t := range tensors {
		numel := 1
		for _, d := range t.shape {
			numel *= d
		}
		if numel != len(t.data) {
			return nil, fmt.Errorf("model: tensor %q has %d values for shape %v", t.name, len(t.data), t.shape)
		}
		name, _ := json.Marshal(t.name)
		dims := make([]string, len(t.shape))
		for i, d := range t.shape {
			dims[i] = strconv.Itoa(d)
		}
		end := off + numel*dtype.size()
		fmt.Fprintf(&sb, `,%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}`,
			name, dtype.safetensorsName(), strings.Join(dims, ","), off, end)
		off = end
	}
	sb.WriteString("}")
	for sb.Len()%8 != 0 {
		sb.WriteByte(' ')
	}
	return []byte(sb.String()), nil
}
