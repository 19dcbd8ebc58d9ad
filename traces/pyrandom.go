package traces

// pyRandom reproduces CPython's random.Random for the calls the original
// harness made (seed with an int, randint), so the default base prompt has
// the very token ids the original sent. It is MT19937 seeded by
// init_by_array with the seed's 32-bit words, least significant first
// (CPython's random_seed for an int argument).
type pyRandom struct {
	mt  [mtN]uint32
	idx int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

func newPyRandom(seed int64) *pyRandom {
	// CPython seeds from abs(seed), split into 32-bit words; 0 is one word.
	mag := uint64(seed)
	if seed < 0 {
		mag = uint64(-seed) // for MinInt64 this wraps to 1<<63, which is abs too
	}
	key := []uint32{uint32(mag)}
	if hi := uint32(mag >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000 // MSB is 1, assuring a non-zero initial array
}

func (r *pyRandom) uint32() uint32 {
	if r.idx >= mtN {
		for k := 0; k < mtN; k++ {
			y := (r.mt[k] & mtUpperMask) | (r.mt[(k+1)%mtN] & mtLowerMask)
			v := r.mt[(k+mtM)%mtN] ^ (y >> 1)
			if y&1 != 0 {
				v ^= mtMatrixA
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// randBelow is CPython's _randbelow_with_getrandbits for n < 2^32:
// draw bit_length(n) bits, retry while the draw is >= n.
func (r *pyRandom) randBelow(n uint32) uint32 {
	if n == 0 {
		return 0
	}
	k := 0
	for v := n; v != 0; v >>= 1 {
		k++
	}
	for {
		v := r.uint32() >> (32 - k) // getrandbits(k) for k <= 32
		if v < n {
			return v
		}
	}
}

// randint is random.randint(lo, hi), inclusive, for hi − lo < 2^32 − 1.
func (r *pyRandom) randint(lo, hi int) int {
	return lo + int(r.randBelow(uint32(hi-lo+1)))
}
