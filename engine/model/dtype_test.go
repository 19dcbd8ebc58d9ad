package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16KnownValues(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                // largest finite
		{65520, 0x7c00},                // halfway to 2^16 rounds to inf
		{float32(math.Inf(1)), 0x7c00}, // inf
		{0x1p-24, 0x0001},              // smallest subnormal
		{0x1p-25, 0x0000},              // half of it: tie to even (0)
		{0x1.8p-25, 0x0001},            // above half: rounds up
		{0x1p-14, 0x0400},              // smallest normal
		{1.0 / 3, 0x3555},              // rounds down
		{1 + 0x1p-11, 0x3c00},          // tie, even stays
		{1 + 3*0x1p-11, 0x3c02},        // tie, odd rounds up
		{0x1.ffcp-15, 0x0400},          // subnormal rounding carries into the exponent
	}
	for _, tt := range tests {
		if got := f32ToF16(tt.f); got != tt.h {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	if h := f32ToF16(float32(math.NaN())); f16ToF32(h) == f16ToF32(h) {
		t.Errorf("NaN became %#04x", h)
	}
}

// TestF16Exhaustive: every non-NaN binary16 widens and narrows back to itself.
func TestF16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := f32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

// TestF16Nearest: for random fp32 inputs the chosen binary16 is at least as
// close as its neighbours (checked in float64).
func TestF16Nearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		x := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-28)))
		h := f32ToF16(x)
		d := math.Abs(float64(f16ToF32(h)) - float64(x))
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7c00 == 0x7c00 || (n^h)&0x8000 != 0 {
				continue // neighbour is inf/NaN or across the sign
			}
			if dn := math.Abs(float64(f16ToF32(n)) - float64(x)); dn < d {
				t.Fatalf("f32ToF16(%g) = %#04x (err %g) but %#04x is closer (err %g)", x, h, d, n, dn)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		bits uint32
		h    uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above half
		{0x7f7fffff, 0x7f80}, // max float rounds to inf
		{0x7f800000, 0x7f80}, // inf
		{0x80000000, 0x8000}, // -0
	}
	for _, tt := range tests {
		if got := f32ToBF16(math.Float32frombits(tt.bits)); got != tt.h {
			t.Errorf("f32ToBF16(%#08x) = %#04x, want %#04x", tt.bits, got, tt.h)
		}
	}
	if f := bf16ToF32(f32ToBF16(float32(math.NaN()))); f == f {
		t.Error("NaN lost")
	}
	for h := 0; h < 1<<16; h++ {
		f := bf16ToF32(uint16(h))
		if f == f && f32ToBF16(f) != uint16(h) {
			t.Fatalf("%#04x does not round trip", h)
		}
	}
}

func TestParseDType(t *testing.T) {
	for _, s := range []string{"fp32", "float32", "fp16", "float16", "bf16", "bfloat16"} {
		d, err := ParseDType(s)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := ParseDType(d.String()); again != d {
			t.Errorf("%s: String %q does not parse back", s, d.String())
		}
	}
	if _, err := ParseDType("int8"); err == nil {
		t.Error("int8: no error")
	}
}
