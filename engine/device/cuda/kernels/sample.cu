// sample.cu: the GPU sampler, one block per sampled row. It follows
// engine/sample's rule (sampler.go) step by step, so a seeded request draws
// the same token on either device up to float64 rounding at exact cut points:
//  1. greedy (temperature <= 0 or top_k == 1): largest logit, ties to the lowest id;
//  2. candidates: every id but the banned one, or the top_k largest logits
//     (ties to the lower id);
//  3. w = exp((l - m) / T) in float64, m the largest candidate logit;
//  4. top-p: keep the shortest (w desc, id asc) prefix with sum >= top_p * Z;
//  5. draw: u = Coin(seed, index); the lowest kept id whose running sum in
//     ascending id order exceeds u * S.
// The top_k cut is a radix search over the logits' bits (4 passes of 8 bits,
// no sort). Candidates are then marked in a shared-memory bitmap; when there
// are at most COMPACT_MAX of them (the usual top_k) they are compacted, in id
// order, into shared memory and rules 3-5 run there. Otherwise a second radix
// search over weight sums finds the top-p cut and the draw scans the
// vocabulary tile by tile. Loops over the vocabulary are strided (coalesced).
#include "common.cuh"

#define SAMPLE_THREADS 1024
#define NWARPS (SAMPLE_THREADS / 32)
#define MAX_V 65536        // bitmap capacity; GPT-2's vocabulary is 50257
#define COMPACT_MAX 1024   // candidates handled in shared memory

__device__ __forceinline__ float finite_or_neginf(float x) { return x != x ? NEG_INF : x; }

// float_key orders floats as unsigned integers (larger float -> larger key).
__device__ __forceinline__ uint32_t float_key(float x) {
    uint32_t b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_float(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
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
    int ival[NWARPS];
    unsigned int hist[256];
    double hmass[256];
    int bi[4];
    double bd[2];
    uint32_t cand[MAX_V / 32];  // rule 2 candidates
    uint32_t keep[MAX_V / 32];  // rule 4 survivors (general path)
    int cid[COMPACT_MAX];       // compacted candidates, ascending id
    float cl[COMPACT_MAX];
    double cw[COMPACT_MAX];
};

__device__ __forceinline__ bool bit(const uint32_t* m, int i) { return (m[i >> 5] >> (i & 31)) & 1u; }

// block_scan_int returns the sum of v over lower threads; *total the block sum.
__device__ int block_scan_int(Scratch& sm, int v, int* total) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) sm.icount[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = sm.icount[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        sm.icount[lane] = w;
    }
    __syncthreads();
    int before = (warp > 0 ? sm.icount[warp - 1] : 0) + x - v;
    *total = sm.icount[NWARPS - 1];
    __syncthreads();
    return before;
}

__device__ double block_scan_double(Scratch& sm, double v, double* total) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    double x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        double y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) sm.dsum[warp] = x;
    __syncthreads();
    if (warp == 0) {
        double w = sm.dsum[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            double y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        sm.dsum[lane] = w;
    }
    __syncthreads();
    double before = (warp > 0 ? sm.dsum[warp - 1] : 0.0) + x - v;
    *total = sm.dsum[NWARPS - 1];
    __syncthreads();
    return before;
}

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

// radix_kth: key of the k-th largest (1-based) logit among ids passing in(),
// and how many ids tied at that key are taken (*ties).
template <typename In>
__device__ uint32_t radix_kth(Scratch& sm, const float* x, int V, int k, In in, int* ties) {
    uint32_t prefix = 0;
    int remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hist[i] = 0;
        __syncthreads();
        // Logits share their top bits, so most ids land in a few bins: lanes
        // with the same bin add once per warp (match_any) instead of contending.
        for (int base = 0; base < V; base += blockDim.x) {
            int i = base + threadIdx.x;
            int bin = -1;
            if (i < V && in(i)) {
                uint32_t key = float_key(finite_or_neginf(x[i]));
                if (shift == 24 || (key >> (shift + 8)) == prefix) bin = (key >> shift) & 0xff;
            }
            unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin >= 0 && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&sm.hist[bin], (unsigned)__popc(peers));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int d = 255;
            for (; d > 0; d--) {
                if ((int)sm.hist[d] >= remaining) break;
                remaining -= sm.hist[d];
            }
            sm.bi[0] = d;
            sm.bi[1] = remaining;
        }
        __syncthreads();
        prefix = (prefix << 8) | (uint32_t)sm.bi[0];
        remaining = sm.bi[1];
        __syncthreads();
    }
    *ties = remaining;
    return prefix;
}

