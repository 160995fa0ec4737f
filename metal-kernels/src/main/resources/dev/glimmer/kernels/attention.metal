// MLA decode attention (docs/MODEL.md §4) in seven dispatches:
//   mat_vec_pair      attn_norm folded into the q_a and kv_a mat-vecs (one dispatch, two weights);
//   mat_vec           q_a_norm folded into q_b (matvec.metal);
//   mla_rope_cache    RoPE on each head's q_pe; kv_a_norm, RoPE on k_pe and the latent row written to the
//                     cache as halves (a batch of one token);
//   mat_vec           each head's q_nope absorbed through its k_b (grid y: the heads);
//   mla_attention     all heads in one pass over each cached latent row, split over a fixed number of
//                     threadgroups along the KV length (online softmax partials);
//   mla_merge_latent  per head: merge of the partials;
//   mat_vec           v_b of each head (grid y: the heads).
// Many small threadgroups per step: one threadgroup per head doing q_b, RoPE and k_b in turn kept most SMs
// idle and was the largest share of a step on an H200.
// Grids never depend on the position or the KV length: kernels read them from StepArgs.
// The KV cache holds halves (F16, as llama.cpp's default cache): half the memory and half the bytes each
// attention reads of a float cache; the queries, scores and sums stay float (docs/KERNELS.md §3a).

struct MatVecPairArgs {
    uint cols;       // length of x
    uint type1;      // ggml type ids and row counts of the two weights
    uint rows1;
    uint type2;
    uint rows2;
    float eps;       // of the shared input RMS norm
    uint split;      // SIMD-groups per row set, as MatVecArgs.split
};

