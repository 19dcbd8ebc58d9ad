// sample.cuh: the GPU sampler (instantiated by sample.cu and sample_large.cu), one block per sampled row. It follows
// engine/sample's rule (sampler.go) step by step, so a seeded request draws
// the same token on either device up to float64 rounding at exact cut points:
//  1. greedy (temperature <= 0 or top_k == 1): largest logit, ties to the lowest id;
//  2. candidates: every id but the banned one, or the top_k largest logits
//     (ties to the lower id);
//  3. w = float32(exp(float64(l - m) / T)), m the largest candidate logit;
//  4. top-p: keep the shortest (w desc, id asc) prefix with sum >= top_p * Z;
//  5. draw: u = Coin(seed, index); the lowest kept id whose running sum in
//     ascending id order exceeds u * S.
//
// Fast path (top_k <= COMPACT_MAX, the usual request): the row is read twice
// with several 16-byte loads in flight per thread. The first pass finds the
// argmax and each thread's largest logit; the top_k-th largest of those
// 1024 per-thread maxima, its low 16 bits cleared, is a lower bound tau of
// the top_k-th largest logit (at least top_k distinct ids reach it), so the
// second pass collects only the ids at or above tau into shared memory: a
// few more than top_k. The exact top_k is ranked there and rules 3-5 run on
// it (in warp 0 alone when top_k <= 64).
//
// General path (top_k off or large, or too many ids at tau, e.g. massive
// ties): a radix search over the logits' bits finds the top_k cut, candidates
// are marked in a shared-memory bitmap, a second radix search over weight
// sums finds the top-p cut and the draw scans the vocabulary tile by tile.
// Where every id is a candidate and top-p keeps them all (top_k off, top_p
// 1), draw_all does rules 3-5 in one pass of weights instead.
#include "common.cuh"

#define SAMPLE_THREADS 1024
#define NWARPS (SAMPLE_THREADS / 32)
static_assert(NWARPS == 32, "the argmax reduction gives warp 0 a lane per warp");
#ifndef MAX_V
#define MAX_V 65536        // bitmap capacity; GPT-2's vocabulary is 50257
#endif
#ifndef SAMPLE_TILED
#define SAMPLE_TILED 1     // rows may come with the LM head's tile maxima (lmhead.cu)
#endif
#define COMPACT_MAX 1024   // candidates handled in shared memory (one per thread)
#define FAST_CAP 2048      // ids at or above tau the fast path can hold
#define NO_ID 0x7fffffff
#define TILES_PER_THREAD (MAX_V / 8 / SAMPLE_THREADS)  // 8-column tiles of the LM head's maxima


// weight is rule 3 exactly as sampler.go computes it: the difference in
// float32, the exponential in float64, rounded to float32; NaN counts as 0.
__device__ __forceinline__ float weight(float l, float m, double T) {
    const float d = l - m;
    if (d == 0.f) return 1.f;  // exp(0 / T) exactly, without float64 division's slow path for a zero dividend
    float w = (float)exp((double)d / T);
    return w != w ? 0.f : w;
}

// splitmix64 finaliser and Coin, exactly as engine/sample/coin.go.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ double coin(uint64_t seed, int index) {
    uint64_t bits = mix64(mix64(seed) + (uint64_t)(index + 1) * 0x9E3779B97F4A7C15ull);
    return (double)(bits >> 11) * 0x1p-53;
}

struct Scratch {
    int icount[NWARPS];
    double dsum[NWARPS];
    float fval[NWARPS];
    unsigned long long uval[NWARPS];
    int ival[NWARPS];
    unsigned int hist[512];     // radix rounds: 256 bins (kth_bound: two rounds' bins at once)
    double hmass[256];
    int bi[3];
    double bd[2];
    int ncand;                  // fast path: ids collected at or above tau
    uint32_t cand[MAX_V / 32];  // rule 2 candidates (general path)
    union {
        uint32_t keep[MAX_V / 32];  // rule 4 survivors (general path)
        unsigned long long pack[FAST_CAP];  // fast path: collected (key, ~id) packs
    } u;
    int cid[COMPACT_MAX];  // compacted candidates, ascending id
    float cl[COMPACT_MAX];
    float cw[COMPACT_MAX];
};

static_assert(MAX_V / 32 >= 2 * COMPACT_MAX, "fast_top_k keeps two words a candidate in Scratch::cand");

__device__ __forceinline__ bool bit(const uint32_t* m, int i) { return (m[i >> 5] >> (i & 31)) & 1u; }

