package model

import (
	"fmt"
	"math"
)

// DType is the element type a checkpoint stores; in memory weights are always
// fp32.
type DType int

const (
	FP32 DType = iota
	FP16
	BF16
)

// ParseDType accepts "fp32"/"float32", "fp16"/"float16"/"half",
// "bf16"/"bfloat16".
func ParseDType(s string) (DType, error) {
	switch s {
	case "fp32", "float32", "f32":
		return FP32, nil
	case "fp16", "float16", "f16", "half":
		return FP16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return 0, fmt.Errorf("model: unknown dtype %q (want fp32, fp16 or bf16)", s)
}

// String is the short name used on the command line.
func (d DType) String() string {
	switch d {
	case FP32:
		return "fp32"
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// safetensorsName is the dtype string in a safetensors header.
func (d DType) safetensorsName() string {
	return [...]string{FP32: "F32", FP16: "F16", BF16: "BF16"}[d]
}

// torchName is the dtype string in config.json's torch_dtype.
func (d DType) torchName() string {
	return [...]string{FP32: "float32", FP16: "float16", BF16: "bfloat16"}[d]
}

func (d DType) size() int {
	if d == FP32 {
		return 4
	}
	return 2
}

func (d DType) valid() bool { return d == FP32 || d == FP16 || d == BF16 }

// f16ToF32 widens an IEEE binary16 value exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	var bits uint32
	switch {
	case exp == 0x1f: // inf or NaN: keep the payload
		bits = sign | 0x7f800000 | mant<<13
	case exp == 0 && mant == 0:
		bits = sign
	case exp == 0: // subnormal: value = mant * 2^-24; normalise it
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		bits = sign | e<<23 | (mant&0x3ff)<<13
	default:
		bits = sign | (exp+127-15)<<23 | mant<<13
	}
	return math.Float32frombits(bits)
}

// f32ToF16 rounds to the nearest binary16, ties to even (what torch's
// .half() does); overflow gives inf, NaN stays NaN.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // binary16 subnormal (or zero): m = value / 2^-24
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		rounded := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && rounded&1 == 1) {
			rounded++ // a carry into bit 10 gives the smallest normal: correct
		}
		return sign | uint16(rounded)
	}
	rounded := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && rounded&1 == 1) {
		rounded++ // a carry into the exponent is correct, up to inf
	}
	return sign | uint16(rounded)
}

// bf16ToF32 widens a bfloat16 exactly (it is the top half of an fp32).
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