// y1 = W1 rms(x), y2 = W2 rms(x). Grid: ceil(rows1 / R) + ceil(rows2 / R) threadgroups, R = mv_sets(split) * NR.
// scratch: MV_SIMDGROUPS * NR floats.
kernel void mat_vec_pair(constant MatVecPairArgs & a [[buffer(0)]],
                         device const float * x [[buffer(1)]],
                         device const float * norm_w [[buffer(2)]],
                         device const char * w1 [[buffer(3)]],
                         device float * y1 [[buffer(4)]],
                         device const char * w2 [[buffer(5)]],
                         device float * y2 [[buffer(6)]],
                         threadgroup float * scratch TG_MEM(0),
                         uint3 tgpig [[threadgroup_position_in_grid]],
                         ushort tiitg [[thread_index_in_threadgroup]],
                         ushort tiisg [[thread_index_in_simdgroup]],
                         ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint per_group = mv_sets(a.split) * NR;
    uint groups1 = (a.rows1 + per_group - 1) / per_group;
    bool second = tgpig.x >= groups1;
    uint type = second ? a.type2 : a.type1;
    uint rows = second ? a.rows2 : a.rows1;
    device const char * w = second ? w2 : w1;
    device float * y = second ? y2 : y1;
    uint first = ((second ? tgpig.x - groups1 : tgpig.x) * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    float sums[NR];
    mv_rows_normed(type, w, first, rows, a.cols, x, norm_w, a.eps, mv_lane(tiisg, sgitg, a.split), a.split * SIMD_WIDTH,
                   scratch, tiitg, tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH, sums);
    float v = mv_combine(sums, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < rows) y[first + tiisg] = v;
}

// Rotates the pairs (2i, 2i+1) of v[0..n) by pos * base^(-2i/n), the angle grown by repeated
// multiplication in float as ggml does. Angles reach thousands of radians at long contexts, so the
// trigonometry is the precise kind. Thread t of `threads` handles pairs t, t + threads, ...
static inline void rope_pairs(threadgroup float * v, uint n, uint pos, float base, uint t, uint threads) {
    float step = precise::pow(base, -2.0f / (float) n);
    for (uint i = t; i < n / 2; i += threads) {
        float theta = (float) pos;
        for (uint j = 0; j < i; j++) theta *= step;
        float c = precise::cos(theta), s = precise::sin(theta);
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
    }
}

// Register budget of mla_attention: each SIMD-group owns up to MAX_HEADS_PER_SIMDGROUP heads and each
// lane up to MAX_DIMS_PER_LANE of the latent + rope values of a row (576 / 32 = 18 for GLM-4.7-Flash);
// the host checks heads <= GLIMMER_WIDE_SIMDGROUPS * MAX_HEADS_PER_SIMDGROUP and latent + rope <= 32 * MAX_DIMS_PER_LANE.
#define MAX_HEADS_PER_SIMDGROUP 3
#define MAX_DIMS_PER_LANE 18
// Cached rows mla_attention loads before it scores them: the loads of a block are in flight together
// and its SIMD-group sums are independent, instead of one memory round trip and one reduction per row.
#define ATTENTION_BLOCK 4

struct AttentionArgs {
    uint heads;
    uint latent;
    uint rope;
    uint splits;     // threadgroups along the KV length (the grid)
    float scale;     // kq_scale
};

// Rows of each split: an equal share of the KV length, but at least GLIMMER_ATTENTION_MIN_ROWS, so that
// at short contexts only the first few splits get rows (the others return at once) and the merge reads
// only their partials.
static inline uint attention_chunk(uint kv_len, uint splits) {
    return max((kv_len + splits - 1) / splits, (uint) GLIMMER_ATTENTION_MIN_ROWS);
}

// Splits that hold rows: the partials mla_merge reads.
static inline uint attention_splits_used(uint kv_len, uint splits) {
    uint chunk = attention_chunk(kv_len, splits);
    return (kv_len + chunk - 1) / chunk;
}

// Grid: (tokens, splits) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups (token t reads q + t * heads * row
// and writes partials + t * splits * heads * (latent + 2)); threadgroup (t, w) takes the w-th
// share (attention_chunk) of the rows 0..kv_len. SIMD-group s handles heads s, s + SIMD-groups, ...; lane l
// the values l, l + 32, ... of a row. Writes per (w, h) of a split with rows: max score, sum of exp, and the
// unnormalized latent sum (latent values) to partials[(w * heads + h) * (latent + 2)]. Every loop over the
// register arrays has a compile-time bound (the real extent is masked inside), so the compiler keeps them
// in registers: with runtime bounds CUDA spilled them to local memory and the kernel ran 4x slower.
// The register arrays are sized for GLIMMER_WIDE_SIMDGROUPS SIMD-groups, which the attribute tells the compiler.
[[max_total_threads_per_threadgroup(GLIMMER_WIDE_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void mla_attention(constant AttentionArgs & a [[buffer(0)]],
                          constant StepArgs * steps [[buffer(1)]],
                          device const float * q [[buffer(2)]],
                          device const half * cache [[buffer(3)]],
                          device float * partials [[buffer(4)]],
                          uint3 tgpig [[threadgroup_position_in_grid]],
                          ushort tiisg [[thread_index_in_simdgroup]],
                          ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint row = a.latent + a.rope;
    constant StepArgs & step = steps[tgpig.x];
    q += tgpig.x * a.heads * row;
    partials += tgpig.x * a.splits * a.heads * (a.latent + 2);
    uint dims = (row + SIMD_WIDTH - 1) / SIMD_WIDTH;
    uint chunk = attention_chunk(step.kv_len, a.splits);
    uint start = min(tgpig.y * chunk, step.kv_len);
    uint end = min(start + chunk, step.kv_len);
    uint mine = 0;  // heads of this SIMD-group
    for (uint h = sgitg; h < a.heads; h += GLIMMER_WIDE_SIMDGROUPS) mine++;
    if (mine == 0 || start == end) return;
    float qr[MAX_HEADS_PER_SIMDGROUP][MAX_DIMS_PER_LANE];
    float acc[MAX_HEADS_PER_SIMDGROUP][MAX_DIMS_PER_LANE];
    float m[MAX_HEADS_PER_SIMDGROUP], l[MAX_HEADS_PER_SIMDGROUP];
    #pragma unroll
    for (uint i = 0; i < MAX_HEADS_PER_SIMDGROUP; i++) {
        uint h = sgitg + i * GLIMMER_WIDE_SIMDGROUPS;
        #pragma unroll
        for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) {
            uint d = tiisg + SIMD_WIDTH * j;
            qr[i][j] = (i < mine && j < dims && d < row) ? q[h * row + d] : 0.0f;
            acc[i][j] = 0.0f;
        }
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    const half zero = (half) 0.0f;
    for (uint u = start; u < end; u += ATTENTION_BLOCK) {
        float kr[ATTENTION_BLOCK][MAX_DIMS_PER_LANE];
        #pragma unroll
        for (uint b = 0; b < ATTENTION_BLOCK; b++) {
            device const half * k = cache + (step.kv_row + u + b) * row;
            #pragma unroll
            for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) {
                uint d = tiisg + SIMD_WIDTH * j;
                // the half is selected, then converted: a conversion inside the condition kept CUDA from
                // predicating the loads, and the 72 loads of a block then ran one after another (9x slower)
                half v = (u + b < end && j < dims && d < row) ? k[d] : zero;
                kr[b][j] = (float) v;
            }
        }
        #pragma unroll
        for (uint i = 0; i < MAX_HEADS_PER_SIMDGROUP; i++) {
            if (i < mine) {
                float s[ATTENTION_BLOCK];
                #pragma unroll
                for (uint b = 0; b < ATTENTION_BLOCK; b++) {
                    s[b] = 0.0f;
                    #pragma unroll
                    for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) s[b] += qr[i][j] * kr[b][j];
                }
                #pragma unroll
                for (uint b = 0; b < ATTENTION_BLOCK; b++) s[b] = simd_sum(s[b]) * a.scale;
                // the online softmax, row by row in order
                #pragma unroll
                for (uint b = 0; b < ATTENTION_BLOCK; b++) {
                    if (u + b < end) {
                        float m_new = max(m[i], s[b]);
                        float correction = exp(m[i] - m_new);
                        float p = exp(s[b] - m_new);
                        l[i] = l[i] * correction + p;
                        #pragma unroll
                        for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) acc[i][j] = acc[i][j] * correction + p * kr[b][j];
                        m[i] = m_new;
                    }
                }
            }
        }
    }
    #pragma unroll
    for (uint i = 0; i < MAX_HEADS_PER_SIMDGROUP; i++) {
        if (i < mine) {
            uint h = sgitg + i * GLIMMER_WIDE_SIMDGROUPS;
            device float * out = partials + (tgpig.y * a.heads + h) * (a.latent + 2);
            if (tiisg == 0) {
                out[0] = m[i];
                out[1] = l[i];
            }
            #pragma unroll
            for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) {
                uint d = tiisg + SIMD_WIDTH * j;
                if (j < dims && d < a.latent) out[2 + d] = acc[i][j];
            }
        }
    }
}