// logit_row is one row of logits as the sampler reads them: fp32 from the
// LM head kernels of our own (lmhead.cu, gemv.cu: 1-16 rows), fp16 (GPT-2)
// or bf16 (the rotary block) from cuBLASLt's LM head (17+ rows), where half
// the bytes are written and read (docs/cuda.md). at(i) is logit i; quad(j) loads logits
// 4j..4j+3 (16 or 8 bytes) for unpack4, which comes after the next loads
// are issued (fp16 quads stay packed until then: fewer registers); oct(t, e)
// logits 8t..8t+7.
template <typename E>
struct logit_row;
template <>
struct logit_row<float> {
    typedef float4 quad_t;
    const float* x;
    __device__ __forceinline__ float at(int i) const { return x[i]; }
    __device__ __forceinline__ float4 quad(int j) const { return reinterpret_cast<const float4*>(x)[j]; }
    static __device__ __forceinline__ float4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    static __device__ __forceinline__ void unpack4(float4 v, float* e) { e[0] = v.x, e[1] = v.y, e[2] = v.z, e[3] = v.w; }
    __device__ __forceinline__ void oct(int t, float* e) const {
        const float4* p = reinterpret_cast<const float4*>(x + 8 * t);
        const float4 a = p[0], c = p[1];
        e[0] = a.x, e[1] = a.y, e[2] = a.z, e[3] = a.w, e[4] = c.x, e[5] = c.y, e[6] = c.z, e[7] = c.w;
    }
};
template <>
struct logit_row<half_t> {
    typedef uint2 quad_t;
    const half_t* x;
    __device__ __forceinline__ float at(int i) const { return h2f(x[i]); }
    __device__ __forceinline__ uint2 quad(int j) const { return reinterpret_cast<const uint2*>(x)[j]; }
    static __device__ __forceinline__ uint2 zero4() { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ void unpack4(uint2 v, float* e) {
        const half_t* h = reinterpret_cast<const half_t*>(&v);
#pragma unroll
        for (int c = 0; c < 4; c++) e[c] = h2f(h[c]);
    }
    __device__ __forceinline__ void oct(int t, float* e) const { unpack8(reinterpret_cast<const uint4*>(x)[t], e); }
    static __device__ __forceinline__ void unpack_oct(uint4 v, float* e) { unpack8(v, e); }
};

// bf16_logit is a bf16 logit: a struct, so that logit_row tells it from
// half_t (both are 16-bit integers). cuBLASLt has no bf16-to-fp16 GEMM, so a
// bf16 model's 16-bit logits are bf16, as vLLM's are in the model's dtype.
struct bf16_logit {
    unsigned short bits;
};

template <>
struct logit_row<bf16_logit> {
    typedef uint2 quad_t;
    const bf16_logit* x;
    __device__ __forceinline__ float at(int i) const { return bf2f(x[i].bits); }
    __device__ __forceinline__ uint2 quad(int j) const { return reinterpret_cast<const uint2*>(x)[j]; }
    static __device__ __forceinline__ uint2 zero4() { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ void unpack4(uint2 v, float* e) {
        e[0] = __uint_as_float(v.x << 16), e[1] = __uint_as_float(v.x & 0xffff0000u);
        e[2] = __uint_as_float(v.y << 16), e[3] = __uint_as_float(v.y & 0xffff0000u);
    }
    __device__ __forceinline__ void oct(int t, float* e) const { unpack_bf8(reinterpret_cast<const uint4*>(x)[t], e); }
    static __device__ __forceinline__ void unpack_oct(uint4 v, float* e) { unpack_bf8(v, e); }
};

// scan_row calls f(i, x.at(i)) for this thread's ids but skip (-1: none), in
// ascending id order, keeping several loads in flight: 4 logits a load when
// rows are 16-byte aligned (vec4), else 8 strided scalar loads per round.
// The skipped id is tested once per 4 ids, not once per id.
template <typename R, typename F>
__device__ __forceinline__ void scan_row(const R& x, int V, bool vec4, F f, int skip = -1) {
    if (vec4) {
        const int n4 = V / 4, skip4 = skip >= 0 ? skip / 4 : -1;
        for (int b = threadIdx.x; b < n4; b += 4 * SAMPLE_THREADS) {
            typename R::quad_t v[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int j = b + u * SAMPLE_THREADS;
                v[u] = j < n4 ? x.quad(j) : R::zero4();
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int j = b + u * SAMPLE_THREADS;
                if (j >= n4) continue;
                float e[4];
                R::unpack4(v[u], e);
                if (j != skip4) {
#pragma unroll
                    for (int c = 0; c < 4; c++) f(4 * j + c, e[c]);
                } else {
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        if (4 * j + c != skip) f(4 * j + c, e[c]);
                }
            }
        }
        for (int i = 4 * n4 + threadIdx.x; i < V; i += SAMPLE_THREADS)
            if (i != skip) f(i, x.at(i));
        return;
    }
    for (int b = threadIdx.x; b < V; b += 8 * SAMPLE_THREADS) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            int i = b + u * SAMPLE_THREADS;
            v[u] = i < V ? x.at(i) : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            int i = b + u * SAMPLE_THREADS;
            if (i < V && i != skip) f(i, v[u]);
        }
    }
}

// oct_reaches says whether 8 packed fp16 logits hold one >= th (th2: th in
// both halves): three packed maxima and a packed compare. NaN never reaches
// (max.f16x2 drops a NaN operand, a compare with NaN is false).
__device__ __forceinline__ bool oct_reaches(uint4 v, uint32_t th2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    return true;  // no max.f16x2 before sm_80: every group is read id by id
#else
    uint32_t hit;
    asm("{\n\t.reg .b32 a, b;\n\t.reg .pred p, q;\n\t"
        "max.f16x2 a, %1, %2;\n\tmax.f16x2 b, %3, %4;\n\tmax.f16x2 a, a, b;\n\t"
        "setp.ge.f16x2 p|q, a, %5;\n\tor.pred p, p, q;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(hit)
        : "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(th2));
    return hit != 0;
#endif
}

// scan_row_reaching calls f(i, x[i]) for this thread's ids of a 16-bit row
// (16-byte aligned, V ids) in every group of 8 consecutive ids that
// reaches(group) passes, ascending. With a test that passes every group
// holding a logit at or above the top-k bound, f sees every id that reaches
// it and makes the exact test itself. One packed test per 8 ids instead of
// a compare and a branch per id: the second pass over the row cost more
// than the first (6.6 us against 4.8 at batch 128 on the H100,
// docs/cuda.md).
template <typename E, typename R, typename F>
__device__ __forceinline__ void scan_row_reaching(const logit_row<E>& x, int V, R reaches, F f) {
    const int n8 = V / 8;
    const uint4* p = reinterpret_cast<const uint4*>(x.x);
    for (int b = threadIdx.x; b < n8; b += 4 * SAMPLE_THREADS) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int j = b + u * SAMPLE_THREADS;
            v[u] = j < n8 ? p[j] : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int j = b + u * SAMPLE_THREADS;
            if (j < n8 && reaches(v[u])) {
                float e[8];
                logit_row<E>::unpack_oct(v[u], e);
#pragma unroll
                for (int c = 0; c < 8; c++) f(8 * j + c, e[c]);
            }
        }
    }
    for (int i = 8 * n8 + threadIdx.x; i < V; i += SAMPLE_THREADS) f(i, x.at(i));
}

// scan_reaching is the 16-bit rows' packed second pass: f sees at least
// every id whose logit reaches th (fp32 rows have none: never called for
// them). An fp16 group is tested against th rounded down to fp16 (-inf below
// its range) by packed maxima (oct_reaches); a bf16 group widens to floats
// exactly and its largest is compared with th itself. NaN never reaches.
template <typename F>
__device__ __forceinline__ void scan_reaching(const logit_row<half_t>& x, int V, float th, F f) {
    half_t h;
    asm("cvt.rm.f16.f32 %0, %1;" : "=h"(h) : "f"(th));
    const uint32_t th2 = (uint32_t)h | ((uint32_t)h << 16);
    scan_row_reaching(x, V, [&](uint4 v) { return oct_reaches(v, th2); }, f);
}
template <typename F>
__device__ __forceinline__ void scan_reaching(const logit_row<bf16_logit>& x, int V, float th, F f) {
    scan_row_reaching(x, V, [&](uint4 v) {
        float e[8];
        unpack_bf8(v, e);
        return fmaxf(fmaxf(fmaxf(e[0], e[1]), fmaxf(e[2], e[3])), fmaxf(fmaxf(e[4], e[5]), fmaxf(e[6], e[7]))) >= th;
    }, f);
}
template <typename F>
__device__ __forceinline__ void scan_reaching(const logit_row<float>&, int, float, F) {}

