package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestF32ToBF16 checks the upload's rounding against the definition: the
// nearer of the two bf16 neighbours, ties to the even one, NaN kept NaN.
func TestF32ToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0, 0}, {float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // a tie: to the even neighbour (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // a tie: to the even neighbour (up)
		{math.Float32frombits(0x3f808001), 0x3f81}, // just past the tie
	} {
		if got := f32ToBF16(tc.in); got != tc.want {
			t.Errorf("f32ToBF16(%#x) = %#x, want %#x", math.Float32bits(tc.in), got, tc.want)
		}
	}
	if got := bf16ToF32(f32ToBF16(float32(math.NaN()))); !math.IsNaN(float64(got)) {
		t.Errorf("NaN rounds to %v", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		x := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			continue
		}
		b := math.Float32bits(x)
		lo, hi := bf16ToF32(uint16(b>>16)), bf16ToF32(uint16(b>>16)+1)
		hiF := float64(hi)
		if math.IsInf(hiF, 0) { // past the largest finite: IEEE rounds as if the exponent went on, to 2^128
			hiF = math.Copysign(math.Ldexp(1, 128), hiF)
		}
		got := bf16ToF32(f32ToBF16(x))
		dlo, dhi := math.Abs(float64(x)-float64(lo)), math.Abs(float64(x)-hiF)
		want := lo
		if dhi < dlo || (dhi == dlo && (b>>16)&1 == 1) {
			want = hi
		}
		if got != want {
			t.Fatalf("f32ToBF16(%#x) = %v, want %v", b, got, want)
		}
	}
}