// o[c] (c < count) = the softmax-weighted latent value first + c of one head, merged from the partials of the
// `used` splits that hold rows: part points at the head's partials of split 0, `stride` floats between splits.
// The threads share out the values and, when there are more threads than values, the splits too (`ways` threads
// per value, each summing every ways-th split, added up in a fixed order): at long contexts a value has a hundred
// splits to add, too long a chain of loads for one thread. Every thread of the threadgroup of `simdgroups`
// SIMD-groups must call it (barriers); threadgroup memory: factor `used` floats, reduce `simdgroups` floats,
// sums one float per thread.
static inline void merge_splits(device const float * part, uint stride, uint used, uint first, uint count,
                                device float * o, threadgroup float * factor, threadgroup float * reduce,
                                threadgroup float * sums, ushort tiitg, ushort tiisg, ushort sgitg, uint simdgroups) {
    const uint threads = simdgroups * SIMD_WIDTH;
    // per split: exp(its max - the overall max); the splits' reductions are spread over the threads
    float mine = -INFINITY;
    for (uint w = tiitg; w < used; w += threads) mine = max(mine, part[w * stride]);
    float mx = threadgroup_max(mine, reduce, tiisg, sgitg, simdgroups);
    float sum = 0.0f;
    for (uint w = tiitg; w < used; w += threads) {
        factor[w] = exp(part[w * stride] - mx);
        sum += part[w * stride + 1] * factor[w];
    }
    float total = threadgroup_sum(sum, reduce, tiisg, sgitg, simdgroups);  // its barriers publish factor
    uint ways = count < threads ? threads / count : 1;
    uint lanes = threads / ways;  // values merged at once
    uint way = tiitg / lanes;
    for (uint c0 = 0; c0 < count; c0 += lanes) {
        uint c = c0 + tiitg % lanes;
        float v = 0.0f;
        if (way < ways && c < count) {
            device const float * pc = part + 2 + first + c;
            for (uint w = way; w < used; w += ways) v += pc[w * stride] * factor[w];
        }
        sums[tiitg] = v;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (way == 0 && c < count) {
            float t = 0.0f;
            for (uint k = 0; k < ways; k++) t += sums[tiitg + k * lanes];
            o[c] = t / total;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

struct MergeArgs {
    uint heads;
    uint latent;
    uint splits;
    uint parts;      // threadgroups per head and token (grid z), each merging latent / parts values
};

struct RopeCacheArgs {
    uint heads;
    uint nope;        // q_nope values per head
    uint rope;        // q_pe / k_pe values per head
    uint latent;
    float eps;        // of kv_a_norm
    float rope_base;
};

// For token t at its position: q[t][h][latent ..] = rope(q_full[t][h][nope ..]) (threadgroup h < heads; q_full
// holds q_b's output, nope + rope values per head), and threadgroup `heads` writes the token's cache row
// (rms(kv[t][0 .. latent)) * kv_a_norm, rope(kv[t][latent ..])), rounded to halves. Grid: (tokens,
// heads + 1) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups; scratch: GLIMMER_WIDE_SIMDGROUPS +
// align4(latent + rope) floats.
kernel void mla_rope_cache(constant RopeCacheArgs & a [[buffer(0)]],
                           constant StepArgs * steps [[buffer(1)]],
                           device const float * q_full [[buffer(2)]],
                           device const float * kv [[buffer(3)]],
                           device const float * kv_a_norm [[buffer(4)]],
                           device float * q [[buffer(5)]],
                           device half * cache [[buffer(6)]],
                           threadgroup float * scratch TG_MEM(0),
                           uint3 tgpig [[threadgroup_position_in_grid]],
                           ushort tiitg [[thread_index_in_threadgroup]],
                           ushort tiisg [[thread_index_in_simdgroup]],
                           ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    constant StepArgs & step = steps[tgpig.x];
    if (step.kv_len == 0) return;
    uint h = tgpig.y;
    uint row = a.latent + a.rope;
    threadgroup float * v = scratch + GLIMMER_WIDE_SIMDGROUPS;
    if (h == a.heads) {
        device const float * k = kv + tgpig.x * row;
        float scale = rms_scale(k, a.latent, a.eps, scratch, tiitg, tiisg, sgitg, threads);
        for (uint i = tiitg; i < a.latent; i += threads) v[i] = k[i] * scale * kv_a_norm[i];
        for (uint i = tiitg; i < a.rope; i += threads) v[a.latent + i] = k[a.latent + i];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        rope_pairs(v + a.latent, a.rope, step.pos, a.rope_base, tiitg, threads);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        device half * out = cache + (step.kv_row + step.pos) * row;
        for (uint i = tiitg; i < row; i += threads) out[i] = (half) v[i];
        return;
    }
    device const float * pe = q_full + (tgpig.x * a.heads + h) * (a.nope + a.rope) + a.nope;
    for (uint i = tiitg; i < a.rope; i += threads) v[i] = pe[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    rope_pairs(v, a.rope, step.pos, a.rope_base, tiitg, threads);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    device float * out = q + (tgpig.x * a.heads + h) * row + a.latent;
    for (uint i = tiitg; i < a.rope; i += threads) out[i] = v[i];
}

// o_lat[t][h] = the softmax-weighted latent sum of head h merged from the partials of token t's splits that
// hold rows (v_b is then a mat-vec or, for a batch, mat_mat per head). Grid: (tokens, heads, parts)
// threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups, threadgroup (t, h, z) merging the z-th share of the latent
// values; scratch: GLIMMER_WIDE_SIMDGROUPS * (SIMD_WIDTH + 1) + splits floats.
kernel void mla_merge_latent(constant MergeArgs & a [[buffer(0)]],
                             constant StepArgs * steps [[buffer(1)]],
                             device const float * partials [[buffer(2)]],
                             device float * o_lat [[buffer(3)]],
                             threadgroup float * scratch TG_MEM(0),
                             uint3 tgpig [[threadgroup_position_in_grid]],
                             ushort tiitg [[thread_index_in_threadgroup]],
                             ushort tiisg [[thread_index_in_simdgroup]],
                             ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    constant StepArgs & step = steps[tgpig.x];
    if (step.kv_len == 0) return;
    uint h = tgpig.y;
    uint share = (a.latent + a.parts - 1) / a.parts;
    uint first = tgpig.z * share;
    device const float * part = partials + tgpig.x * a.splits * a.heads * (a.latent + 2) + h * (a.latent + 2);
    merge_splits(part, a.heads * (a.latent + 2), attention_splits_used(step.kv_len, a.splits), first,
                 min(share, a.latent - first), o_lat + (tgpig.x * a.heads + h) * a.latent + first,
                 scratch + GLIMMER_WIDE_SIMDGROUPS * (SIMD_WIDTH + 1), scratch, scratch + GLIMMER_WIDE_SIMDGROUPS, tiitg,
                 tiisg, sgitg, GLIMMER_WIDE_SIMDGROUPS);
}