// block_scan returns the sum of v over lower threads and sets *total to the
// block sum; slots is NWARPS values of shared scratch (icount or dsum). One
// definition serves the integer counts and the double probability sums.
template <typename T>
__device__ T block_scan(T* slots, T v, T* total) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    T x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) slots[warp] = x;
    __syncthreads();
    if (warp == 0) {
        T w = slots[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            T y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        slots[lane] = w;
    }
    __syncthreads();
    T before = (warp > 0 ? slots[warp - 1] : T(0)) + x - v;
    *total = slots[NWARPS - 1];
    __syncthreads();
    return before;
}

__device__ int block_scan_int(Scratch& sm, int v, int* total) { return block_scan(sm.icount, v, total); }
__device__ double block_scan_double(Scratch& sm, double v, double* total) { return block_scan(sm.dsum, v, total); }

__device__ float block_max(Scratch& sm, float v) {
    v = warp_max(v);
    __syncthreads();
    if (threadIdx.x % 32 == 0) sm.fval[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sm.fval[0];
    for (int i = 1; i < NWARPS; i++) r = fmaxf(r, sm.fval[i]);
    __syncthreads();
    return r;
}

__device__ int block_sum_int(Scratch& sm, int v) {
    int t;
    block_scan_int(sm, v, &t);
    return t;
}

// pick_bin: warp 0 finds, in the 256 bins hist, the bin d holding the
// remaining-th largest key (count above d < remaining <= count from d up) and
// stores d and the rank left inside it in sm.bi[0], sm.bi[1]. Lane l owns
// bins 8l..8l+7.
__device__ __forceinline__ void pick_bin(Scratch& sm, const unsigned* hist, int remaining) {
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    unsigned c[8], s = 0;
#pragma unroll
    for (int q = 0; q < 8; q++) {
        c[q] = hist[lane * 8 + q];
        s += c[q];
    }
    unsigned incl = s;  // keys in bins of this lane and the lanes above
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        unsigned y = __shfl_down_sync(0xffffffffu, incl, o);
        if (lane + o < 32) incl += y;
    }
    const unsigned above = incl - s, rem = (unsigned)remaining;
    if (above < rem && rem <= incl) {
        unsigned acc = above;
        int d = lane * 8;
#pragma unroll
        for (int q = 7; q >= 0; q--) {
            if (acc + c[q] >= rem) {
                d = lane * 8 + q;
                break;
            }
            acc += c[q];
        }
        sm.bi[0] = d;
        sm.bi[1] = (int)(rem - acc);
    }
}

// hist_add counts one key into bin of hist (-1: none); every lane of the
// warp calls it. Keys share their top bits, so most land in a few bins:
// lanes with the same bin add once per warp (match_any) instead of contending.
__device__ __forceinline__ void hist_add(unsigned* hist, int bin) {
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (bin >= 0 && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], (unsigned)__popc(peers));
}

// next_digit ends a radix round once every thread has called hist_add: the
// bin holding the remaining-th largest key becomes prefix's next 8 bits and
// remaining the rank left inside it; sm.hist is free again on return.
__device__ __forceinline__ void next_digit(Scratch& sm, uint32_t& prefix, int& remaining) {
    __syncthreads();
    pick_bin(sm, sm.hist, remaining);
    __syncthreads();
    prefix = (prefix << 8) | (uint32_t)sm.bi[0];
    remaining = sm.bi[1];
    __syncthreads();
}

// kth_bound returns a lower bound of the k-th largest (1-based, k <=
// SAMPLE_THREADS) of the block's per-thread keys: two rounds of an 8-bit
// radix select fix its top 16 bits, and the rest are taken as zero. The
// fast path only needs a bound (it collects the ids reaching it and ranks
// them exactly); keys sharing the k-th key's top 16 bits (sign, exponent and
// 7 mantissa bits: within 1% of it) add a few candidates. Both rounds'
// bins are cleared at once: 5 block barriers instead of an exact select's 16.
__device__ uint32_t kth_bound(Scratch& sm, uint32_t mine, int k) {
    if (threadIdx.x < 512) sm.hist[threadIdx.x] = 0;  // both rounds' bins: one clearing barrier
    __syncthreads();
    hist_add(sm.hist, (int)(mine >> 24));
    __syncthreads();
    pick_bin(sm, sm.hist, k);
    __syncthreads();
    const uint32_t top = (uint32_t)sm.bi[0];
    const int rem = sm.bi[1];
    hist_add(sm.hist + 256, (mine >> 24) == top ? (int)((mine >> 16) & 0xff) : -1);
    __syncthreads();  // every thread has read sm.bi before warp 0 writes it again
    pick_bin(sm, sm.hist + 256, rem);
    __syncthreads();
    return ((top << 8) | (uint32_t)sm.bi[0]) << 16;
}

// radix_kth: key of the k-th largest (1-based) key among ids passing in(),
// and how many ids tied at that key are taken (*ties). keyf(i) is id i's key.
template <typename In, typename KeyF>
__device__ uint32_t radix_kth(Scratch& sm, int V, int k, In in, KeyF keyf, int* ties) {
    uint32_t prefix = 0;
    int remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hist[i] = 0;
        __syncthreads();
        for (int base = 0; base < V; base += blockDim.x) {
            int i = base + threadIdx.x;
            int bin = -1;
            if (i < V && in(i)) {
                uint32_t key = keyf(i);
                if (shift == 24 || (key >> (shift + 8)) == prefix) bin = (key >> shift) & 0xff;
            }
            hist_add(sm.hist, bin);
        }
        next_digit(sm, prefix, remaining);
    }
    *ties = remaining;
    return prefix;
}

// mark_ids fills the bitmap out with the ids passing above(i, key) plus, of
// the ids passing tie(i, key), the first `ties` in id order. Tiles of 1024
// consecutive ids keep id order; bits are written a warp word at a time.
template <typename KeyF, typename Above, typename Tie>
__device__ void mark_ids(Scratch& sm, uint32_t* out, int V, KeyF keyf, Above above, Tie tie, int ties, bool need_rank) {
    int taken = 0;
    for (int base = 0; base < V; base += SAMPLE_THREADS) {
        int i = base + threadIdx.x;
        bool in = false, t = false;
        if (i < V) {
            uint32_t key = keyf(i);
            in = above(i, key);
            t = !in && tie(i, key);
        }
        if (need_rank) {  // uniform branch: only when some tied ids are left out
            int total;
            int before = block_scan_int(sm, t ? 1 : 0, &total);
            if (t && taken + before < ties) in = true;
            taken += total;
        } else if (t) {
            in = true;
        }
        uint32_t word = __ballot_sync(0xffffffffu, in);
        if (threadIdx.x % 32 == 0 && base + threadIdx.x < MAX_V) out[(base + threadIdx.x) >> 5] = word;
    }
    __syncthreads();
}

