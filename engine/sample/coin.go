package sample

// Coin is the uniform draw in [0, 1) that picks the index-th generated token
// (index 0 = first) of a request with the given seed. It is a pure function
// — a counter-based generator, no state — so a token's draw does not depend
// on batching, preemption or the device; the CUDA sampler computes the same
// 64-bit integer arithmetic:
//
//	mix(z)  = splitmix64 finaliser:
//	          z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
//	          z = (z ^ z>>27) * 0x94D049BB133111EB
//	          z ^ z>>31
//	bits    = mix(mix(seed) + (index+1) * 0x9E3779B97F4A7C15)   (mod 2^64)
//	Coin    = float64(bits >> 11) * 2^-53
func Coin(seed uint64, index int) float64 {
	return float64(mix64(mix64(seed)+(uint64(index)+1)*golden64)>>11) * 0x1p-53
}

// golden64 is 2^64/φ, splitmix64's increment.
const golden64 = 0x9E3779B97F4A7C15

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