// mark_ids fills the bitmap out with the ids passing above(key) plus, of the
// ids with key == tie_key passing tie(), the first `ties` in id order. Tiles
// of 1024 consecutive ids keep id order; bits are written a warp word at a time.
template <typename Above, typename Tie>
__device__ void mark_ids(Scratch& sm, uint32_t* out, const float* x, int V, Above above, Tie tie, int ties, bool need_rank) {
    int taken = 0;
    for (int base = 0; base < V; base += SAMPLE_THREADS) {
        int i = base + threadIdx.x;
        bool in = false, t = false;
        if (i < V) {
            uint32_t key = float_key(finite_or_neginf(x[i]));
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

// out_tok (M), out_lp (M): sampled id and, when want_lp[r], its log-softmax
// at temperature 1 over the raw logits. logits (M, ld) fp32, V valid columns.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_rows(
    int* out_tok, float* out_lp, const float* logits, int ld, int V, const float* temperature,
    const int* top_k, const float* top_p, const uint32_t* seed_lo, const uint32_t* seed_hi,
    const int* index, const int* banned_in, const int* want_lp) {
    __shared__ Scratch sm;
    const int r = blockIdx.x;
    const float* x = logits + (size_t)r * ld;
    int banned = banned_in[r];
    if (banned >= V || V == 1) banned = -1;
    const float T = temperature[r];
    const int K = top_k[r];
    const float P = top_p[r];
    const uint64_t seed = ((uint64_t)seed_hi[r] << 32) | seed_lo[r];

    // Rule 1 (and the fallback): argmax, ties to the lowest id, never banned.
    float best = NEG_INF;
    int best_id = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        if (i == banned) continue;
        float v = finite_or_neginf(x[i]);
        if (best_id == 0x7fffffff || v > best) best = v, best_id = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
        if (oi != 0x7fffffff && (best_id == 0x7fffffff || ov > best || (ov == best && oi < best_id))) best = ov, best_id = oi;
    }
    if (threadIdx.x % 32 == 0) sm.fval[threadIdx.x / 32] = best, sm.ival[threadIdx.x / 32] = best_id;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < NWARPS; w++) {
            float ov = sm.fval[w];
            int oi = sm.ival[w];
            if (oi != 0x7fffffff && (best_id == 0x7fffffff || ov > best || (ov == best && oi < best_id))) best = ov, best_id = oi;
        }
        sm.bi[3] = best_id;
        sm.bd[1] = best;
    }
    __syncthreads();
    int token = sm.bi[3];
    const float max_logit = (float)sm.bd[1];  // largest non-banned logit = m of rule 3
    __syncthreads();

    const bool greedy = T <= 0.f || K == 1;
    if (!greedy && max_logit != NEG_INF && V <= MAX_V) {
        const int ncand_all = V - (banned >= 0 ? 1 : 0);
        const bool use_k = K > 0 && K < ncand_all;
        auto not_banned = [&](int i) { return i != banned; };
        // Rule 2: the candidate bitmap.
        int ncand = ncand_all;
        if (use_k) {
            int ties;
            uint32_t tk = radix_kth(sm, x, V, K, not_banned, &ties);
            int tie_total = 0;
            for (int i = threadIdx.x; i < V; i += blockDim.x)
                if (i != banned && float_key(finite_or_neginf(x[i])) == tk) tie_total++;
            tie_total = block_sum_int(sm, tie_total);
            mark_ids(
                sm, sm.cand, x, V, [&](int i, uint32_t key) { return i != banned && key > tk; },
                [&](int i, uint32_t key) { return i != banned && key == tk; }, ties, tie_total > ties);
            ncand = K;
        } else {
            mark_ids(
                sm, sm.cand, x, V, [&](int i, uint32_t) { return i != banned; }, [&](int, uint32_t) { return false; }, 0, false);
        }
        const double m = (double)max_logit, invT = 1.0 / (double)T;
        auto wof = [&](float l) {
            double w = exp(((double)l - m) * invT);
            return w != w ? 0.0 : w;
        };
        if (ncand <= COMPACT_MAX) {
            // Compact candidates in id order: each thread owns consecutive bitmap words.
            const int words = (V + 31) / 32;
            const int per = (words + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
            const int w0 = min(words, threadIdx.x * per), w1 = min(words, w0 + per);
            int mine = 0;
            for (int w = w0; w < w1; w++) mine += __popc(sm.cand[w]);
            int n;
            int pos = block_scan_int(sm, mine, &n);
            for (int w = w0; w < w1; w++) {
                uint32_t bits = sm.cand[w];
                while (bits) {
                    int b = __ffs(bits) - 1;
                    bits &= bits - 1;
                    int id = w * 32 + b;
                    sm.cid[pos] = id;
                    sm.cl[pos] = finite_or_neginf(x[id]);
                    pos++;
                }
            }
            __syncthreads();
            // Rule 3.
            double zl = 0.0;
            for (int j = threadIdx.x; j < n; j += blockDim.x) {
                sm.cw[j] = wof(sm.cl[j]);
                zl += sm.cw[j];
            }
            double Z;
            block_scan_double(sm, zl, &Z);
            if (Z > 0.0 && Z <= 1.7976931348623157e308) {
                // Rule 4: j survives iff the weight ranked strictly above it is < need.
                const int j = threadIdx.x;  // n <= COMPACT_MAX == SAMPLE_THREADS
                bool kept = j < n;
                if (kept && P < 1.f) {
                    const double need = (double)P * Z, wj = sm.cw[j];
                    double above = 0.0;
                    for (int k = 0; k < n; k++) {
                        double wk = sm.cw[k];
                        if (wk > wj || (wk == wj && k < j)) above += wk;
                    }
                    kept = above < need;
                }
                // Rule 5: running sums in id order.
                double wk = kept ? sm.cw[j] : 0.0;
                double S;
                double before = block_scan_double(sm, wk, &S);
                const double target = coin(seed, index[r]) * S;
                if (threadIdx.x == 0) sm.bi[0] = 0x7fffffff, sm.bi[1] = -1;
                __syncthreads();
                if (kept && wk > 0.0) {
                    if (before + wk > target) atomicMin(&sm.bi[0], j);
                    atomicMax(&sm.bi[1], j);
                }
                __syncthreads();
                int jj = sm.bi[0] != 0x7fffffff ? sm.bi[0] : sm.bi[1];
                if (jj >= 0) token = sm.cid[jj];
                __syncthreads();
            }
        } else {
            // General path: many candidates (top_k off or large).
            double zl = 0.0;
            for (int i = threadIdx.x; i < V; i += blockDim.x)
                if (bit(sm.cand, i)) zl += wof(finite_or_neginf(x[i]));
            double Z;
            block_scan_double(sm, zl, &Z);
            if (Z > 0.0 && Z <= 1.7976931348623157e308) {
                bool use_p = false;
                if (P < 1.f) {
                    // Radix search over weight sums, largest keys first: the key
                    // at which the running sum reaches need (equal keys = equal w).
                    uint32_t prefix = 0;
                    double rem = (double)P * Z;
                    bool found = true;
                    for (int shift = 24; shift >= 0; shift -= 8) {
                        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hmass[i] = 0.0;
                        __syncthreads();
                        for (int i = threadIdx.x; i < V; i += blockDim.x) {
                            if (!bit(sm.cand, i)) continue;
                            float l = finite_or_neginf(x[i]);
                            uint32_t key = float_key(l);
                            if (shift < 24 && (key >> (shift + 8)) != prefix) continue;
                            atomicAdd(&sm.hmass[(key >> shift) & 0xff], wof(l));
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
                        const double wt = wof(key_float(tp));
                        int ties = wt > 0.0 ? (int)ceil(rem / wt) : 1;
                        ties = max(ties, 1);
                        int tie_total = 0;
                        for (int i = threadIdx.x; i < V; i += blockDim.x)
                            if (bit(sm.cand, i) && float_key(finite_or_neginf(x[i])) == tp) tie_total++;
                        tie_total = block_sum_int(sm, tie_total);
                        mark_ids(
                            sm, sm.keep, x, V, [&](int i, uint32_t key) { return bit(sm.cand, i) && key > tp; },
                            [&](int i, uint32_t key) { return bit(sm.cand, i) && key == tp; }, ties, tie_total > ties);
                        use_p = true;
                    }
                }
                const uint32_t* kept = use_p ? sm.keep : sm.cand;
                // Rule 5 tile by tile: the running sum carries across tiles.
                double S = 0.0;
                for (int i = threadIdx.x; i < V; i += blockDim.x)
                    if (bit(kept, i)) S += wof(finite_or_neginf(x[i]));
                block_scan_double(sm, S, &S);
                const double target = coin(seed, index[r]) * S;
                double run = 0.0;
                int found_id = -1, last_id = -1;
                for (int base = 0; base < V && found_id < 0; base += SAMPLE_THREADS) {
                    int i = base + threadIdx.x;
                    double w = (i < V && bit(kept, i)) ? wof(finite_or_neginf(x[i])) : 0.0;
                    double tile;
                    double before = run + block_scan_double(sm, w, &tile);
                    if (threadIdx.x == 0) sm.bi[0] = 0x7fffffff, sm.bi[1] = -1;
                    __syncthreads();
                    if (w > 0.0) {
                        if (before + w > target) atomicMin(&sm.bi[0], i);
                        atomicMax(&sm.bi[1], i);
                    }
                    __syncthreads();
                    if (sm.bi[0] != 0x7fffffff) found_id = sm.bi[0];
                    if (sm.bi[1] >= 0) last_id = sm.bi[1];
                    run += tile;
                    __syncthreads();
                }
                token = found_id >= 0 ? found_id : (last_id >= 0 ? last_id : token);
            }
        }
    }

    if (want_lp[r]) {  // log-softmax at temperature 1 over all raw logits
        float ml = NEG_INF;
        for (int i = threadIdx.x; i < V; i += blockDim.x) ml = fmaxf(ml, finite_or_neginf(x[i]));
        ml = block_max(sm, ml);
        double s = 0.0;
        for (int i = threadIdx.x; i < V; i += blockDim.x) s += exp((double)finite_or_neginf(x[i]) - (double)ml);
        double tot;
        block_scan_double(sm, s, &tot);
        if (threadIdx.x == 0) out_lp[r] = (float)((double)x[token] - (double)ml - log(tot));
    } else if (threadIdx.x == 0) {
        out_lp[r] = 0.f;
    }
    if (threadIdx.x == 0) out_tok[r] = token;
}