// fast_top_k: the exact top K (<= COMPACT_MAX) non-banned ids into sm.cid /
// sm.cl in ascending id order, given tau <= the K-th largest key; scan(f)
// calls f(i, logit) for (at least) every id whose key reaches tau. Returns
// false (nothing written) when more than FAST_CAP ids reach tau, or (tau
// not a bound after all) fewer than K.
template <typename Scan>
__device__ bool fast_top_k(Scratch& sm, Scan scan, int banned, int K, uint32_t tau, float m, double T) {
    if (threadIdx.x == 0) sm.ncand = 0;
    __syncthreads();
    // key >= tau as a float compare, one instruction an id: float_key is
    // monotonic and tau's low 16 bits are clear, so tau_f is a float whose
    // key is tau (never -0), not NaN once tau is above -inf's key; at or
    // below it every id reaches tau.
    const bool all = tau <= float_key(NEG_INF);
    const float tau_f = key_float(tau);
    scan([&](int i, float v) {
        if ((all || v >= tau_f) && i != banned) {
            const uint32_t key = float_key(finite_or_neginf(v));
            int p = atomicAdd(&sm.ncand, 1);
            if (p < FAST_CAP) sm.u.pack[p] = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)i);
        }
    });
    __syncthreads();
    const int n = sm.ncand;
    if (n > FAST_CAP || n < K) return false;  // uniform: every thread read the same count
    // Rank = packs above this one: ids ordered before it by (key desc, id
    // asc), one 64-bit compare each. The top K leave their pack's halves in
    // their rank's slots of top_lo / top_key (the general path's bitmap,
    // unused here), so that placing them in id order takes K independent
    // loads each: through an index into the packs, the placement was two
    // dependent loads a step (docs/cuda.md).
    uint32_t* top_lo = sm.cand;
    uint32_t* top_key = sm.cand + COMPACT_MAX;
#pragma unroll
    for (int s = 0; s < FAST_CAP / SAMPLE_THREADS; s++) {
        const int j = threadIdx.x + s * SAMPLE_THREADS;
        if (j < n) {
            const unsigned long long pj = sm.u.pack[j];
            int rank = 0;
#pragma unroll 8
            for (int q = 0; q < n; q++) rank += sm.u.pack[q] > pj ? 1 : 0;
            if (rank < K) top_lo[rank] = (uint32_t)pj, top_key[rank] = (uint32_t)(pj >> 32);
        }
    }
    __syncthreads();
    // Position among the top K in ascending id order (a larger pack's low
    // word, ~id, is larger for a lower id).
    if (threadIdx.x < K) {
        const uint32_t nj = top_lo[threadIdx.x];
        int pos = 0;
#pragma unroll 8
        for (int q = 0; q < K; q++) pos += top_lo[q] > nj ? 1 : 0;
        const float l = key_float(top_key[threadIdx.x]);
        sm.cid[pos] = (int)(0xffffffffu - nj);
        sm.cl[pos] = l;
        // Rule 3 here, K threads at once, rather than in the draw's one warp
        // (2.7 us there at batch 128: float64 exp and division on one warp).
        sm.cw[pos] = weight(l, m, T);
    }
    __syncthreads();
    return true;
}

// draw_compact_warp runs rules 3-5 on n <= 64 compacted candidates (sm.cid /
// sm.cl, ascending id, with rule 3's weights in sm.cw) in warp 0 alone, lane
// l holding candidates l and l + 32: the usual top_k (50) needs no block
// barrier after compaction. u is the request's coin. Returns the drawn id,
// or -1 (no draw: the argmax).
__device__ int draw_compact_warp(Scratch& sm, int n, float P, double u) {
    const int lane = threadIdx.x;
    const bool in0 = lane < n, in1 = lane + 32 < n;
    const float w0 = in0 ? sm.cw[lane] : 0.f, w1 = in1 ? sm.cw[lane + 32] : 0.f;
    double Z = (double)w0 + (double)w1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) Z += __shfl_xor_sync(0xffffffffu, Z, o);
    __syncwarp();
    if (!(Z > 0.0 && Z <= 1.7976931348623157e308)) return -1;
    // Rule 4: a candidate survives iff the weight ranked strictly above it
    // (weight desc, position asc) is < need.
    bool k0 = in0, k1 = in1;
    if (P < 1.f) {
        const double need = (double)P * Z;
        double a0 = 0.0, a1 = 0.0;
#pragma unroll 8
        for (int k = 0; k < n; k++) {
            const float wk = sm.cw[k];
            if (wk > w0 || (wk == w0 && k < lane)) a0 += (double)wk;
            if (wk > w1 || (wk == w1 && k < lane + 32)) a1 += (double)wk;
        }
        k0 = k0 && a0 < need, k1 = k1 && a1 < need;
    }
    // Rule 5: the lowest kept position whose running sum in id order
    // exceeds u * S; else the highest kept one with weight.
    const double v0 = k0 ? (double)w0 : 0.0, v1 = k1 ? (double)w1 : 0.0;
    double c0 = v0, c1 = v1;  // inclusive prefix sums over lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const double y0 = __shfl_up_sync(0xffffffffu, c0, o), y1 = __shfl_up_sync(0xffffffffu, c1, o);
        if (lane >= o) c0 += y0, c1 += y1;
    }
    const double S0 = __shfl_sync(0xffffffffu, c0, 31);
    c1 += S0;
    const double target = u * __shfl_sync(0xffffffffu, c1, 31);
    const unsigned hit0 = __ballot_sync(0xffffffffu, v0 > 0.0 && c0 > target);
    const unsigned hit1 = __ballot_sync(0xffffffffu, v1 > 0.0 && c1 > target);
    const unsigned has0 = __ballot_sync(0xffffffffu, v0 > 0.0), has1 = __ballot_sync(0xffffffffu, v1 > 0.0);
    int j = -1;
    if (hit0) j = __ffs(hit0) - 1;
    else if (hit1) j = 32 + __ffs(hit1) - 1;
    else if (has1) j = 32 + 31 - __clz(has1);
    else if (has0) j = 31 - __clz(has0);
    return j >= 0 ? sm.cid[j] : -1;
}

