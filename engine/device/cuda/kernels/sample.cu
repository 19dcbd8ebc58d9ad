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
// Selections use a radix search over the logits' bits (4 passes of 8 bits)
// instead of a sort. Each thread owns a contiguous run of ids, so "ties to
// the lower id" and "ascending id order" become a block-wide prefix scan.
#include "common.cuh"

#define SAMPLE_THREADS 1024
#define NWARPS (SAMPLE_THREADS / 32)

__device__ __forceinline__ float finite_or_neginf(float x) { return x != x ? NEG_INF : x; }

// key orders floats as unsigned integers (larger float -> larger key).
__device__ __forceinline__ uint32_t float_key(float x) {
    uint32_t b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
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
    int bcast_i[4];
    double bcast_d[2];
};

// block_exclusive_scan_int returns the sum of v over threads < this one and
// the block total in *total.
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

// The candidate and keep tests of rules 2 and 4 in one place. A selection is
// a threshold key plus how many ids tied at it are taken (lowest ids first).
struct Select {
    bool on;
    uint32_t key;
    int ties;  // number of ids with key == this.key that are kept
};

__device__ __forceinline__ bool above_or_tie(const Select& s, uint32_t k, int tie_rank) {
    return !s.on || k > s.key || (k == s.key && tie_rank < s.ties);
}

// radix_kth finds the key of the k-th largest (1-based) candidate, and how
// many candidates tied at it the selection keeps.
template <typename Pred>
__device__ Select radix_kth(Scratch& sm, const float* x, int lo, int hi, int k, Pred cand) {
    uint32_t prefix = 0;
    int remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hist[i] = 0;
        __syncthreads();
        for (int i = lo; i < hi; i++) {
            if (!cand(i)) continue;
            uint32_t key = float_key(finite_or_neginf(x[i]));
            if (shift < 24 && (key >> (shift + 8)) != prefix) continue;
            atomicAdd(&sm.hist[(key >> shift) & 0xff], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int d = 255;
            for (; d > 0; d--) {
                if ((int)sm.hist[d] >= remaining) break;
                remaining -= sm.hist[d];
            }
            sm.bcast_i[0] = d;
            sm.bcast_i[1] = remaining;
        }
        __syncthreads();
        prefix = (prefix << 8) | (uint32_t)sm.bcast_i[0];
        remaining = sm.bcast_i[1];
        __syncthreads();
    }
    Select s;
    s.on = true;
    s.key = prefix;
    s.ties = remaining;
    return s;
}

// radix_mass finds the shortest (key desc, id asc) prefix of kept ids whose
// weight sum reaches need; w(i) depends on the logit only, so ids tied on the
// key carry equal weights and the tie count is need / w rounded up.
template <typename Pred, typename Weight>
__device__ Select radix_mass(Scratch& sm, const float* x, int lo, int hi, double need, Pred keep, Weight weight) {
    uint32_t prefix = 0;
    double rem = need;
    bool found = true;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hmass[i] = 0.0;
        __syncthreads();
        for (int i = lo; i < hi; i++) {
            if (!keep(i)) continue;
            uint32_t key = float_key(finite_or_neginf(x[i]));
            if (shift < 24 && (key >> (shift + 8)) != prefix) continue;
            atomicAdd(&sm.hmass[(key >> shift) & 0xff], weight(i));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int d = 255;
            double r = rem;
            bool hit = false;
            for (; d >= 0; d--) {
                if (sm.hmass[d] > 0.0 && sm.hmass[d] >= r) {
                    hit = true;
                    break;
                }
                r -= sm.hmass[d];
            }
            if (!hit) d = 0;  // rounding: the remaining mass fell short; keep everything
            sm.bcast_i[0] = d;
            sm.bcast_i[2] = hit;
            sm.bcast_d[0] = r;
        }
        __syncthreads();
        prefix = (prefix << 8) | (uint32_t)sm.bcast_i[0];
        rem = sm.bcast_d[0];
        found = found && sm.bcast_i[2];
        __syncthreads();
    }
    Select s;
    s.on = found;
    s.key = prefix;
    s.ties = 0x7fffffff;
    if (found) {
        float lt = 0.f;  // the logit with this key; recover w from it
        uint32_t b = (prefix & 0x80000000u) ? (prefix & 0x7fffffffu) : ~prefix;
        lt = __uint_as_float(b);
        double wt = weight(-1, lt);
        s.ties = wt > 0.0 ? (int)ceil(rem / wt) : 1;
        if (s.ties < 1) s.ties = 1;
    }
    return s;
}

