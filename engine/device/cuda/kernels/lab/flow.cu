// flow.cu (lab): a probe of a dataflow batch-1 decode loop for the rotary
// block at Qwen3-0.6B's shape, the design persist.cu's grid barriers left
// open. One block an SM (128 of them work) runs all layers of a one-token
// step at position 0, where attention over the row's one key is its value.
// Nothing waits for the whole grid except the residual stream:
//
//   - each block's weights of every layer lie in one stream of its own, in
//     the order it uses them (lab_flow.go lays them out), and a producer
//     warp copies that stream into a ring of shared memory without ever
//     waiting for another block, so the weight reads run ahead of every
//     dependency as far as the ring holds;
//   - q|k|v: 32 rows a block; four blocks make a head and count it done;
//   - o_proj: a 128 x 128 tile a block (a head's columns, an eighth of the
//     rows), waiting only for its head's four blocks, added into the
//     residual by float reductions (one block adds the old residual too);
//   - gate|up, SwiGLU and down_proj in the same block: 24 hidden units a
//     block, then those 24 columns of down_proj (stored transposed) added
//     into the next residual, so gate|up and down_proj need no wait between
//     them.
//
// So a layer has two waits on all blocks (the residual after o_proj and
// after down_proj) and one on four. Eight consumer warps compute, each
// waiting for a count on its own; a ninth warp makes the counts (a release
// each, after the consumers' named-barrier arrival), so the consumers never
// wait for a release. The residual sums come in any order, so results vary
// in the last bits between runs.
#include "common.cuh"

#define FL_CONSUMERS 256                   // eight consumer warps
#define FL_THREADS (FL_CONSUMERS + 64)     // a producer warp and a signalling warp
#define FL_SIGNAL_THREADS (FL_CONSUMERS + 32)
// lab_flow.go builds variants of the ring (slot size and count, copies a
// slot, copies in flight) and of the polling.
#ifndef FL_NAME
#define FL_NAME flow_probe
#endif
#ifndef FL_CHUNK
#define FL_CHUNK 16384                     // bytes of one ring slot (16384 for the arithmetic)
#endif
#ifndef FL_SLOTS
#define FL_SLOTS 12                        // ring slots
#endif
#ifndef FL_PIECES
#define FL_PIECES 1                        // bulk copies a slot
#endif
#ifndef FL_POLL
#define FL_POLL 0                          // how a warp waits for a count (wait_for)
#endif
#ifndef FL_INFLIGHT
#define FL_INFLIGHT FL_SLOTS               // slots copied and not yet landed, at most
#endif
#define FL_LAYER_BYTES (240 * 1024)        // 64 + 32 + 96 + 48 KiB a layer a block
#define FL_C 1024                          // hidden size
#define FL_QKV 4096                        // q|k|v rows (16 + 8 + 8 heads of 128)
#define FL_VHEAD0 24                       // the first value head among them
#define FL_WORKERS 128                     // blocks with work
#define FL_FLAGS 34                        // a layer's counters: 32 heads, then the two residuals

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// fl_stamp: where trace is set, the global timer at event k of layer l in
// block b (warp 0's lane 0 and the signalling warp's lane 0).
#define FL_EVENTS 9
__device__ __forceinline__ void fl_stamp(unsigned long long* trace, int l, int b, int k) {
    if (!trace) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[((size_t)l * FL_WORKERS + b) * FL_EVENTS + k] = t;
}

__device__ __forceinline__ uint32_t fl_smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void fl_wait(const unsigned* p, unsigned target) {
    unsigned v;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    } while ((int)(v - target) < 0);
}

// fl_signal: a release, so that the block's writes before the named
// barrier the signalling warp waited at are visible with the count.
__device__ __forceinline__ void fl_signal(unsigned* p) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}

__device__ __forceinline__ void fl_red(float* p, float v) {
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

__device__ __forceinline__ void fl_red4(float* p, float a, float b, float c, float d) {
    asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// fl_sync: the consumer warps only (the producer warp runs its own loop).
__device__ __forceinline__ void fl_sync() {
    __syncwarp();
    asm volatile("bar.sync 1, 256;" ::: "memory");
}

// fl_arrive: a consumer warp's writes for signal id (2: q|k|v rows, 3:
// o_proj's tile, 4: down_proj's columns) are done; the signalling warp waits
// for all eight, and the consumers go on without waiting for the release.
// Both reconverge the warp first: bar.* are the .aligned barriers, which a
// diverged warp may not execute.
__device__ __forceinline__ void fl_arrive(int id) {
    __syncwarp();
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "n"(FL_SIGNAL_THREADS) : "memory");
}
__device__ __forceinline__ void fl_await(int id) {
    __syncwarp();
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(FL_SIGNAL_THREADS) : "memory");
}