// draw_all is rules 3-5 where every id but the banned one is a candidate
// and top-p keeps them all (top_k off, top_p 1, a vocabulary of more than
// COMPACT_MAX ids): the draw over the whole row, with one weight an id in
// one pass instead of the general path's bitmap, two sums and a block-wide
// scan per SAMPLE_THREADS ids. Ids go in spans of DRAW_SPAN; warp w sums
// spans w, w + NWARPS, ... (32 ids a round, a lane an id, a quarter of a
// span's loads in flight at once: more spilled at 64 registers); a block
// scan of the span sums gives S and each span's sum before it; one warp
// walks the lowest span whose running sum passes u * S again, 32 ids at a
// time, with a warp scan. The order of the float64 sums differs from the
// reference's running sum, as the general path's does. Returns the drawn
// id (in every thread), or -1 where S is 0 or not finite.
#define DRAW_SPAN 512
static_assert(MAX_V / DRAW_SPAN <= SAMPLE_THREADS, "draw_all scans one span sum a thread");
static_assert(MAX_V / DRAW_SPAN <= FAST_CAP, "draw_all keeps the span sums in Scratch::u.pack");
template <typename E>
__device__ __forceinline__ int draw_all(Scratch& sm, const logit_row<E>& x, int V, int banned, float m, double T, double u) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int nspan = (V + DRAW_SPAN - 1) / DRAW_SPAN;
    auto w_at = [&](int i, float l) { return i < V && i != banned ? weight(finite_or_neginf(l), m, T) : 0.f; };
    if (threadIdx.x == 0) sm.bi[0] = NO_ID, sm.bi[1] = -1;
    for (int sp = warp; sp < nspan; sp += NWARPS) {
        double sum = 0.0;
#pragma unroll 1
        for (int q = 0; q < 4; q++) {
            const int base = sp * DRAW_SPAN + q * (DRAW_SPAN / 4) + lane;
            float l[DRAW_SPAN / 128];
#pragma unroll
            for (int k = 0; k < DRAW_SPAN / 128; k++) l[k] = base + 32 * k < V ? x.at(base + 32 * k) : 0.f;
#pragma unroll
            for (int k = 0; k < DRAW_SPAN / 128; k++) sum += (double)w_at(base + 32 * k, l[k]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) sm.u.pack[sp] = (unsigned long long)__double_as_longlong(sum);
    }
    __syncthreads();
    const double mine = threadIdx.x < nspan ? __longlong_as_double((long long)sm.u.pack[threadIdx.x]) : 0.0;
    double S;
    const double before = block_scan_double(sm, mine, &S);
    if (!(S > 0.0 && S <= 1.7976931348623157e308)) return -1;
    double target = u * S;
    if (mine > 0.0 && before + mine > target) atomicMin(&sm.bi[0], (int)threadIdx.x);
    if (mine > 0.0) atomicMax(&sm.bi[1], (int)threadIdx.x);
    __syncthreads();
    // The lowest span whose running sum passes the target; if rounding put
    // the target past every span, the last id of positive weight (the
    // reference's fallback): the last positive span walked with no target.
    int sp = sm.bi[0];
    if (sp == NO_ID) sp = sm.bi[1], target = -(double)NEG_INF;
    if (threadIdx.x == sp) sm.bd[0] = before;
    __syncthreads();
    if (warp == 0) {
        double run = sm.bd[0];
        int found = -1, lastpos = -1;
        for (int k = 0; k < DRAW_SPAN / 32 && found < 0; k++) {
            const int i = sp * DRAW_SPAN + 32 * k + lane;
            const float w = w_at(i, i < V ? x.at(i) : 0.f);
            double incl = (double)w;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const double y = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += y;
            }
            const unsigned hit = __ballot_sync(0xffffffffu, w > 0.f && run + incl > target);
            const unsigned pos = __ballot_sync(0xffffffffu, w > 0.f);
            if (hit) found = sp * DRAW_SPAN + 32 * k + __ffs(hit) - 1;
            if (pos) lastpos = sp * DRAW_SPAN + 32 * k + 31 - __clz(pos);
            run += __shfl_sync(0xffffffffu, incl, 31);
        }
        // Rounding put the crossing past the span's own sum: its last id.
        if (lane == 0) sm.bi[2] = found >= 0 ? found : lastpos;
    }
    __syncthreads();
    const int token = sm.bi[2];
    __syncthreads();
    return token;
}

// Greedy rows over bf16 logits. Rounding a logit to bf16 moves it by up to
// half a unit in its last place (0.016 at 4.0), and the two best of 151,936
// logits are often closer than that: the bf16 argmax would then differ
// from the fp32 one. dot_refine gives the sampler the LM head's operands
// (the row's final-norm activations h and the tied embedding w, bf16, C
// columns), so that a greedy row recomputes in fp32 the logit of every id
// within two units of the bf16 maximum (all that can hold the fp32
// maximum) and takes the largest, ties to the lower id. no_refine (fp32 and
// fp16 rows, or h null) keeps the argmax as read.
struct no_refine {
    __device__ __forceinline__ bool on() const { return false; }
    __device__ __forceinline__ float dot(int, int, int) const { return 0.f; }
};
struct dot_refine {
    const bf16_t* h;
    const bf16_t* w;
    int C;
    __device__ __forceinline__ bool on() const { return h != nullptr; }
    // dot is row r's logit of id in fp32, summed by the calling warp.
    __device__ __forceinline__ float dot(int r, int id, int lane) const {
        const bf16_t* a = h + (size_t)r * C;
        const bf16_t* b = w + (size_t)id * C;
        float s = 0.f;
        for (int k = lane; k < C; k += 32) s = fmaf(bf2f(a[k]), bf2f(b[k]), s);
        return warp_sum(s);
    }
};

// refine_greedy returns (in thread 0) the id of the largest fp32 logit
// among the ids whose row value reaches m - 2 ulp(m), m the largest one
// read, or -1 where there is nothing to refine (m not finite, or more than
// COMPACT_MAX ids reach it: massive ties keep the argmax as read). Every
// thread calls it.
template <typename E, typename R>
__device__ int refine_greedy(Scratch& sm, const logit_row<E>& x, int V, bool vec4, int banned, float m, const R& refine, int r) {
    if (!(fabsf(m) <= 3.4e38f)) return -1;  // -inf (no candidate), +inf or NaN: the argmax stands
    const float ulp = fmaxf(__uint_as_float(__float_as_uint(fabsf(m)) & 0x7f800000u) * 0x1p-7f, 0x1p-126f);
    const float th = m - 2.f * ulp;
    if (threadIdx.x == 0) sm.ncand = 0;
    __syncthreads();
    scan_row(x, V, vec4, [&](int i, float v) {
        if (v >= th) {
            const int p = atomicAdd(&sm.ncand, 1);
            if (p < COMPACT_MAX) sm.cid[p] = i;
        }
    }, banned);
    __syncthreads();
    const int n = sm.ncand;
    if (n > COMPACT_MAX) return -1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int j = warp; j < n; j += NWARPS) {
        const float d = refine.dot(r, sm.cid[j], lane);
        if (lane == 0) sm.cl[j] = d;
    }
    __syncthreads();
    int best = -1;
    if (threadIdx.x == 0) {
        float bv = NEG_INF;
        for (int j = 0; j < n; j++) {
            const float v = finite_or_neginf(sm.cl[j]);
            const int id = sm.cid[j];
            if (best < 0 || v > bv || (v == bv && id < best)) bv = v, best = id;
        }
    }
    __syncthreads();
    return best;
}