// tie ranks: for each thread, the number of ids tied at sel.key (and passing
// pre) that lie in lower threads' runs.
template <typename Pred>
__device__ int tie_base(Scratch& sm, const float* x, int lo, int hi, const Select& sel, Pred pre) {
    int mine = 0;
    if (sel.on)
        for (int i = lo; i < hi; i++)
            if (pre(i) && float_key(finite_or_neginf(x[i])) == sel.key) mine++;
    int total;
    return block_scan_int(sm, mine, &total);
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
    const int per = (V + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int lo = min(V, threadIdx.x * per), hi = min(V, lo + per);
    int banned = banned_in[r];
    if (banned >= V || V == 1) banned = -1;
    const float T = temperature[r];
    const int K = top_k[r];
    const float P = top_p[r];
    const uint64_t seed = ((uint64_t)seed_hi[r] << 32) | seed_lo[r];

    // Rule 1 (and the fallback): argmax, ties to the lowest id, never banned.
    float best = NEG_INF;
    int best_id = 0x7fffffff;
    for (int i = lo; i < hi; i++) {
        if (i == banned) continue;
        float v = finite_or_neginf(x[i]);
        if (best_id == 0x7fffffff || v > best) best = v, best_id = i;
    }
    // Reduce (value desc, id asc) across the block.
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
        sm.bcast_i[3] = best_id;
    }
    __syncthreads();
    const int argmax_id = sm.bcast_i[3];
    const float max_logit = block_max(sm, best);  // largest non-banned logit = m of rule 3
    int token = argmax_id;

    const bool greedy = T <= 0.f || K == 1;
    if (!greedy && max_logit != NEG_INF) {
        int ncand = V - (banned >= 0 ? 1 : 0);
        auto not_banned = [&](int i) { return i != banned; };
        Select selk;
        selk.on = false;
        if (K > 0 && K < ncand) selk = radix_kth(sm, x, lo, hi, K, not_banned);
        int kbase = tie_base(sm, x, lo, hi, selk, not_banned);
        // cand(i) must be evaluated in id order within a thread's run to
        // track tie ranks; a local helper walks the run.
        const double m = (double)max_logit, invT = 1.0 / (double)T;
        auto wlogit = [&](float l) {
            double w = exp(((double)l - m) * invT);
            return w != w ? 0.0 : w;
        };
        // Z over candidates (rule 3).
        double zl = 0.0;
        {
            int tr = kbase;
            for (int i = lo; i < hi; i++) {
                if (i == banned) continue;
                float l = finite_or_neginf(x[i]);
                uint32_t key = float_key(l);
                bool tie = selk.on && key == selk.key;
                if (above_or_tie(selk, key, tr)) zl += wlogit(l);
                if (tie) tr++;
            }
        }
        double Z;
        block_scan_double(sm, zl, &Z);
        if (Z > 0.0 && Z <= 1.7976931348623157e308) {
            // Candidate test by id (needs the tie rank, so a per-thread
            // precomputed list would cost memory; recount instead).
            Select selp;
            selp.on = false;
            if (P < 1.f) {
                // radix_mass walks ids in any order, but ties of the top-k cut
                // must be resolved: mark candidates by their run position.
                auto cand = [&](int i) {
                    if (i < 0 || i == banned) return false;
                    if (!selk.on) return true;
                    uint32_t key = float_key(finite_or_neginf(x[i]));
                    if (key != selk.key) return key > selk.key;
                    int tr = kbase;  // rank among ties below i within this run
                    for (int j = lo; j < i; j++)
                        if (j != banned && float_key(finite_or_neginf(x[j])) == selk.key) tr++;
                    return tr < selk.ties;
                };
                auto weight = [&](int i, float l = 0.f) { return wlogit(i >= 0 ? finite_or_neginf(x[i]) : l); };
                selp = radix_mass(sm, x, lo, hi, (double)P * Z, cand, weight);
            }
            auto not_banned_cand = [&](int i) {
                if (i == banned) return false;
                if (!selk.on) return true;
                uint32_t key = float_key(finite_or_neginf(x[i]));
                return key >= selk.key;
            };
            int pbase = tie_base(sm, x, lo, hi, selp, not_banned_cand);
            // Rule 5: kept weights in ascending id order.
            double mine = 0.0;
            int tk = kbase, tp = pbase;
            for (int i = lo; i < hi; i++) {
                if (i == banned) continue;
                float l = finite_or_neginf(x[i]);
                uint32_t key = float_key(l);
                bool c = above_or_tie(selk, key, tk);
                if (selk.on && key == selk.key) tk++;
                if (!c) continue;
                bool k = above_or_tie(selp, key, tp);
                if (selp.on && key == selp.key) tp++;
                if (k) mine += wlogit(l);
            }
            double S;
            double before = block_scan_double(sm, mine, &S);
            const double target = coin(seed, index[r]) * S;
            if (threadIdx.x == 0) sm.bcast_i[0] = -1, sm.bcast_i[1] = -1;
            __syncthreads();
            if (before <= target && before + mine > target) {
                double acc = before;
                tk = kbase, tp = pbase;
                for (int i = lo; i < hi; i++) {
                    if (i == banned) continue;
                    float l = finite_or_neginf(x[i]);
                    uint32_t key = float_key(l);
                    bool c = above_or_tie(selk, key, tk);
                    if (selk.on && key == selk.key) tk++;
                    if (!c) continue;
                    bool k = above_or_tie(selp, key, tp);
                    if (selp.on && key == selp.key) tp++;
                    if (!k) continue;
                    double w = wlogit(l);
                    if (w <= 0.0) continue;
                    acc += w;
                    if (acc > target) {
                        atomicMax(&sm.bcast_i[0], i);  // one thread owns the crossing
                        break;
                    }
                }
            }
            // Fallback when rounding leaves no crossing: the highest kept id with w > 0.
            {
                int last = -1;
                tk = kbase, tp = pbase;
                for (int i = lo; i < hi; i++) {
                    if (i == banned) continue;
                    float l = finite_or_neginf(x[i]);
                    uint32_t key = float_key(l);
                    bool c = above_or_tie(selk, key, tk);
                    if (selk.on && key == selk.key) tk++;
                    if (!c) continue;
                    bool k = above_or_tie(selp, key, tp);
                    if (selp.on && key == selp.key) tp++;
                    if (k && wlogit(l) > 0.0) last = i;
                }
                if (last >= 0) atomicMax(&sm.bcast_i[1], last);
            }
            __syncthreads();
            if (sm.bcast_i[0] >= 0) token = sm.bcast_i[0];
            else if (sm.bcast_i[1] >= 0) token = sm.bcast_i[1];
            __syncthreads();
        }
    }

    if (want_lp[r]) {  // log-softmax at temperature 1 over all raw logits
        float ml = NEG_INF;
        for (int i = lo; i < hi; i++) ml = fmaxf(ml, finite_or_neginf(x[i]));
        ml = block_max(sm, ml);
        double s = 0.0;
        for (int i = lo; i < hi; i++) s += exp((double)finite_or_neginf(x[i]) - (double)ml);
        double tot;
        block_scan_double(sm, s, &tot);
        if (threadIdx.x == 0) out_lp[r] = (float)((double)x[token] - (double)ml - log(tot));
    } else if (threadIdx.x == 0) {
        out_lp[r] = 0.f;
    }
    if (threadIdx.x == 0) out_tok[r] = token;
}