// fl_dots: row r (1,024 bf16) of each of the next N ring chunks (peek(n))
// with x, which each lane holds as its 32 values (lane * 8 + 256 i + e);
// every lane gets the N sums. The rows' sums go side by side, so their loads
// and shuffles overlap.
template <int N, class Peek>
__device__ __forceinline__ void fl_dots(Peek peek, int r, const float* x, int lane, float* out) {
    const unsigned char* rows[N];
#pragma unroll
    for (int n = 0; n < N; n++) rows[n] = peek(n) + 2048 * r;
    float s[N];
#pragma unroll
    for (int n = 0; n < N; n++) s[n] = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int n = 0; n < N; n++) {
            float w[8];
            unpack_bf8(*(const uint4*)(rows[n] + 512 * i + 16 * lane), w);
#pragma unroll
            for (int e = 0; e < 8; e++) s[n] += w[e] * x[8 * i + e];
        }
#pragma unroll
    for (int o = 16; o; o >>= 1)
#pragma unroll
        for (int n = 0; n < N; n++) s[n] += __shfl_xor_sync(0xffffffffu, s[n], o);
#pragma unroll
    for (int n = 0; n < N; n++) out[n] = s[n];
}
#endif

// flow_probe: acc holds two sets of [layer][mid, out][C] residual sums;
// launch ep adds into set ep & 1 and zeroes the other for the next launch.
// flags only grow: launch ep waits for counts of (ep + 1) times the
// arrivals. mode 0 is the step; 1 skips every wait and count between
// blocks (wrong results, and the counts no longer match the launches: the
// weight stream and the arithmetic alone); 2 the arithmetic too (the
// stream alone); 3 the weight stream (the chain of waits and the
// arithmetic on whatever the ring holds).
extern "C" __global__ void __launch_bounds__(FL_THREADS, 1)
    FL_NAME(const unsigned char* streams, const float* const* norms, const float* x0, float* qkvOut, float* acc,
            unsigned* flags, int L, int ep, float eps, int mode, unsigned long long* trace) {
    const bool waits = mode == 0 || mode == 3, weights = mode != 3;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char fl_sm[];
    unsigned char* ring = fl_sm;
    float* part = (float*)(fl_sm + FL_SLOTS * FL_CHUNK);  // gate|up's 48 outputs, then 24 hidden units at 64
    unsigned long long* full = (unsigned long long*)(part + 128);
    unsigned long long* empty = full + FL_SLOTS;
    const int b = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (b >= FL_WORKERS) return;
    if (tid == 0) {
        for (int s = 0; s < FL_SLOTS; s++) {
            mbar_init(fl_smem(&full[s]), 1);
            mbar_init(fl_smem(&empty[s]), FL_CONSUMERS / 32);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const int chunks = L * (FL_LAYER_BYTES / FL_CHUNK);
    if (warp == FL_CONSUMERS / 32) {  // the producer
        if (lane != 0 || !weights) return;
        const unsigned char* src = streams + (size_t)b * chunks * FL_CHUNK;
        for (int i = 0; i < chunks; i++) {
            const int s = i % FL_SLOTS;
            if (i >= FL_SLOTS) mbar_wait(fl_smem(&empty[s]), (i / FL_SLOTS - 1) & 1);
            // A block's reads queue behind its own copies in flight, the
            // reads on the chain between blocks too: keep few in flight.
            if (FL_INFLIGHT < FL_SLOTS && i >= FL_INFLIGHT) {
                const int d = i - FL_INFLIGHT;
                mbar_wait(fl_smem(&full[d % FL_SLOTS]), (d / FL_SLOTS) & 1);
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            mbar_expect(fl_smem(&full[s]), FL_CHUNK);
            for (int c = 0; c < FL_PIECES; c++) {
                const int o = c * (FL_CHUNK / FL_PIECES);
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                        fl_smem(ring + s * FL_CHUNK + o)),
                    "l"(src + (size_t)i * FL_CHUNK + o), "r"(FL_CHUNK / FL_PIECES), "r"(fl_smem(&full[s]))
                    : "memory");
            }
        }
        return;
    }
    if (warp == FL_CONSUMERS / 32 + 1) {  // the signalling warp
        if (!waits) return;
        for (int l = 0; l < L; l++) {
            unsigned* lf = flags + l * FL_FLAGS;
            fl_await(2);
            if (lane == 0) fl_signal(&lf[b / 4]), fl_stamp(trace, l, b, 2);
            fl_await(3);
            if (lane == 0) fl_signal(&lf[32]), fl_stamp(trace, l, b, 5);
            fl_await(4);
            if (lane == 0) fl_signal(&lf[33]), fl_stamp(trace, l, b, 8);
        }
        return;
    }
    // Zero this block's share of the other set for the next launch.
    {
        float* next = acc + (size_t)((ep + 1) & 1) * L * 2 * FL_C;
        for (int i = b * FL_CONSUMERS + tid; i < L * 2 * FL_C; i += FL_WORKERS * FL_CONSUMERS) next[i] = 0.f;
    }
    float* sums = acc + (size_t)(ep & 1) * L * 2 * FL_C;
    const unsigned round = (unsigned)ep + 1;
    int ci = 0;
    // peek: chunk ci + j of the block's stream, once it has landed; release:
    // this warp is done with the next n chunks.
    auto peek = [&](int j) {
        const int c = ci + j, slot = c % FL_SLOTS;
        if (weights) mbar_wait(fl_smem(&full[slot]), (c / FL_SLOTS) & 1);
        return (const unsigned char*)(ring + slot * FL_CHUNK);
    };
    auto release = [&](int n) {
        __syncwarp();
        for (int j = 0; j < n; j++, ci++)
            if (lane == 0 && weights) mbar_arrive(fl_smem(&empty[ci % FL_SLOTS]));
    };
    if (mode == 2) {  // the stream alone: every chunk taken and given back
        for (int i = 0; i < chunks; i++) {
            peek(0);
            release(1);
        }
        return;
    }
    // Each warp waits alone: every lane polls (FL_POLL 0, one request a
    // warp), lane 0 polls (1), lane 0 polls with a pause between reads (2).
    auto wait_for = [&](const unsigned* p, unsigned target) {
        if (!waits) return;
        if (FL_POLL == 0) {
            fl_wait(p, target);
            return;
        }
        if (lane == 0) {
            unsigned v;
            while (true) {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
                if ((int)(v - target) >= 0) break;
                if (FL_POLL == 2) __nanosleep(64);
            }
        }
        __syncwarp();
    };
    // norm: x = this lane's 32 values (lane * 8 + 256 i + e) of RMSNorm(src;
    // w), each warp reading the whole row itself, so no block barrier.
    float x[32], w[32];
    auto load_w = [&](const float* src) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 v = __ldg((const float4*)(src + 256 * (i / 2) + 8 * lane + 4 * (i % 2)));
            w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
        }
    };
    auto norm = [&](const float* src) {
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 v = __ldcg((const float4*)(src + 256 * (i / 2) + 8 * lane + 4 * (i % 2)));
            x[4 * i] = v.x, x[4 * i + 1] = v.y, x[4 * i + 2] = v.z, x[4 * i + 3] = v.w;
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        const float inv = rsqrtf(warp_sum(ss) / FL_C + eps);
#pragma unroll
        for (int i = 0; i < 32; i++) x[i] *= inv * w[i];
    };
    const int h = b / 8, rc = b % 8, vhead = FL_VHEAD0 + h / 2;
    for (int l = 0; l < L; l++) {
        unsigned* lf = flags + l * FL_FLAGS;
        const float* xin = l == 0 ? x0 : sums + (size_t)(2 * (l - 1) + 1) * FL_C;
        float* mid = sums + (size_t)(2 * l) * FL_C;
        float* out = mid + FL_C;
        float* qkv = qkvOut + (size_t)l * FL_QKV;
        // q|k|v rows 32b..32b+31 of RMSNorm(x).
        load_w(norms[2 * l]);
        if (l > 0) wait_for(flags + (l - 1) * FL_FLAGS + 33, FL_WORKERS * round);
        if (tid == 0) fl_stamp(trace, l, b, 0);
        norm(xin);
        {
            float d[4];
            fl_dots<4>(peek, warp, x, lane, d);
            release(4);
            if (lane < 4) qkv[32 * b + 8 * lane + warp] = d[0] * (lane == 0) + d[1] * (lane == 1) + d[2] * (lane == 2) + d[3] * (lane == 3);
        }
        if (tid == 0) fl_stamp(trace, l, b, 1);
        if (waits) fl_arrive(2);
        // o_proj's tile: rows 128 rc.., columns of head h, whose attention
        // output at position 0 is its KV head's value. Four threads a row
        // (a quarter of the head's columns each), rows tid / 4 of each chunk;
        // head 0's blocks add the old residual too.
        {
            const int r = tid / 4, qt = tid % 4;
            float res[2] = {0.f, 0.f};
            if (h == 0 && qt == 0)
                for (int k = 0; k < 2; k++) res[k] = __ldcg(xin + 128 * rc + 64 * k + r);
            wait_for(&lf[vhead], 4 * round);
            if (tid == 0) fl_stamp(trace, l, b, 3);
            float a[32];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float4 v = __ldcg((const float4*)(qkv + vhead * 128 + 32 * qt) + i);
                a[4 * i] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
            }
            const unsigned char* p0 = peek(0);
            const unsigned char* p1 = peek(1);
            float s[2] = {0.f, 0.f};
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const unsigned char* row = (k ? p1 : p0) + 256 * r + 64 * qt;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float wv[8];
                    unpack_bf8(*(const uint4*)(row + 16 * i), wv);
#pragma unroll
                    for (int e = 0; e < 8; e++) s[k] += wv[e] * a[8 * i + e];
                }
            }
            release(2);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                s[k] += __shfl_xor_sync(0xffffffffu, s[k], 1);
                s[k] += __shfl_xor_sync(0xffffffffu, s[k], 2);
                if (qt == 0) fl_red(mid + 128 * rc + 64 * k + r, s[k] + res[k]);
            }
        }
        if (tid == 0) fl_stamp(trace, l, b, 4);
        if (waits) fl_arrive(3);
        // gate|up of RMSNorm(mid) for hidden units 24b.., then SwiGLU.
        load_w(norms[2 * l + 1]);
        wait_for(&lf[32], FL_WORKERS * round);
        if (tid == 0) fl_stamp(trace, l, b, 6);
        float4 old = {0.f, 0.f, 0.f, 0.f};
        if (b == 0) old = __ldcg((const float4*)(mid + 4 * tid));
        norm(mid);
        {
            float d[6];
            fl_dots<6>(peek, warp, x, lane, d);
            release(6);
            if (lane == 0)
                for (int k = 0; k < 6; k++) part[8 * k + warp] = d[k];
        }
        fl_sync();
        if (tid < 24) {
            const float g = part[2 * tid];
            part[64 + tid] = g / (1.f + __expf(-g)) * part[2 * tid + 1];
        }
        fl_sync();
        // down_proj's columns 24b.. (rows of the transposed weight) into out,
        // each thread its four outputs 4 tid...
        {
            float s4[4] = {old.x, old.y, old.z, old.w};
            const unsigned char* ps[3];
            for (int k = 0; k < 3; k++) ps[k] = peek(k);
#pragma unroll
            for (int k = 0; k < 3; k++)
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float hv = part[64 + 8 * k + j];
                    const uint2 u = *(const uint2*)(ps[k] + 2048 * j + 8 * tid);
                    s4[0] += bf2f((bf16_t)(u.x & 0xffff)) * hv;
                    s4[1] += bf2f((bf16_t)(u.x >> 16)) * hv;
                    s4[2] += bf2f((bf16_t)(u.y & 0xffff)) * hv;
                    s4[3] += bf2f((bf16_t)(u.y >> 16)) * hv;
                }
            release(3);
            fl_red4(out + 4 * tid, s4[0], s4[1], s4[2], s4[3]);
        }
        if (tid == 0) fl_stamp(trace, l, b, 7);
        if (waits) fl_arrive(4);
    }
#endif
}