// host_out: the address of (M) (id, logprob) pairs, the step's mapped host
// memory, so no copy to the host follows the sampler: the sampled id and,
// when want_lp[r], its log-softmax at temperature 1 over the raw logits (else
// 0). out_tok (M): the ids again, on the device, for the next step's tokens.
// logits (M, ld) of E (float, half_t or bf16_logit: logit_row), V valid columns.
// tile_keys (M, ld / 8) or null: each 8-column tile's largest float_key, as
// lmhead.cu writes them beside fp32 logits.
template <typename E, typename R>
__device__ __forceinline__ void sample_rows_impl(int* out_tok, const E* logits, int ld, int V, const float* temperature,
                                                 const int* top_k, const float* top_p, const uint32_t* seed_lo,
                                                 const uint32_t* seed_hi, const int* index, const int* banned_in,
                                                 const int* want_lp, const uint32_t* tile_keys,
                                                 const unsigned long long* host_out, const R& refine) {
    grid_dep_launch();
    grid_dep_wait();
#ifdef SAMPLE_DYNAMIC_SMEM
    // Bitmaps of a large vocabulary exceed the 48 KB of static shared memory.
    extern __shared__ __align__(16) unsigned char sample_smem[];
    Scratch& sm = *reinterpret_cast<Scratch*>(sample_smem);
#else
    __shared__ Scratch sm;
#endif
    const int r = blockIdx.x;
    const logit_row<E> x{logits + (size_t)r * ld};
    const bool vec4 = (ld % 4) == 0 && (reinterpret_cast<size_t>(logits) % 16) == 0;
    int banned = banned_in[r];
    if (banned >= V || V == 1) banned = -1;
    const float T = temperature[r];
    const int K = top_k[r];
    const float P = top_p[r];
    const uint64_t seed = ((uint64_t)seed_hi[r] << 32) | seed_lo[r];
    const int draw_index = index[r];  // read now: at the draw its load was on the one-warp tail

    // Rule 1 (and the fallback): argmax, ties to the lowest id, never banned.
    // A candidate is packed as (key, ~position) so the largest pack is the
    // largest logit at the lowest id. With the LM head's tile maxima (keys:
    // the float_key maximum of each 8-column tile, lmhead.cu) a thread reads
    // its tiles' keys instead of their logits; a tile whose maximum may come
    // from a non-candidate (the banned id, ids past V) is read id by id, and
    // the winning tile's id is looked up in its 8 logits at the end.
    const bool tiled = SAMPLE_TILED && tile_keys != nullptr && vec4 && ld % 8 == 0 && V <= MAX_V;
    const uint32_t* tk = tiled ? tile_keys + (size_t)r * (ld / 8) : nullptr;
    auto dirty = [&](int t) { return 8 * t + 8 > V || (banned >= 0 && banned / 8 == t); };
    unsigned long long bestp = 0ull;  // 0: none yet (every real key is > 0)
    auto take = [&](uint32_t key, int pos) {
        const unsigned long long p = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)pos);
        bestp = p > bestp ? p : bestp;
    };
    if (tiled) {
        uint32_t tkey[TILES_PER_THREAD];  // this thread's tile keys, all requested at once
#pragma unroll
        for (int j = 0; j < TILES_PER_THREAD; j++) {
            const int t = threadIdx.x + j * SAMPLE_THREADS;
            tkey[j] = 8 * t < V ? tk[t] : 0u;
        }
#pragma unroll
        for (int j = 0; j < TILES_PER_THREAD; j++) {
            const int t = threadIdx.x + j * SAMPLE_THREADS;
            if (8 * t >= V) continue;
            if (!dirty(t)) {
                take(tkey[j], 8 * t);
                continue;
            }
            for (int i = 8 * t; i < min(V, 8 * t + 8); i++)
                if (i != banned) take(float_key(finite_or_neginf(x.at(i))), i);
        }
    } else {
        // Float compares here, the packs once a thread: ~3 instructions an
        // id instead of ~14 (docs/cuda.md). Ids come in
        // ascending order, so a strict > keeps the lowest of equal maxima;
        // -0 == +0, and NaN never wins.
        float best = NEG_INF;
        int at = NO_ID;
        scan_row(x, V, vec4, [&](int i, float v) {
            if (v > best) best = v, at = i;
        }, banned);
        if (at != NO_ID)
            take(float_key(best), at);
        else  // every id of this thread is -inf or NaN: the lowest one, as the packs take it
            scan_row(x, V, vec4, [&](int i, float v) { take(float_key(finite_or_neginf(v)), i); }, banned);
    }
    const uint32_t my_key = (uint32_t)(bestp >> 32);  // this thread's largest key (0: none)
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long y = __shfl_xor_sync(0xffffffffu, bestp, o);
        bestp = y > bestp ? y : bestp;
    }
    if (threadIdx.x % 32 == 0) sm.uval[threadIdx.x / 32] = bestp;
    __syncthreads();
    // Thread 0 (which writes the result) keeps the winning pack; which id of
    // a tile holds the maximum is looked up only if the argmax is the
    // answer (greedy, or no draw), off the sampling path's critical path.
    unsigned long long best_pack = 0ull;
    if (threadIdx.x < 32) {  // NWARPS == 32: a lane per warp's best
        best_pack = sm.uval[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) {
            const unsigned long long y = __shfl_xor_sync(0xffffffffu, best_pack, o);
            best_pack = y > best_pack ? y : best_pack;
        }
        if (threadIdx.x == 0) sm.bd[1] = best_pack != 0ull ? key_float((uint32_t)(best_pack >> 32)) : NEG_INF;
    }
    __syncthreads();
    const float max_logit = (float)sm.bd[1];  // largest non-banned logit = m of rule 3
    __syncthreads();
    int token = -1;  // -1: no draw (yet); the argmax then

    const bool greedy = T <= 0.f || K == 1;
    if (!greedy && max_logit != NEG_INF && V <= MAX_V) {
        const int ncand_all = V - (banned >= 0 ? 1 : 0);
        const bool use_k = K > 0 && K < ncand_all;
        const double Td = (double)T;
        // Rule 2: candidates in sm.cid/sm.cl with rule 3's weights in sm.cw
        // (compact, n of them) or in the bitmap sm.cand.
        bool compact = false;
        int n = 0;
        if (use_k && K <= COMPACT_MAX) {
            const uint32_t tau = kth_bound(sm, my_key, K);
            // The ids reaching tau: in tiled rows only the tiles whose
            // maximum reaches it (about K of them) are read; 16-bit rows are
            // tested 8 ids at a time (scan_reaching). A bound at or below
            // -inf's key takes every id, NaN too: the plain scan.
            const bool filter = sizeof(E) == 2 && ld % 8 == 0 && vec4 && tau > float_key(NEG_INF);
            auto scan = [&](auto f) {
                if (!tiled) {
                    if (filter)
                        scan_reaching(x, V, key_float(tau), f);
                    else
                        scan_row(x, V, vec4, f);
                    return;
                }
#pragma unroll
                for (int j = 0; j < TILES_PER_THREAD; j++) {
                    const int t = threadIdx.x + j * SAMPLE_THREADS;
                    // tk[t] again, from L1: keeping the keys in registers
                    // through kth_bound made the kernel spill.
                    if (8 * t >= V || (!dirty(t) && tk[t] < tau)) continue;
                    float v[8];
                    x.oct(t, v);
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        if (8 * t + e < V) f(8 * t + e, v[e]);
                }
            };
            if (fast_top_k(sm, scan, banned, K, tau, max_logit, Td)) compact = true, n = K;
        }
        auto logit_key = [&](int i) { return float_key(finite_or_neginf(x.at(i))); };
        const bool keep_all = !use_k && !(P < 1.f) && ncand_all > COMPACT_MAX;
        if (!compact && !keep_all) {
            int ncand = ncand_all;
            if (use_k) {
                int ties;
                auto not_banned = [&](int i) { return i != banned; };
                uint32_t tk = radix_kth(sm, V, K, not_banned, logit_key, &ties);
                int tie_total = 0;
                for (int i = threadIdx.x; i < V; i += blockDim.x)
                    if (i != banned && logit_key(i) == tk) tie_total++;
                tie_total = block_sum_int(sm, tie_total);
                mark_ids(
                    sm, sm.cand, V, logit_key, [&](int i, uint32_t key) { return i != banned && key > tk; },
                    [&](int i, uint32_t key) { return i != banned && key == tk; }, ties, tie_total > ties);
                ncand = K;
            } else {
                mark_ids(
                    sm, sm.cand, V, logit_key, [&](int i, uint32_t) { return i != banned; },
                    [&](int, uint32_t) { return false; }, 0, false);
            }
            if (ncand <= COMPACT_MAX) {
                // Compact candidates in id order: each thread owns consecutive bitmap words.
                const int words = (V + 31) / 32;
                const int per = (words + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
                const int w0 = min(words, threadIdx.x * per), w1 = min(words, w0 + per);
                int mine = 0;
                for (int w = w0; w < w1; w++) mine += __popc(sm.cand[w]);
                int pos = block_scan_int(sm, mine, &n);
                for (int w = w0; w < w1; w++) {
                    uint32_t bits = sm.cand[w];
                    while (bits) {
                        int b = __ffs(bits) - 1;
                        bits &= bits - 1;
                        int id = w * 32 + b;
                        sm.cid[pos] = id;
                        sm.cl[pos] = finite_or_neginf(x.at(id));
                        sm.cw[pos] = weight(sm.cl[pos], max_logit, Td);
                        pos++;
                    }
                }
                __syncthreads();
                compact = true;
            }
        }
        if (keep_all) {
            token = draw_all(sm, x, V, banned, max_logit, Td, coin(seed, draw_index));
        } else if (compact && n <= 64) {
            if (threadIdx.x < 32) token = draw_compact_warp(sm, n, P, coin(seed, draw_index));
        } else if (compact) {
            // Rule 3's sum (the weights are in sm.cw).
            double zl = 0.0;
            for (int j = threadIdx.x; j < n; j += blockDim.x) zl += (double)sm.cw[j];
            double Z;
            block_scan_double(sm, zl, &Z);
            if (Z > 0.0 && Z <= 1.7976931348623157e308) {
                // Rule 4: j survives iff the weight ranked strictly above it is < need.
                const int j = threadIdx.x;  // n <= COMPACT_MAX == SAMPLE_THREADS
                bool kept = j < n;
                if (kept && P < 1.f) {
                    const double need = (double)P * Z;
                    const float wj = sm.cw[j];
                    double above = 0.0;
                    for (int k = 0; k < n; k++) {
                        float wk = sm.cw[k];
                        if (wk > wj || (wk == wj && k < j)) above += (double)wk;
                    }
                    kept = above < need;
                }
                // Rule 5: running sums in id order.
                double wk = kept ? (double)sm.cw[j] : 0.0;
                double S;
                double before = block_scan_double(sm, wk, &S);
                const double target = coin(seed, draw_index) * S;
                if (threadIdx.x == 0) sm.bi[0] = NO_ID, sm.bi[1] = -1;
                __syncthreads();
                if (kept && wk > 0.0) {
                    if (before + wk > target) atomicMin(&sm.bi[0], j);
                    atomicMax(&sm.bi[1], j);
                }
                __syncthreads();
                int jj = sm.bi[0] != NO_ID ? sm.bi[0] : sm.bi[1];
                if (jj >= 0) token = sm.cid[jj];
                __syncthreads();
            }
        } else {
            // General path: many candidates (top_k off or large). Weights are
            // recomputed from the logits where needed; keys order weights.
            auto w_of = [&](int i) { return weight(finite_or_neginf(x.at(i)), max_logit, Td); };
            auto w_key = [&](int i) { return float_key(w_of(i)); };
            double zl = 0.0;
            for (int i = threadIdx.x; i < V; i += blockDim.x)
                if (bit(sm.cand, i)) zl += (double)w_of(i);
            double Z;
            block_scan_double(sm, zl, &Z);
            if (Z > 0.0 && Z <= 1.7976931348623157e308) {
                bool use_p = false;
                if (P < 1.f) {
                    // Radix search over weight sums, largest weights first: the
                    // weight at which the running sum reaches need.
                    uint32_t prefix = 0;
                    double rem = (double)P * Z;
                    bool found = true;
                    for (int shift = 24; shift >= 0; shift -= 8) {
                        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hmass[i] = 0.0;
                        __syncthreads();
                        for (int i = threadIdx.x; i < V; i += blockDim.x) {
                            if (!bit(sm.cand, i)) continue;
                            float w = w_of(i);
                            uint32_t key = float_key(w);
                            if (shift < 24 && (key >> (shift + 8)) != prefix) continue;
                            atomicAdd(&sm.hmass[(key >> shift) & 0xff], (double)w);
                        }
                        __syncthreads();
                        if (threadIdx.x == 0) {
                            int d = 255;
                            double rr = rem;
                            bool hit = false;
                            for (; d >= 0; d--) {
                                if (sm.hmass[d] > 0.0 && sm.hmass[d] >= rr) {
                                    hit = true;
                                    break;
                                }
                                rr -= sm.hmass[d];
                            }
                            if (!hit) d = 0;
                            sm.bi[0] = d;
                            sm.bi[2] = hit;
                            sm.bd[0] = rr;
                        }
                        __syncthreads();
                        prefix = (prefix << 8) | (uint32_t)sm.bi[0];
                        rem = sm.bd[0];
                        found = found && sm.bi[2];
                        __syncthreads();
                    }
                    if (found) {
                        const uint32_t tp = prefix;
                        const double wt = (double)key_float(tp);
                        int ties = wt > 0.0 ? (int)ceil(rem / wt) : 1;
                        ties = max(ties, 1);
                        int tie_total = 0;
                        for (int i = threadIdx.x; i < V; i += blockDim.x)
                            if (bit(sm.cand, i) && w_key(i) == tp) tie_total++;
                        tie_total = block_sum_int(sm, tie_total);
                        mark_ids(
                            sm, sm.u.keep, V, w_key, [&](int i, uint32_t key) { return bit(sm.cand, i) && key > tp; },
                            [&](int i, uint32_t key) { return bit(sm.cand, i) && key == tp; }, ties, tie_total > ties);
                        use_p = true;
                    }
                }
                const uint32_t* kept = use_p ? sm.u.keep : sm.cand;
                // Rule 5 tile by tile: the running sum carries across tiles.
                double S = 0.0;
                for (int i = threadIdx.x; i < V; i += blockDim.x)
                    if (bit(kept, i)) S += (double)w_of(i);
                block_scan_double(sm, S, &S);
                const double target = coin(seed, draw_index) * S;
                double run = 0.0;
                int found_id = -1, last_id = -1;
                for (int base = 0; base < V && found_id < 0; base += SAMPLE_THREADS) {
                    int i = base + threadIdx.x;
                    double w = (i < V && bit(kept, i)) ? (double)w_of(i) : 0.0;
                    double tile;
                    double before = run + block_scan_double(sm, w, &tile);
                    if (threadIdx.x == 0) sm.bi[0] = NO_ID, sm.bi[1] = -1;
                    __syncthreads();
                    if (w > 0.0) {
                        if (before + w > target) atomicMin(&sm.bi[0], i);
                        atomicMax(&sm.bi[1], i);
                    }
                    __syncthreads();
                    if (sm.bi[0] != NO_ID) found_id = sm.bi[0];
                    if (sm.bi[1] >= 0) last_id = sm.bi[1];
                    run += tile;
                    __syncthreads();
                }
                token = found_id >= 0 ? found_id : (last_id >= 0 ? last_id : token);
            }
        }
    }

    if (greedy && refine.on()) token = refine_greedy(sm, x, V, vec4, banned, max_logit, refine, r);
    if (threadIdx.x == 0 && token < 0) {  // rule 1, or the fallback: the argmax
        token = NO_ID;
        if (best_pack != 0ull) {
            const uint32_t key = (uint32_t)(best_pack >> 32);
            token = (int)(0xffffffffu - (uint32_t)best_pack);
            if (tiled && !dirty(token / 8)) {  // a tile: its lowest id holding the key
                float v[8];
                x.oct(token / 8, v);
#pragma unroll
                for (int e = 7; e >= 0; e--)
                    if (float_key(finite_or_neginf(v[e])) == key) token = (token & ~7) + e;
            }
        }
    }
    float lp = 0.f;
    if (want_lp[r]) {  // log-softmax at temperature 1 over all raw logits
        float ml = NEG_INF;
        scan_row(x, V, vec4, [&](int, float v) { ml = fmaxf(ml, finite_or_neginf(v)); });
        ml = block_max(sm, ml);
        double s = 0.0;
        scan_row(x, V, vec4, [&](int, float v) { s += exp((double)finite_or_neginf(v) - (double)ml); });
        double tot;
        block_scan_double(sm, s, &tot);
        if (threadIdx.x == 0) lp = (float)((double)x.at(token) - (double)ml - log(tot));
    }
    if (threadIdx.x == 0) {
        out_tok[r] = token;
        reinterpret_cast<int2*>(*host_out)[r] = make_int2(token, __float_as_int(lp));
    }
}

