package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
)

// WriteJSON writes v as 2-space-indented JSON to path atomically: the bytes go
// to a temporary file in the same directory, which is synced and renamed over
// path, so a reader (or a run killed half-way) sees either the old file or the
// complete new one, never a torn one.
//
// Non-finite floats cannot appear in the output: encoding/json refuses NaN and
// ±Inf, and the original harness wrote bare NaN (invalid JSON). WriteJSON
// scrubs a copy of v first: a *float64 or map/interface value that is not
// finite becomes null, a plain float64 field becomes 0.
func WriteJSON(path string, v any) error {
	data, err := MarshalJSON(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, data)
}

// MarshalJSON is the encoding WriteJSON uses (scrubbed, indented, trailing
// newline), for callers that print or hash the same bytes.
func MarshalJSON(v any) ([]byte, error) {
	scrubbed := scrubNonFinite(reflect.ValueOf(v))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	var in any
	if scrubbed.IsValid() {
		in = scrubbed.Interface()
	}
	if err := enc.Encode(in); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFileAtomic writes data to path through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte) error {
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic for a producer that writes into a stream,
// e.g. a Markdown summary.
func WriteAtomic(path string, write func(io.Writer) error) error {
	return writeAtomic(path, write)
}

func writeAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; results are meant to be shared.
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	return nil
}

// scrubNonFinite returns a deep copy of v in which every non-finite float is
// replaced: by nil where the holder can be nil (pointer, interface, map value
// of interface type), by 0 otherwise. Values without floats are returned as
// they are (no copy), so the common case costs one walk.
func scrubNonFinite(v reflect.Value) reflect.Value {
	if !v.IsValid() || !hasNonFinite(v, 0) {
		return v
	}
	return scrubCopy(v)
}

// maxDepth bounds the walk; results values are shallow trees.
const maxDepth = 64

func hasNonFinite(v reflect.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		return math.IsNaN(f) || math.IsInf(f, 0)
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasNonFinite(v.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && hasNonFinite(v.Field(i), depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if hasNonFinite(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if hasNonFinite(it.Value(), depth+1) {
				return true
			}
		}
	}
	return false
}

func isNonFiniteFloat(v reflect.Value) bool {
	if v.Kind() != reflect.Float32 && v.Kind() != reflect.Float64 {
		return false
	}
	f := v.Float()
	return math.IsNaN(f) || math.IsInf(f, 0)
}

func scrubCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if isNonFiniteFloat(v) {
			return reflect.Zero(v.Type())
		}
		return v
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		if isNonFiniteFloat(v.Elem()) {
			return reflect.Zero(v.Type())
		}
		out := reflect.New(v.Elem().Type())
		out.Elem().Set(scrubCopy(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		if !isNonFiniteFloat(v.Elem()) {
			out.Set(scrubCopy(v.Elem()))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(scrubCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(scrubCopy(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(scrubCopy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			// A map[string]any value arrives as an Interface value, which
			// scrubCopy turns into nil when it holds a non-finite float.
			out.SetMapIndex(it.Key(), scrubCopy(it.Value()))
		}
		return out
	}
	return v
}
