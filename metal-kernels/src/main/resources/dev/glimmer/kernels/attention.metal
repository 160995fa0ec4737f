// MLA decode attention (docs/MODEL.md §4) in four dispatches:
//   mat_vec_pair   attn_norm folded into the q_a and kv_a mat-vecs (one dispatch, two weights);
//   mla_q_heads    per head: q_a_norm + q_b rows of the head, RoPE on q_pe, q_nope absorbed through k_b;
//                  one extra threadgroup: kv_a_norm, RoPE on k_pe, the latent row written to the cache;
//   mla_attention  all heads in one pass over each cached latent row, split over a fixed number of
//                  threadgroups along the KV length (online softmax partials);
//   mla_merge      per head: merge of the partials, then v_b.
// Grids never depend on the position or the KV length: kernels read them from StepArgs.

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

struct QHeadsArgs {
    uint heads;
    uint q_lora;       // length of q_a (input of q_b)
    uint nope;         // q_nope values per head
    uint rope;         // q_pe / k_pe values per head
    uint latent;       // kv_lora_rank: the latent part of a cache row
    uint q_b_type;
    uint k_b_type;
    float eps;         // of q_a_norm and kv_a_norm
    float rope_base;
};

// Grid: heads * Q_PARTS + 1 threadgroups of GLIMMER_HEAD_SIMDGROUPS SIMD-groups. The Q_PARTS threadgroups
// of head h each compute the head's q_b rows (the weights come from L2 after the first) and write a
// share of q[h] = (k_b[h] q_nope[h], rope(q_pe[h])), latent + rope values: part p the rows
// p * latent / Q_PARTS .. of the absorption, part 0 also rope(q_pe). Spreading a head over several
// threadgroups puts 4x more SMs to work on this small, latency-bound step. The last threadgroup
// writes the cache row (rms(kv[0..latent)) * kv_a_norm, rope(kv[latent..latent+rope))) at position pos.
// scratch: GLIMMER_HEAD_SIMDGROUPS + align4(max(nope + rope, latent + rope)) floats.
[[max_total_threads_per_threadgroup(GLIMMER_HEAD_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void mla_q_heads(constant QHeadsArgs & a [[buffer(0)]],
                        constant StepArgs & step [[buffer(1)]],
                        device const float * q_a [[buffer(2)]],
                        device const float * q_a_norm [[buffer(3)]],
                        device const char * q_b [[buffer(4)]],
                        device const char * k_b [[buffer(5)]],
                        device const float * kv [[buffer(6)]],
                        device const float * kv_a_norm [[buffer(7)]],
                        device float * q [[buffer(8)]],
                        device float * cache [[buffer(9)]],
                        threadgroup float * scratch TG_MEM(0),
                        uint3 tgpig [[threadgroup_position_in_grid]],
                        ushort tiitg [[thread_index_in_threadgroup]],
                        ushort tiisg [[thread_index_in_simdgroup]],
                        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_HEAD_SIMDGROUPS * SIMD_WIDTH;
    threadgroup float * head = scratch + GLIMMER_HEAD_SIMDGROUPS;
    uint h = tgpig.x / GLIMMER_Q_PARTS;
    uint part = tgpig.x % GLIMMER_Q_PARTS;
    uint row = a.latent + a.rope;
    if (h == a.heads) {
        float scale = rms_scale(kv, a.latent, a.eps, scratch, tiitg, tiisg, sgitg, threads);
        for (uint i = tiitg; i < a.latent; i += threads) head[i] = kv[i] * scale * kv_a_norm[i];
        for (uint i = tiitg; i < a.rope; i += threads) head[a.latent + i] = kv[a.latent + i];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        rope_pairs(head + a.latent, a.rope, step.pos, a.rope_base, tiitg, threads);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        device float * out = cache + step.pos * row;
        for (uint i = tiitg; i < row; i += threads) out[i] = head[i];
        return;
    }
    // q_b rows of this head times q_a * q_a_norm into threadgroup memory; the norm's 1/rms factor is
    // applied to the outputs (RoPE and the absorption are linear), so the weight loads need not wait for it
    uint per_head = a.nope + a.rope;
    // (two row sets per SIMD-group and pass: their loads go out together)
    XScaled xn = {q_a, q_a_norm};
    const uint pass = GLIMMER_HEAD_SIMDGROUPS * NR;
    device const char * qb = q_b + h * per_head * row_bytes(a.q_b_type, a.q_lora);
    for (uint first = sgitg * NR; first < per_head; first += 2 * pass) {
        float s1[NR], s2[NR];
        mv_rows_part2(a.q_b_type, qb, qb + pass * row_bytes(a.q_b_type, a.q_lora), first, per_head,
                      per_head > pass ? per_head - pass : 0, a.q_lora, xn, tiisg, SIMD_WIDTH, s1, s2);
        if (tiisg == 0) {
            for (uint r = 0; r < NR && first + r < per_head; r++) head[first + r] = s1[r];
            for (uint r = 0; r < NR && first + pass + r < per_head; r++) head[first + pass + r] = s2[r];
        }
    }
    float scale = rms_scale(q_a, a.q_lora, a.eps, scratch, tiitg, tiisg, sgitg, threads);  // its barriers publish head
    device float * out = q + h * row;
    if (part == 0) {
        rope_pairs(head + a.nope, a.rope, step.pos, a.rope_base, tiitg, threads);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = tiitg; i < a.rope; i += threads) out[a.latent + i] = head[a.nope + i] * scale;
    }
    // absorption: q_abs[c] = k_b[h][c] . q_nope
    XThreadgroup qn = {head};
    device const char * kb = k_b + h * a.latent * row_bytes(a.k_b_type, a.nope);
    uint share = (a.latent + GLIMMER_Q_PARTS - 1) / GLIMMER_Q_PARTS;
    uint end = min(a.latent, (part + 1) * share);
    for (uint first = part * share + sgitg * NR; first < end; first += GLIMMER_HEAD_SIMDGROUPS * NR) {
        float sums[NR];
        mv_rows(a.k_b_type, kb, first, end, a.nope, qn, tiisg, sums);
        if (tiisg < NR && first + tiisg < end) {
            float v = sums[0];
            for (uint i = 1; i < NR; i++) v = tiisg == i ? sums[i] : v;
            out[first + tiisg] = v * scale;
        }
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
kernel void mla_attention(constant AttentionArgs & a [[buffer(0)]],
                          constant StepArgs * steps [[buffer(1)]],
                          device const float * q [[buffer(2)]],
                          device const float * cache [[buffer(3)]],
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
    for (uint u = start; u < end; u += ATTENTION_BLOCK) {
        float kr[ATTENTION_BLOCK][MAX_DIMS_PER_LANE];
        #pragma unroll
        for (uint b = 0; b < ATTENTION_BLOCK; b++) {
            device const float * k = cache + (u + b) * row;
            #pragma unroll
            for (uint j = 0; j < MAX_DIMS_PER_LANE; j++) {
                uint d = tiisg + SIMD_WIDTH * j;
                kr[b][j] = (u + b < end && j < dims && d < row) ? k[d] : 0.0f;
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

// o[c] (c < latent) = the softmax-weighted latent sum of one head, merged from the partials of the `used` splits
// that hold rows: part points at the head's partials of split 0, `stride` floats between splits. Every thread
// of the threadgroup of `simdgroups` SIMD-groups must call it (barriers); factor: `used` floats, reduce:
// `simdgroups` floats of threadgroup memory (o may overlap reduce: it is written after the reductions).
template <typename P>
static inline void merge_splits(device const float * part, uint stride, uint used, uint latent, P o,
                                threadgroup float * factor, threadgroup float * reduce, ushort tiitg, ushort tiisg,
                                ushort sgitg, uint simdgroups) {
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
    float total = threadgroup_sum(sum, reduce, tiisg, sgitg, simdgroups);
    // the splits' values of latent c four at a time: their loads are in flight together (the sum keeps
    // the split order)
    for (uint c = tiitg; c < latent; c += threads) {
        device const float * pc = part + 2 + c;
        float v = 0.0f;
        uint w = 0;
        for (; w + 4 <= used; w += 4) {
            float p0 = pc[w * stride], p1 = pc[(w + 1) * stride], p2 = pc[(w + 2) * stride], p3 = pc[(w + 3) * stride];
            v += p0 * factor[w];
            v += p1 * factor[w + 1];
            v += p2 * factor[w + 2];
            v += p3 * factor[w + 3];
        }
        for (; w < used; w++) v += pc[w * stride] * factor[w];
        o[c] = v / total;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

struct MergeArgs {
    uint heads;
    uint latent;
    uint splits;
    uint v_head;     // rows of v_b per head
    uint v_b_type;
};

// Grid: heads * MERGE_PARTS threadgroups of GLIMMER_HEAD_SIMDGROUPS SIMD-groups. o[h * v_head + e] =
// v_b[h][e] . o_lat[h], o_lat[h] the softmax-weighted latent sum merged from the partials of the splits
// that hold rows; each of the MERGE_PARTS threadgroups of a head merges o_lat[h] itself and writes a share
// of the v_head rows. scratch: latent + splits floats.
[[max_total_threads_per_threadgroup(GLIMMER_HEAD_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void mla_merge(constant MergeArgs & a [[buffer(0)]],
                      constant StepArgs & step [[buffer(1)]],
                      device const float * partials [[buffer(2)]],
                      device const char * v_b [[buffer(3)]],
                      device float * o [[buffer(4)]],
                      threadgroup float * scratch TG_MEM(0),
                      uint3 tgpig [[threadgroup_position_in_grid]],
                      ushort tiitg [[thread_index_in_threadgroup]],
                      ushort tiisg [[thread_index_in_simdgroup]],
                      ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint h = tgpig.x / GLIMMER_MERGE_PARTS;
    uint share_index = tgpig.x % GLIMMER_MERGE_PARTS;
    uint stride = a.heads * (a.latent + 2);
    merge_splits(partials + h * (a.latent + 2), stride, attention_splits_used(step.kv_len, a.splits), a.latent, scratch,
                 scratch + a.latent, scratch, tiitg, tiisg, sgitg, GLIMMER_HEAD_SIMDGROUPS);
    XThreadgroup lat = {scratch};
    device const char * vb = v_b + h * a.v_head * row_bytes(a.v_b_type, a.latent);
    uint share = (a.v_head + GLIMMER_MERGE_PARTS - 1) / GLIMMER_MERGE_PARTS;
    uint end = min(a.v_head, (share_index + 1) * share);
    for (uint first = share_index * share + sgitg * NR; first < end; first += GLIMMER_HEAD_SIMDGROUPS * NR) {
        float sums[NR];
        mv_rows(a.v_b_type, vb, first, end, a.latent, lat, tiisg, sums);
        if (tiisg < NR && first + tiisg < end) {
            float v = sums[0];
            for (uint i = 1; i < NR; i++) v = tiisg == i ? sums[i] : v;
            o[h * a.v_head + first + tiisg] = v;
        }
    }
}