// SAMPLE_ROWS_KERNEL defines a sampler kernel (extern "C", so the loader
// finds it by name) over logits of type E.
#define SAMPLE_ROWS_KERNEL(name, E)                                                                                  \
    extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)                                                     \
        name(int* out_tok, const E* logits, int ld, int V, const float* temperature, const int* top_k,               \
             const float* top_p, const uint32_t* seed_lo, const uint32_t* seed_hi, const int* index,                 \
             const int* banned_in, const int* want_lp, const uint32_t* tile_keys, const unsigned long long* host_out) { \
        sample_rows_impl(out_tok, logits, ld, V, temperature, top_k, top_p, seed_lo, seed_hi, index, banned_in,     \
                         want_lp, tile_keys, host_out, no_refine{});                                                 \
    }

// SAMPLE_ROWS_KERNEL_BF defines the sampler over bf16 logits, whose greedy
// rows recompute their near-maximal logits in fp32 from h (M, C) and w
// (the LM head's rows, C columns): dot_refine. h null turns that off.
#define SAMPLE_ROWS_KERNEL_BF(name)                                                                                  \
    extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)                                                     \
        name(int* out_tok, const bf16_logit* logits, int ld, int V, const float* temperature, const int* top_k,      \
             const float* top_p, const uint32_t* seed_lo, const uint32_t* seed_hi, const int* index,                 \
             const int* banned_in, const int* want_lp, const uint32_t* tile_keys, const unsigned long long* host_out, \
             const bf16_t* h, const bf16_t* w, int C) {                                                              \
        sample_rows_impl(out_tok, logits, ld, V, temperature, top_k, top_p, seed_lo, seed_hi, index, banned_in,     \
                         want_lp, tile_keys, host_out, dot_refine{h, w, C});                                         \
    }

