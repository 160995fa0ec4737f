// The kernels of the prompt command list, which runs a batch of consecutive tokens at once. The
// weight-heavy steps are mat_mat: it multiplies tiles of MM_ROWS weight rows, dequantized once, with the
// activations of MM_TOKENS tokens on the matrix units (mm_tile, tiles.metal), where a mat-vec would read
// and convert the weights again for every token. The MoE experts run grouped by expert: moe_route lists
// the tokens routed to each expert, so that an expert's rows are dequantized once for all of them. The
// attention runs on the matrix units too (mla_flash_attention). The rest are small per-token kernels: the
// norms, RoPE and the cache row, and the weighted sum of the experts. (The batch decode list, which shares
// these layers, keeps the decode step's attention over splits of the cache: mla_attention and
// mla_merge_latent with a token dimension, attention.metal.)

// ---- where the tokens of a block find their activations ----

// Tokens first, first + 1, ... of the batch, one row of x each.
struct ConsecutiveRows {
    device const float * x;
    uint stride;   // floats between two tokens' rows
    uint first;
    device const float * row(uint j) const { return x + (first + j) * stride; }
};

// The entries of an expert's token list (token * routed + slot): one row of x per token (slots 1), or
// one per (token, slot) (slots routed + 1: the act buffer of the experts).
struct ListedRows {
    device const float * x;
    uint stride;   // floats per row of x
    uint slots;
    uint routed;
    device const uint * entries;
    device const float * row(uint j) const {
        uint e = entries[j];
        uint token = e / routed;
        return x + (token * slots + (slots == 1 ? 0 : e % routed)) * stride;
    }
};

// Tokens first .. first + count - 1 of the batch that hold a row: a prefix of them, since only the end of a
// batch is unused (kv_len 0).
static inline uint batch_tokens(constant StepArgs * steps, uint first, uint count, uint tokens) {
    uint n = 0;
    for (uint j = 0; j < count; j++) {
        if (first + j < tokens && steps[first + j].kv_len != 0) n = j + 1;
    }
    return n;
}

// ---- dense weights ----

struct MatMatArgs {
    uint type;       // ggml type id of W
    uint cols;       // values per row of W
    uint rows;
    uint tokens;     // tokens of the batch
    uint x_stride;   // floats between two tokens' x
    uint y_stride;   // floats between two tokens' y
    uint w_step;     // bytes between the matrices of grid z (the heads of k_b or v_b; 0 for one matrix)
    uint x_step;     // floats between the x of grid z within a token's row
    uint y_step;     // floats between the y of grid z within a token's row
    uint add;        // 1: y += W x (y is the residual stream)
    uint split;      // mat_mat_float: SIMD-groups sharing each row set's columns (1, 2 or 4; mat_mat: 1)
    uint parts;      // mat_mat: column parts, each a threadgroup's (Geometry.mmParts; mat_mat_float: 1)
};

// Where part p's sum of row r for token t of matrix z lies in mat_mat's partials.
static inline uint mm_partial(constant MatMatArgs & a, uint z, uint p, uint t, uint r) {
    return ((z * a.parts + p) * a.tokens + t) * a.rows + r;
}

// y[t] = W x[t] (+ y[t]) for the tokens of the batch that hold a row. Grid: (ceil(tokens / MM_TOKENS) * parts,
// ceil(rows / MM_ROWS), matrices) threadgroups of MM_SIMDGROUPS SIMD-groups; threadgroup (b * parts + p, g, z)
// computes rows g * MM_ROWS .. + MM_ROWS of matrix z for tokens b * MM_TOKENS .. (mm_tile) over column part p
// (cols / parts columns, whole blocks). With one part it writes y; with more, its sums into `partials`
// (mm_partial), which mat_mat_parts adds up: a matrix of few rows (q_a, kv_a, attn_output) otherwise gives a
// batch fewer threadgroups than the GPU holds at once. tiles: Geometry.mmMemoryFloats(MM_ROWS, MM_TOKENS) floats.
kernel void mat_mat(constant MatMatArgs & a [[buffer(0)]],
                    device const char * w [[buffer(1)]],
                    device const float * x [[buffer(2)]],
                    device float * y [[buffer(3)]],
                    constant StepArgs * steps [[buffer(4)]],
                    device float * partials [[buffer(5)]],
                    threadgroup float * tiles TG_MEM(0),
                    uint3 tgpig [[threadgroup_position_in_grid]],
                    ushort tiitg [[thread_index_in_threadgroup]],
                    ushort tiisg [[thread_index_in_simdgroup]],
                    ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint part = tgpig.x % a.parts;
    uint first_token = tgpig.x / a.parts * MM_TOKENS;
    uint n = batch_tokens(steps, first_token, MM_TOKENS, a.tokens);
    if (n == 0) return;
    uint cols = a.cols / a.parts;
    w += tgpig.z * a.w_step + part * row_bytes(a.type, cols);
    x += tgpig.z * a.x_step + part * cols;
    y += tgpig.z * a.y_step;
    uint first = tgpig.y * MM_ROWS;
    // the part's columns of each row: from its own first byte, with the whole row's stride
    WeightRows lo = weight_rows(a.type, w, a.cols, first, a.rows);
    WeightRows hi = weight_rows(a.type, w, a.cols, first + MM_ROWS / 2, a.rows);
    ConsecutiveRows src = {x, a.x_stride, first_token};
    mm_tile<MM_ROWS, MM_TOKENS>(lo, hi, src, n, cols, tiles, tiitg, tiisg, sgitg);
    uint r = first + tiitg % MM_ROWS;
    if (r >= a.rows) return;
    for (uint j = tiitg / MM_ROWS; j < n; j += MM_THREADS / MM_ROWS) {
        float v = tiles[j * (MM_ROWS + MM_FLOAT_PAD) + tiitg % MM_ROWS];
        if (a.parts > 1) {
            partials[mm_partial(a, tgpig.z, part, first_token + j, r)] = v;
        } else {
            device float * out = y + (first_token + j) * a.y_stride + r;
            *out = a.add != 0 ? *out + v : v;
        }
    }
}

// y[t] = the sum of mat_mat's parts (in part order) (+ y[t]) for the tokens of the batch that hold a row. Grid:
// (tokens, ceil(rows / threads), matrices) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void mat_mat_parts(constant MatMatArgs & a [[buffer(0)]],
                          device const float * partials [[buffer(1)]],
                          device float * y [[buffer(2)]],
                          constant StepArgs * steps [[buffer(3)]],
                          uint3 tgpig [[threadgroup_position_in_grid]],
                          ushort tiitg [[thread_index_in_threadgroup]]) {
    uint t = tgpig.x;
    uint r = tgpig.y * GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH + tiitg;
    if (t >= a.tokens || steps[t].kv_len == 0 || r >= a.rows) return;
    float v = 0.0f;
    for (uint p = 0; p < a.parts; p++) v += partials[mm_partial(a, tgpig.z, p, t, r)];
    device float * out = y + tgpig.z * a.y_step + t * a.y_stride + r;
    *out = a.add != 0 ? *out + v : v;
}

// ---- weights multiplied in float ----
// The matrix units take halves. F32 weights (the router: its logits pick the experts, and a rounded logit could
// pick others than the CPU does) are multiplied in float instead, and so is every weight of a batch of a few
// sequences' tokens (the batch decode list): there a tile of MM_TOKENS tokens would be mostly empty, and the few
// threadgroups of a tile per MM_ROWS rows leave most of the GPU idle. FLOAT_TOKENS tokens per weight chunk.

#define FLOAT_TOKENS GLIMMER_MM_FLOAT_TOKENS

// sums[r * FLOAT_TOKENS + j] = row (first + r) of w . (the activations of token j of the block), for r < NR and
// the first n tokens (the others give 0); rows at or past `rows` give 0, over the chunks lane, lane + lanes, ...
// (lanes a multiple of SIMD_WIDTH, as mv_rows_part); each chunk of the NR rows is dequantized once for all the
// tokens. Every lane gets every sum of its SIMD-group.
template <typename T>
static inline void mm_float_rows_of(device const uchar * w, uint stride, uint first, uint rows, uint cols,
                                    ConsecutiveRows src, uint n, uint lane, uint lanes, thread float * sums) {
    // Every loop over the register arrays is unrolled (compile-time bounds, the real extents masked inside):
    // an index the compiler cannot resolve would move acc to local memory.
    float acc[NR * FLOAT_TOKENS];
    #pragma unroll
    for (uint i = 0; i < NR * FLOAT_TOKENS; i++) acc[i] = 0.0f;
    uint chunks = cols / CH;
    for (uint c = lane; c < chunks; c += lanes) {
        float wv[NR][CH];
        #pragma unroll
        for (uint r = 0; r < NR; r++) {
            if (first + r < rows) {
                T::dequant(w + (first + r) * stride, c, wv[r]);
            } else {
                #pragma unroll
                for (uint i = 0; i < CH; i++) wv[r][i] = 0.0f;
            }
        }
        #pragma unroll
        for (uint j = 0; j < FLOAT_TOKENS; j++) {
            if (j < n) {
                XDevice xd = {src.row(j)};
                float v[CH];
                T::gather(xd, c, v);
                #pragma unroll
                for (uint r = 0; r < NR; r++) {
                    float d = 0.0f;
                    #pragma unroll
                    for (uint i = 0; i < CH; i++) d += wv[r][i] * v[i];
                    acc[r * FLOAT_TOKENS + j] += d;
                }
            }
        }
    }
    #pragma unroll
    for (uint i = 0; i < NR * FLOAT_TOKENS; i++) sums[i] = simd_sum(acc[i]);
}

static inline void mm_float_rows(uint type, device const char * w, uint first, uint rows, uint cols, ConsecutiveRows src,
                                 uint n, uint lane, uint lanes, thread float * sums) {
    device const uchar * wb = (device const uchar *) w;
    uint stride = row_bytes(type, cols);
    switch (type) {
        case TYPE_F32: mm_float_rows_of<F32>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_F16: mm_float_rows_of<F16>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_Q4_0: mm_float_rows_of<Q4_0>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_Q5_0: mm_float_rows_of<Q5_0>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_Q8_0: mm_float_rows_of<Q8_0>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_Q4_K: mm_float_rows_of<Q4_K>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        case TYPE_Q5_K: mm_float_rows_of<Q5_K>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
        default: mm_float_rows_of<Q6_K>(wb, stride, first, rows, cols, src, n, lane, lanes, sums); break;
    }
}

// mat_mat in float. Grid: (ceil(tokens / FLOAT_TOKENS), ceil(rows / (MM_SIMDGROUPS / split * NR)), matrices)
// threadgroups of GLIMMER_MM_SIMDGROUPS SIMD-groups, which form MM_SIMDGROUPS / split sets of NR rows; the split
// SIMD-groups of a set take every split-th chunk of the columns (as mat_vec's split: a matrix of few rows
// then still keeps enough warps in flight; their sums meet in `partials`, MM_SIMDGROUPS * SIMD_WIDTH floats).
// Set s of threadgroup (b, g, z) computes rows (g * sets + s) * NR .. + NR of matrix z for tokens
// b * FLOAT_TOKENS ..; lane i of its first SIMD-group writes row i / FLOAT_TOKENS of token i % FLOAT_TOKENS
// (NR * FLOAT_TOKENS is SIMD_WIDTH).
kernel void mat_mat_float(constant MatMatArgs & a [[buffer(0)]],
                          device const char * w [[buffer(1)]],
                          device const float * x [[buffer(2)]],
                          device float * y [[buffer(3)]],
                          constant StepArgs * steps [[buffer(4)]],
                          threadgroup float * partials TG_MEM(0),
                          uint3 tgpig [[threadgroup_position_in_grid]],
                          ushort tiisg [[thread_index_in_simdgroup]],
                          ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint first_token = tgpig.x * FLOAT_TOKENS;
    uint n = batch_tokens(steps, first_token, FLOAT_TOKENS, a.tokens);
    if (n == 0) return;
    w += tgpig.z * a.w_step;
    x += tgpig.z * a.x_step;
    y += tgpig.z * a.y_step;
    uint sets = GLIMMER_MM_SIMDGROUPS / a.split;
    uint set = sgitg % sets;
    uint part = sgitg / sets;
    uint first = (tgpig.y * sets + set) * NR;
    ConsecutiveRows src = {x, a.x_stride, first_token};
    float sums[NR * FLOAT_TOKENS];
    mm_float_rows(a.type, w, first, a.rows, a.cols, src, n, part * SIMD_WIDTH + tiisg, a.split * SIMD_WIDTH, sums);
    // the sum lane tiisg owns, by a loop of selects: an index known only at run time would move sums to local memory
    float v = 0.0f;
    #pragma unroll
    for (uint i = 0; i < NR * FLOAT_TOKENS; i++) v = tiisg == i ? sums[i] : v;
    if (a.split > 1) {
        partials[sgitg * SIMD_WIDTH + tiisg] = v;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (part != 0) return;
        for (uint p = 1; p < a.split; p++) v += partials[(p * sets + set) * SIMD_WIDTH + tiisg];
    }
    uint r = first + tiisg / FLOAT_TOKENS;
    uint j = tiisg % FLOAT_TOKENS;
    if (r < a.rows && j < n) {
        device float * out = y + (first_token + j) * a.y_stride + r;
        *out = a.add != 0 ? *out + v : v;
    }
}

struct NormArgs {
    uint cols;
    float eps;
};

// y[t] = x[t] * w / rms(x[t]) (rows of cols values) for each token with a row. Grid: (tokens) threadgroups of
// GLIMMER_WIDE_SIMDGROUPS SIMD-groups; scratch: GLIMMER_WIDE_SIMDGROUPS floats.
kernel void rms_norm_rows(constant NormArgs & a [[buffer(0)]],
                          device const float * x [[buffer(1)]],
                          device const float * w [[buffer(2)]],
                          device float * y [[buffer(3)]],
                          constant StepArgs * steps [[buffer(4)]],
                          threadgroup float * scratch TG_MEM(0),
                          uint3 tgpig [[threadgroup_position_in_grid]],
                          ushort tiitg [[thread_index_in_threadgroup]],
                          ushort tiisg [[thread_index_in_simdgroup]],
                          ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    if (steps[tgpig.x].kv_len == 0) return;
    x += tgpig.x * a.cols;
    y += tgpig.x * a.cols;
    float scale = rms_scale(x, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, threads);
    for (uint i = tiitg; i < a.cols; i += threads) y[i] = x[i] * scale * w[i];
}

// ---- the attention of a prompt batch, on tiles ----
// (mla_rope_cache, which writes every token's cache row first, is in attention.metal.)
//
// MLA absorbed attention (docs/MODEL.md §4) flash-attention style: every head of every token is a query row of
// latent + rope values (q's rows in order: token * heads + head), and all of them score the same cached rows
// (the one latent head), whose latent part is also the value. A threadgroup takes FA_QUERIES query rows and
// walks the keys its tokens see in blocks of FA_KEYS: S = Q K^T on the matrix units, the online softmax in float
// (a running max and sum per query row), O = O * correction + P V on the matrix units, O held in registers
// across the blocks. The cache holds halves, so keys and values enter the matrix units as they are; queries and
// probabilities enter as two halves each (hi and lo, as mm_tile's activations): two products per value, hi and
// lo of the float operand times the half one, keep the float operand's ~22 bits. (One half product, queries and
// probabilities as one half too, moved small-q4_k_m's prompt logits by 4 of their 12.8 range on the emulator.)

#define FA_QUERIES GLIMMER_FA_QUERIES
#define FA_KEYS GLIMMER_FA_KEYS
#define FA_DEPTH GLIMMER_FA_DEPTH
#define FA_VALUES GLIMMER_FA_VALUES
#define FA_MAX_LATENT GLIMMER_FA_MAX_LATENT
#define FA_SPLITS GLIMMER_FA_SPLITS
#define FA_SPLIT_KEYS GLIMMER_FA_SPLIT_KEYS
#define FA_DEPTH_STRIDE (FA_DEPTH + 8)     // halves between two rows of a step's staged queries or keys
#define FA_KEY_STRIDE (FA_KEYS + 8)        // halves between two rows of the probabilities or the transposed values
#define FA_SCORE_STRIDE (FA_QUERIES + 4)   // floats between two keys' scores
#define FA_OUT_STRIDE 20                   // floats between two query rows of a SIMD-group's 16-value output tile
#define FA_KEY_TILES (FA_KEYS / 8)          // the scores: SIMD-group s multiplies query rows 16 (s / FA_KEY_TILES) ..
                                           // + 16 with keys 8 (s % FA_KEY_TILES) .. + 8 of a block
#define FA_VALUE_TILES (FA_VALUES / GLIMMER_FA_SIMDGROUPS / 16)  // 16-value tiles of a SIMD-group per step of values
#define FA_QUERY_TILES (FA_QUERIES / 8)    // 8-query tiles of the weighted sums

struct FlashAttentionArgs {
    uint heads;
    uint latent;
    uint rope;
    uint tokens;     // tokens of the batch
    float scale;     // kq_scale
};

// Keys query row `query` sees: its token's kv_len (the cached prefix and the batch's tokens up to its own), 0 for
// a row past the batch or of a token without a row.
static inline uint fa_keys(constant FlashAttentionArgs & a, constant StepArgs * steps, uint query) {
    uint t = query / a.heads;
    return t < a.tokens ? steps[t].kv_len : 0;
}

// x and y side by side, one 32-bit store (4-byte aligned).
static inline void fa_store_pair(half x, half y, threadgroup half * at) {
    half2 h;
    h.x = x;
    h.y = y;
    *((threadgroup uint *) at) = as_type<uint>(h);
}

static inline float4 fa_zero4() {
    float4 v;
    v.x = v.y = v.z = v.w = 0.0f;
    return v;
}

static inline half4 fa_zero_half4() {
    half4 v;
    v.x = v.y = v.z = v.w = (half) 0.0f;
    return v;
}

// What thread `tid` stages of a step of the scores: the FA_DEPTH values from d0 of the threadgroup's query rows
// (first ..), FA_QUERY_LOADS float4s, and of keys u .. u + FA_KEYS, FA_KEY_LOADS half4s (row tid / (FA_DEPTH / 4),
// then every FA_SIMDGROUPS * SIMD_WIDTH / (FA_DEPTH / 4) rows); values past a row's end, rows without keys and keys
// past kv_end give 0.
#define FA_QUERY_LOADS (FA_QUERIES * (FA_DEPTH / 4) / (GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH))
#define FA_KEY_LOADS (FA_KEYS * (FA_DEPTH / 4) / (GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH))
static inline void fa_load_scores_step(constant FlashAttentionArgs & a, constant StepArgs * steps, device const float * q,
                                       device const half * keys, uint first, uint u, uint kv_end, uint d0, uint tid,
                                       thread float4 * qv, thread half4 * kv) {
    const uint row = a.latent + a.rope;
    #pragma unroll
    for (uint j = 0; j < FA_QUERY_LOADS; j++) {
        uint i = tid + j * GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH;
        uint r = i / (FA_DEPTH / 4);
        uint d = (i % (FA_DEPTH / 4)) * 4;
        qv[j] = fa_zero4();
        if (d0 + d < row && fa_keys(a, steps, first + r) > 0) qv[j] = *((device const float4 *) (q + (first + r) * row + d0 + d));
    }
    #pragma unroll
    for (uint j = 0; j < FA_KEY_LOADS; j++) {
        uint i = tid + j * GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH;
        uint k = i / (FA_DEPTH / 4);
        uint d = (i % (FA_DEPTH / 4)) * 4;
        kv[j] = fa_zero_half4();
        if (d0 + d < row && u + k < kv_end) kv[j] = *((device const half4 *) (keys + (u + k) * row + d0 + d));
    }
}

// The half4s thread `tid` stages of a step of the weighted sums: latent values c0 + c .. c0 + c + 4 of keys u + k and
// u + k + 1 (x and y), FA_VALUE_LOADS pairs (e = tid, tid + threads, ...: k = 2 (e / (FA_VALUES / 4)), c = 4 (e %
// (FA_VALUES / 4))); values past the latent ones and keys past kv_end give 0.
#define FA_VALUE_LOADS (FA_KEYS / 2 * (FA_VALUES / 4) / (GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH))
static inline void fa_load_values_step(constant FlashAttentionArgs & a, device const half * keys, uint u, uint kv_end,
                                       uint c0, uint tid, thread half4 * x, thread half4 * y) {
    const uint row = a.latent + a.rope;
    #pragma unroll
    for (uint j = 0; j < FA_VALUE_LOADS; j++) {
        uint e = tid + j * GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH;
        uint k = 2 * (e / (FA_VALUES / 4));
        uint c = (e % (FA_VALUES / 4)) * 4;
        x[j] = fa_zero_half4();
        y[j] = fa_zero_half4();
        if (c0 + c < a.latent) {
            if (u + k < kv_end) x[j] = *((device const half4 *) (keys + (u + k) * row + c0 + c));
            if (u + k + 1 < kv_end) y[j] = *((device const half4 *) (keys + (u + k + 1) * row + c0 + c));
        }
    }
}

// Keys any of query rows first .. first + FA_QUERIES sees (one threadgroup's of mla_flash_attention).
static inline uint fa_block_keys(constant FlashAttentionArgs & a, constant StepArgs * steps, uint first) {
    uint kv_end = 0;
    for (uint r = 0; r < FA_QUERIES; r++) kv_end = max(kv_end, fa_keys(a, steps, first + r));
    return kv_end;
}

// Parts the keys of a block of query rows that sees kv_end keys are split into: one per FA_SPLIT_KEYS keys, at
// most FA_SPLITS (the grid's). A block of one part writes o_lat itself; more leave partial sums to mla_flash_merge.
static inline uint fa_parts(uint kv_end) {
    return min(max((kv_end + FA_SPLIT_KEYS - 1) / FA_SPLIT_KEYS, 1u), (uint) FA_SPLITS);
}

// Where a part's partial sums of query row `query` lie in `partials` (queries: tokens * heads): the unnormalized
// latent sums at fa_partial_sums, the running max and sum of its softmax at fa_partial_state.
static inline uint fa_partial_sums(uint part, uint query, uint queries, uint latent) {
    return (part * queries + query) * latent;
}
static inline uint fa_partial_state(uint part, uint query, uint queries, uint latent) {
    return FA_SPLITS * queries * latent + (part * queries + query) * 2;
}

// o_lat[query][0 .. latent) = the softmax-weighted sum of the cached latent rows the query sees, for query rows
// tgpig.x * FA_QUERIES .. + FA_QUERIES (the tokens of a prompt batch belong to one sequence: the first token's
// kv_row is every token's). Grid: (ceil(tokens * heads / FA_QUERIES), FA_SPLITS) threadgroups of
// GLIMMER_FA_SIMDGROUPS SIMD-groups; mem: Geometry.faMemoryFloats() floats. The keys the rows see are split into
// fa_parts parts of whole key blocks, threadgroup (x, p) taking part p (none for p >= parts): with one part it
// writes o_lat, with more its unnormalized sums and softmax state into `partials` (fa_partial_sums,
// fa_partial_state), which mla_flash_merge combines. Per block of keys u .. u + FA_KEYS:
//   scores: SIMD-group s multiplies 16 queries (hi and lo) with 8 keys (one tile; FA_KEY_TILES), FA_DEPTH values per
//           step;
//   softmax: 8 threads per query row, FA_KEYS / 8 keys each: the block's max, the correction exp(m_old - m_new)
//            (into the diagonal matrices) and the probabilities as hi and lo halves;
//   sums:    each SIMD-group rescales its tiles by the corrections and adds P V (P hi and lo) for its values, all
//            queries: per step of FA_VALUES values (the block's values staged transposed, a row of keys per value)
//            FA_VALUES / GLIMMER_FA_SIMDGROUPS of them.
// Latent values past `latent` and keys past the threadgroup's last are staged as 0; keys past a query row's own
// last get probability 0. Requires latent + rope and latent multiples of 4, latent <= FA_MAX_LATENT.
[[max_total_threads_per_threadgroup(GLIMMER_FA_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void mla_flash_attention(constant FlashAttentionArgs & a [[buffer(0)]],
                                constant StepArgs * steps [[buffer(1)]],
                                device const float * q [[buffer(2)]],
                                device const half * cache [[buffer(3)]],
                                device float * o_lat [[buffer(4)]],
                                device float * partials [[buffer(5)]],
                                threadgroup float * mem TG_MEM(0),
                                uint3 tgpig [[threadgroup_position_in_grid]],
                                ushort tiitg [[thread_index_in_threadgroup]],
                                ushort tiisg [[thread_index_in_simdgroup]],
                                ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_FA_SIMDGROUPS * SIMD_WIDTH;
    const uint row = a.latent + a.rope;
    const uint first = tgpig.x * FA_QUERIES;
    uint t0 = first / a.heads;
    if (t0 >= a.tokens || steps[t0].kv_len == 0) return;  // only the end of a batch is unused
    device const half * keys = cache + steps[t0].kv_row * row;
    uint kv_end = fa_block_keys(a, steps, first);  // keys any of the threadgroup's rows sees
    // this threadgroup's part of the key blocks: u_begin .. u_end
    uint parts = fa_parts(kv_end);
    uint part = tgpig.y;
    if (part >= parts) return;
    uint key_blocks = (kv_end + FA_KEYS - 1) / FA_KEYS;
    uint per_part = (key_blocks + parts - 1) / parts;
    uint u_begin = min(part * per_part, key_blocks) * FA_KEYS;
    uint u_end = min(kv_end, (part + 1) * per_part * FA_KEYS);

    threadgroup half * stage = (threadgroup half *) mem;
    threadgroup float * scores = mem + GLIMMER_FA_STAGE_FLOATS;                  // [key][query]
    threadgroup half * p_hi = (threadgroup half *) (scores + FA_KEYS * FA_SCORE_STRIDE);  // [query][key]
    threadgroup half * p_lo = p_hi + FA_QUERIES * FA_KEY_STRIDE;
    threadgroup float * diag = (threadgroup float *) (p_lo + FA_QUERIES * FA_KEY_STRIDE);  // per query tile, 8 x 8
    threadgroup float * norm = diag + FA_QUERIES * 8;                             // 1 / sum per query row

    // the softmax state of query row `mine`, the same in its 8 threads (keys mine_j, mine_j + 8, ...)
    uint mine = tiitg / 8;
    uint mine_j = tiitg % 8;
    uint mine_keys = fa_keys(a, steps, first + mine);
    float m = -INFINITY;
    float l = 0.0f;
    for (uint i = tiitg; i < FA_QUERIES * 8; i += threads) diag[i] = 0.0f;

    // O^T tiles: acc[v][i][g] holds the sums of values v * FA_VALUES + 16 (sgitg * FA_VALUE_TILES + i) .. + 16 of
    // queries 8 g .. 8 g + 8
    MmaTile acc[FA_MAX_LATENT / FA_VALUES][FA_VALUE_TILES][FA_QUERY_TILES];
    #pragma unroll
    for (uint v = 0; v < FA_MAX_LATENT / FA_VALUES; v++) {
        #pragma unroll
        for (uint i = 0; i < FA_VALUE_TILES; i++) {
            #pragma unroll
            for (uint g = 0; g < FA_QUERY_TILES; g++) mma_zero(acc[v][i][g]);
        }
    }

    for (uint u = u_begin; u < u_end; u += FA_KEYS) {
        // ---- scores: S tile of this SIMD-group's 16 queries x 8 keys ----
        MmaTile s_acc;
        mma_zero(s_acc);
        threadgroup half * q_hi = stage;
        threadgroup half * q_lo = q_hi + FA_QUERIES * FA_DEPTH_STRIDE;
        threadgroup half * k_staged = q_lo + FA_QUERIES * FA_DEPTH_STRIDE;
        // each step's loads are issued before the previous step's multiplies, so their latency passes under them
        float4 staged_q[FA_QUERY_LOADS];
        half4 staged_k[FA_KEY_LOADS];
        fa_load_scores_step(a, steps, q, keys, first, u, kv_end, 0, tiitg, staged_q, staged_k);
        for (uint d0 = 0; d0 < row; d0 += FA_DEPTH) {
            #pragma unroll
            for (uint j = 0; j < FA_QUERY_LOADS; j++) {
                uint i = tiitg + j * threads;
                uint r = i / (FA_DEPTH / 4);
                uint d = (i % (FA_DEPTH / 4)) * 4;
                split_half4(staged_q[j], q_hi + r * FA_DEPTH_STRIDE + d, q_lo + r * FA_DEPTH_STRIDE + d);
            }
            #pragma unroll
            for (uint j = 0; j < FA_KEY_LOADS; j++) {
                uint i = tiitg + j * threads;
                uint k = i / (FA_DEPTH / 4);
                uint d = (i % (FA_DEPTH / 4)) * 4;
                *((threadgroup half4 *) (k_staged + k * FA_DEPTH_STRIDE + d)) = staged_k[j];
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (d0 + FA_DEPTH < row) {
                fa_load_scores_step(a, steps, q, keys, first, u, kv_end, d0 + FA_DEPTH, tiitg, staged_q, staged_k);
            }
            #pragma unroll
            for (uint kk = 0; kk < FA_DEPTH; kk += 16) {
                MmaA qh;
                MmaA ql;
                uint qa = (sgitg / FA_KEY_TILES) * 16 * FA_DEPTH_STRIDE + kk;
                mma_load_a(qh, q_hi + qa, FA_DEPTH_STRIDE, tiisg);
                mma_load_a(ql, q_lo + qa, FA_DEPTH_STRIDE, tiisg);
                MmaB kh;
                mma_load_b(kh, k_staged + (sgitg % FA_KEY_TILES) * 8 * FA_DEPTH_STRIDE + kk, FA_DEPTH_STRIDE, tiisg);
                mma_tile(s_acc, qh, kh);
                mma_tile(s_acc, ql, kh);
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        // the first step of the values' loads, under the softmax
        half4 vx[FA_VALUE_LOADS];
        half4 vy[FA_VALUE_LOADS];
        fa_load_values_step(a, keys, u, kv_end, 0, tiitg, vx, vy);
        mma_store_tokens(s_acc, scores + (sgitg % FA_KEY_TILES) * 8 * FA_SCORE_STRIDE + (sgitg / FA_KEY_TILES) * 16,
                         FA_SCORE_STRIDE, tiisg);
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // ---- the online softmax of the block ----
        float s[FA_KEYS / 8];
        float block_max = -INFINITY;
        #pragma unroll
        for (uint i = 0; i < FA_KEYS / 8; i++) {
            uint k = mine_j + 8 * i;
            s[i] = u + k < mine_keys ? scores[k * FA_SCORE_STRIDE + mine] * a.scale : -INFINITY;
            block_max = max(block_max, s[i]);
        }
        for (ushort o = 1; o < 8; o <<= 1) block_max = max(block_max, simd_shuffle_xor(block_max, o));
        float m_new = max(m, block_max);
        // A row that sees key u_begin has it in its part's first block, so m is finite from then on; a row that sees
        // none of the part's keys (past the batch, or a token before them) keeps correction 1 and probabilities 0.
        // (Tested by the key counts, not by comparing with infinity, which Metal's fast math may assume away.)
        float correction = mine_keys <= u_begin ? 1.0f : exp(m - m_new);
        float sum = 0.0f;
        #pragma unroll
        for (uint i = 0; i < FA_KEYS / 8; i++) {
            uint k = mine_j + 8 * i;
            float p = u + k < mine_keys ? exp(s[i] - m_new) : 0.0f;
            sum += p;
            half hi = (half) p;
            p_hi[mine * FA_KEY_STRIDE + k] = hi;
            p_lo[mine * FA_KEY_STRIDE + k] = split_lo(p, hi);
        }
        for (ushort o = 1; o < 8; o <<= 1) sum += simd_shuffle_xor(sum, o);
        l = l * correction + sum;
        m = m_new;
        if (mine_j == 0) diag[(mine / 8) * 64 + (mine % 8) * 9] = correction;
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // ---- O = O * correction + P V ----
        threadgroup half * v_staged = stage;  // [value][key]
        #pragma unroll
        for (uint v = 0; v < FA_MAX_LATENT / FA_VALUES; v++) {
            uint c0 = v * FA_VALUES;
            if (c0 < a.latent) {
                #pragma unroll
                for (uint i = 0; i < FA_VALUE_TILES; i++) {
                    #pragma unroll
                    for (uint g = 0; g < FA_QUERY_TILES; g++) mma_scale_tokens(acc[v][i][g], diag + g * 64, tiisg);
                }
                // a thread takes 4 values of keys k and k + 1: pairs of keys side by side in the transposed rows
                #pragma unroll
                for (uint j = 0; j < FA_VALUE_LOADS; j++) {
                    uint e = tiitg + j * threads;
                    uint k = 2 * (e / (FA_VALUES / 4));
                    uint c = (e % (FA_VALUES / 4)) * 4;
                    threadgroup half * at = v_staged + c * FA_KEY_STRIDE + k;
                    fa_store_pair(vx[j].x, vy[j].x, at);
                    fa_store_pair(vx[j].y, vy[j].y, at + FA_KEY_STRIDE);
                    fa_store_pair(vx[j].z, vy[j].z, at + 2 * FA_KEY_STRIDE);
                    fa_store_pair(vx[j].w, vy[j].w, at + 3 * FA_KEY_STRIDE);
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                // the next step's loads under this step's multiplies
                if (c0 + FA_VALUES < a.latent) fa_load_values_step(a, keys, u, kv_end, c0 + FA_VALUES, tiitg, vx, vy);
                #pragma unroll
                for (uint kk = 0; kk < FA_KEYS; kk += 16) {
                    #pragma unroll
                    for (uint i = 0; i < FA_VALUE_TILES; i++) {
                        MmaA vt;
                        mma_load_a(vt, v_staged + (sgitg * FA_VALUE_TILES + i) * 16 * FA_KEY_STRIDE + kk, FA_KEY_STRIDE,
                                   tiisg);
                        #pragma unroll
                        for (uint g = 0; g < FA_QUERY_TILES; g++) {
                            MmaB ph;
                            MmaB pl;
                            mma_load_b(ph, p_hi + g * 8 * FA_KEY_STRIDE + kk, FA_KEY_STRIDE, tiisg);
                            mma_load_b(pl, p_lo + g * 8 * FA_KEY_STRIDE + kk, FA_KEY_STRIDE, tiisg);
                            mma_tile(acc[v][i][g], vt, ph);
                            mma_tile(acc[v][i][g], vt, pl);
                        }
                    }
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
        }
    }

    // ---- o_lat = O / sum (or the part's O, m and sum), a 16-value tile at a time through this SIMD-group's part
    // of the staging area ----
    uint queries = a.tokens * a.heads;
    if (mine_j == 0) {
        norm[mine] = parts > 1 ? 1.0f : l > 0.0f ? 1.0f / l : 0.0f;
        if (parts > 1 && first + mine < queries) {
            uint at = fa_partial_state(part, first + mine, queries, a.latent);
            partials[at] = m;
            partials[at + 1] = l;
        }
    }
    device float * dst = parts > 1 ? partials + fa_partial_sums(part, 0, queries, a.latent) : o_lat;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    threadgroup float * out = mem + sgitg * 8 * FA_OUT_STRIDE;
    #pragma unroll
    for (uint v = 0; v < FA_MAX_LATENT / FA_VALUES; v++) {
        if (v * FA_VALUES < a.latent) {
            #pragma unroll
            for (uint i = 0; i < FA_VALUE_TILES; i++) {
                uint c0 = v * FA_VALUES + (sgitg * FA_VALUE_TILES + i) * 16;
                #pragma unroll
                for (uint g = 0; g < FA_QUERY_TILES; g++) {
                    mma_store_tokens(acc[v][i][g], out, FA_OUT_STRIDE, tiisg);
                    simdgroup_barrier(mem_flags::mem_threadgroup);
                    for (uint e = tiisg; e < 8 * 16; e += SIMD_WIDTH) {
                        uint j = e / 16;
                        uint c = e % 16;
                        uint query = first + g * 8 + j;
                        if (c0 + c < a.latent && fa_keys(a, steps, query) > 0) {
                            dst[query * a.latent + c0 + c] = out[j * FA_OUT_STRIDE + c] * norm[g * 8 + j];
                        }
                    }
                    simdgroup_barrier(mem_flags::mem_threadgroup);
                }
            }
        }
    }
}

// o_lat[query] for the query rows whose keys mla_flash_attention split into several parts: the parts' sums
// rescaled to the largest running max, over the sum of their softmax sums (a part that saw none of a row's keys
// has sum 0 and is left out). Grid: (ceil(tokens * heads / FA_QUERIES), FA_QUERIES / GLIMMER_WIDE_SIMDGROUPS)
// threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups: SIMD-group s of threadgroup (x, y) merges query row
// x * FA_QUERIES + y * GLIMMER_WIDE_SIMDGROUPS + s; blocks of one part are left as mla_flash_attention wrote them.
kernel void mla_flash_merge(constant FlashAttentionArgs & a [[buffer(0)]],
                            constant StepArgs * steps [[buffer(1)]],
                            device const float * partials [[buffer(2)]],
                            device float * o_lat [[buffer(3)]],
                            uint3 tgpig [[threadgroup_position_in_grid]],
                            ushort tiisg [[thread_index_in_simdgroup]],
                            ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint first = tgpig.x * FA_QUERIES;
    uint query = first + tgpig.y * GLIMMER_WIDE_SIMDGROUPS + sgitg;
    uint queries = a.tokens * a.heads;
    if (query >= queries || fa_keys(a, steps, query) == 0) return;
    uint parts = fa_parts(fa_block_keys(a, steps, first));
    if (parts == 1) return;
    float m = -INFINITY;
    for (uint p = 0; p < parts; p++) {
        uint at = fa_partial_state(p, query, queries, a.latent);
        if (partials[at + 1] > 0.0f) m = max(m, partials[at]);
    }
    float weight[FA_SPLITS];
    float sum = 0.0f;
    #pragma unroll
    for (uint p = 0; p < FA_SPLITS; p++) {
        uint at = fa_partial_state(p, query, queries, a.latent);
        weight[p] = p < parts && partials[at + 1] > 0.0f ? exp(partials[at] - m) : 0.0f;
        sum += p < parts ? weight[p] * partials[at + 1] : 0.0f;
    }
    float scale = 1.0f / sum;
    for (uint c = tiisg * 4; c < a.latent; c += SIMD_WIDTH * 4) {
        float4 v = fa_zero4();
        #pragma unroll
        for (uint p = 0; p < FA_SPLITS; p++) {
            if (weight[p] != 0.0f) {
                float4 o = *((device const float4 *) (partials + fa_partial_sums(p, query, queries, a.latent) + c));
                v.x += weight[p] * o.x;
                v.y += weight[p] * o.y;
                v.z += weight[p] * o.z;
                v.w += weight[p] * o.w;
            }
        }
        v.x *= scale;
        v.y *= scale;
        v.z *= scale;
        v.w *= scale;
        *((device float4 *) (o_lat + query * a.latent + c)) = v;
    }
}

// ---- the experts, grouped by expert ----

// Routed blocks of a batch: each expert's list in blocks of EXPERT_TOKENS entries, at most this many in all.
static inline uint routed_blocks(uint tokens, uint routed, uint experts) {
    return routed > 0 ? (tokens * routed + EXPERT_TOKENS - 1) / EXPERT_TOKENS + experts : 0;
}

// Grid: (ceil(tokens / GLIMMER_WIDE_SIMDGROUPS)) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups: SIMD-group s
// of threadgroup g makes the expert selection (select_experts) of token g * GLIMMER_WIDE_SIMDGROUPS + s from its
// router logits into ids and weights; the ids of the tokens without a row (kv_len 0) are -1.
kernel void moe_select(constant GateUpArgs & a [[buffer(0)]],
                       device const float * logits [[buffer(1)]],
                       device const float * bias [[buffer(2)]],
                       device int * ids [[buffer(3)]],
                       device float * weights [[buffer(4)]],
                       constant StepArgs * steps [[buffer(5)]],
                       uint3 tgpig [[threadgroup_position_in_grid]],
                       ushort tiisg [[thread_index_in_simdgroup]],
                       ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint t = tgpig.x * GLIMMER_WIDE_SIMDGROUPS + sgitg;
    if (t >= a.tokens) return;
    if (steps[t].kv_len == 0) {
        for (uint k = tiisg; k < a.routed; k += SIMD_WIDTH) ids[t * a.routed + k] = -1;
        return;
    }
    select_experts(a, logits + t * a.experts, bias, 0, tiisg == 0, ids + t * a.routed, weights + t * a.routed, tiisg);
}

// Grid: (experts) threadgroups of GLIMMER_HEAD_SIMDGROUPS SIMD-groups; threadgroup e lists the (token, slot) entries
// moe_select routed to expert e, as token * routed + slot in token order, at routes[e * tokens ..], its length in
// counts[e], and its blocks of EXPERT_TOKENS entries (expert << 16 | first entry) in the table blocks[0 .. routed_blocks)
// after the blocks of the experts before it (every threadgroup counts every expert's entries to know where); the
// last expert's threadgroup marks the unused end 0xFFFFFFFF (so that the expert kernels' grids need not depend on
// the routing). scratch: tokens * routed + GLIMMER_HEAD_SIMDGROUPS * (SIMD_WIDTH + 1) + experts floats.
[[max_total_threads_per_threadgroup(GLIMMER_HEAD_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void moe_route(constant GateUpArgs & a [[buffer(0)]],
                      device const int * ids [[buffer(1)]],
                      device uint * routes [[buffer(2)]],
                      device uint * counts [[buffer(3)]],
                      device uint * blocks [[buffer(4)]],
                      threadgroup float * scratch TG_MEM(0),
                      uint3 tgpig [[threadgroup_position_in_grid]],
                      ushort tiitg [[thread_index_in_threadgroup]],
                      ushort tiisg [[thread_index_in_simdgroup]],
                      ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_HEAD_SIMDGROUPS * SIMD_WIDTH;
    uint entries = a.tokens * a.routed;
    int e = (int) tgpig.x;
    threadgroup int * picked = (threadgroup int *) scratch;
    threadgroup uint * partial = (threadgroup uint *) (picked + entries);   // a count per thread
    threadgroup uint * listed = partial + threads;                          // every expert's count
    threadgroup uint * simd_totals = listed + a.experts;
    for (uint i = tiitg; i < entries; i += threads) picked[i] = ids[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // every expert's count: `parts` threads per expert (at least 4: the host allows 256 experts) each count a share
    uint parts = threads / a.experts;
    uint share = (entries + parts - 1) / parts;
    if (tiitg < parts * a.experts) {
        int x = (int) (tiitg % a.experts);
        uint from = (tiitg / a.experts) * share;
        uint c = 0;
        for (uint i = from; i < min(from + share, entries); i++) c += picked[i] == x ? 1 : 0;
        partial[tiitg] = c;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tiitg < a.experts) {
        uint c = 0;
        for (uint p = 0; p < parts; p++) c += partial[p * a.experts + tiitg];
        listed[tiitg] = c;
    }
    // this expert's list: thread t takes `per` consecutive entries, and the matches before them (a prefix sum
    // over the SIMD-group by shuffles, then over the SIMD-groups) say where its own go
    uint per = (entries + threads - 1) / threads;
    uint from = min(tiitg * per, entries);
    uint to = min(from + per, entries);
    uint mine = 0;
    for (uint i = from; i < to; i++) mine += picked[i] == e ? 1 : 0;
    uint upto = mine;
    for (ushort o = 1; o < SIMD_WIDTH; o <<= 1) {
        uint below = simd_shuffle_up(upto, o);
        if (tiisg >= o) upto += below;
    }
    if (tiisg == SIMD_WIDTH - 1) simd_totals[sgitg] = upto;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint at = upto - mine;
    for (uint s = 0; s < sgitg; s++) at += simd_totals[s];
    for (uint i = from; i < to; i++) {
        if (picked[i] == e) routes[e * a.tokens + at++] = i;
    }
    if (tiitg == 0) {
        uint b = 0;
        for (int x = 0; x < e; x++) b += (listed[x] + EXPERT_TOKENS - 1) / EXPERT_TOKENS;
        for (uint first = 0; first < listed[e]; first += EXPERT_TOKENS) blocks[b++] = (uint) e << 16 | first;
        counts[e] = listed[e];
        if (e + 1 == (int) a.experts) {
            for (; b < routed_blocks(a.tokens, a.routed, a.experts); b++) blocks[b] = 0xFFFFFFFFu;
        }
    }
}

// Which entries threadgroup column x of the expert kernels takes: x < routed_blocks is a block of moe_route's
// table (expert, first entry of its list), the rest are the shared expert's (or the dense FFN's) blocks of
// tokens; n is how many entries the block holds (0: none, the threadgroup has nothing to do).
struct ExpertBlock {
    bool shared;
    uint expert;
    uint first;
    uint n;
};

static inline ExpertBlock expert_block(device const uint * blocks, device const uint * counts,
                                       constant StepArgs * steps, uint x, uint tokens, uint routed, uint experts) {
    ExpertBlock b;
    uint table = routed_blocks(tokens, routed, experts);
    b.shared = x >= table;
    if (b.shared) {
        b.expert = experts;
        b.first = (x - table) * EXPERT_TOKENS;
        b.n = batch_tokens(steps, b.first, EXPERT_TOKENS, tokens);
        return b;
    }
    uint entry = blocks[x];
    b.expert = entry >> 16;
    b.first = entry & 0xFFFF;
    b.n = entry == 0xFFFFFFFFu ? 0 : min((uint) EXPERT_TOKENS, counts[b.expert] - b.first);
    return b;
}

// Grid: (routed_blocks + ceil(tokens / EXPERT_TOKENS) (shared blocks, if there is a shared expert),
// ceil(max(rows, shared_rows) / (EXPERT_ROWS / 2))) threadgroups of MM_SIMDGROUPS SIMD-groups: threadgroup (b, g)
// takes the entries of block b (expert_block) and rows g * EXPERT_ROWS / 2 .. + EXPERT_ROWS / 2 of gate and of up,
// one tile (mm_tile: gate the upper half, up the lower), and writes act[t][slot][row] = silu(gate) * up (the shared
// expert's slot is `routed`). x: the normalized input, a row per token. tiles: Geometry.mmMemoryFloats(EXPERT_ROWS,
// EXPERT_TOKENS) floats.
kernel void moe_experts_gate_up(constant GateUpArgs & a [[buffer(0)]],
                                device const float * x [[buffer(1)]],
                                device const char * gate_exps [[buffer(2)]],
                                device const char * up_exps [[buffer(3)]],
                                device const char * gate_shared [[buffer(4)]],
                                device const char * up_shared [[buffer(5)]],
                                device const uint * routes [[buffer(6)]],
                                device const uint * counts [[buffer(7)]],
                                device const uint * blocks [[buffer(8)]],
                                device float * act [[buffer(9)]],
                                constant StepArgs * steps [[buffer(10)]],
                                threadgroup float * tiles TG_MEM(0),
                                uint3 tgpig [[threadgroup_position_in_grid]],
                                ushort tiitg [[thread_index_in_threadgroup]],
                                ushort tiisg [[thread_index_in_simdgroup]],
                                ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint half_rows = EXPERT_ROWS / 2;
    const uint float_stride = EXPERT_ROWS + MM_FLOAT_PAD;
    ExpertBlock blk = expert_block(blocks, counts, steps, tgpig.x, a.tokens, a.routed, a.experts);
    uint z = blk.expert;
    bool shared = blk.shared;
    uint rows = shared ? a.shared_rows : a.rows;
    uint first_entry = blk.first;
    uint n = blk.n;
    uint first = tgpig.y * half_rows;
    if (n == 0 || first >= rows) return;
    WeightRows gate = shared ? weight_rows(a.shared_gate_type, gate_shared, a.cols, first, rows)
                             : weight_rows(a.gate_type, gate_exps + z * a.rows * row_bytes(a.gate_type, a.cols), a.cols,
                                           first, rows);
    WeightRows up = shared ? weight_rows(a.shared_up_type, up_shared, a.cols, first, rows)
                           : weight_rows(a.up_type, up_exps + z * a.rows * row_bytes(a.up_type, a.cols), a.cols, first,
                                         rows);
    device const uint * entries = routes + z * a.tokens + first_entry;
    if (shared) {
        ConsecutiveRows src = {x, a.cols, first_entry};
        mm_tile<EXPERT_ROWS, EXPERT_TOKENS>(gate, up, src, n, a.cols, tiles, tiitg, tiisg, sgitg);
    } else {
        ListedRows src = {x, a.cols, 1, a.routed, entries};
        mm_tile<EXPERT_ROWS, EXPERT_TOKENS>(gate, up, src, n, a.cols, tiles, tiitg, tiisg, sgitg);
    }
    uint i = tiitg % half_rows;
    if (first + i >= rows) return;
    for (uint j = tiitg / half_rows; j < n; j += MM_THREADS / half_rows) {
        float g = tiles[j * float_stride + i];
        float u = tiles[j * float_stride + half_rows + i];
        uint token = shared ? first_entry + j : entries[j] / a.routed;
        uint slot = shared ? a.routed : entries[j] % a.routed;
        act[(token * (a.routed + 1) + slot) * a.act_stride + first + i] = g / (1.0f + exp(-g)) * u;
    }
}

// Grid: (as moe_experts_gate_up, ceil(rows / EXPERT_ROWS)) threadgroups of MM_SIMDGROUPS SIMD-groups:
// y[t][slot][row] = down . act[t][slot] for the entries of block b (expert_block), one tile as mat_mat's. tiles:
// Geometry.mmMemoryFloats(EXPERT_ROWS, EXPERT_TOKENS) floats.
kernel void moe_experts_down(constant DownArgs & a [[buffer(0)]],
                             device const char * down_exps [[buffer(1)]],
                             device const char * down_shared [[buffer(2)]],
                             device const float * act [[buffer(3)]],
                             device const uint * routes [[buffer(4)]],
                             device const uint * counts [[buffer(5)]],
                             device const uint * blocks [[buffer(6)]],
                             device float * y [[buffer(7)]],
                             constant StepArgs * steps [[buffer(8)]],
                             threadgroup float * tiles TG_MEM(0),
                             uint3 tgpig [[threadgroup_position_in_grid]],
                             ushort tiitg [[thread_index_in_threadgroup]],
                             ushort tiisg [[thread_index_in_simdgroup]],
                             ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    ExpertBlock blk = expert_block(blocks, counts, steps, tgpig.x, a.tokens, a.routed, a.experts);
    uint z = blk.expert;
    bool shared = blk.shared;
    uint first_entry = blk.first;
    uint n = blk.n;
    if (n == 0) return;
    uint first = tgpig.y * EXPERT_ROWS;
    uint slots = a.routed + 1;
    uint type = shared ? a.shared_type : a.type;
    uint cols = shared ? a.shared_cols : a.cols;
    device const char * w = shared ? down_shared : down_exps + z * a.rows * row_bytes(type, a.cols);
    WeightRows upper = weight_rows(type, w, cols, first, a.rows);
    WeightRows lower = weight_rows(type, w, cols, first + EXPERT_ROWS / 2, a.rows);
    device const uint * entries = routes + z * a.tokens + first_entry;
    if (shared) {
        ConsecutiveRows src = {act + a.routed * a.act_stride, slots * a.act_stride, first_entry};
        mm_tile<EXPERT_ROWS, EXPERT_TOKENS>(upper, lower, src, n, cols, tiles, tiitg, tiisg, sgitg);
    } else {
        ListedRows src = {act, a.act_stride, slots, a.routed, entries};
        mm_tile<EXPERT_ROWS, EXPERT_TOKENS>(upper, lower, src, n, cols, tiles, tiitg, tiisg, sgitg);
    }
    uint r = first + tiitg % EXPERT_ROWS;
    if (r >= a.rows) return;
    for (uint j = tiitg / EXPERT_ROWS; j < n; j += MM_THREADS / EXPERT_ROWS) {
        uint token = shared ? first_entry + j : entries[j] / a.routed;
        uint slot = shared ? a.routed : entries[j] % a.routed;
        y[(token * slots + slot) * a.rows + r] = tiles[j * (EXPERT_ROWS + MM_FLOAT_PAD) + tiitg % EXPERT_ROWS];
    }
}

struct CombineArgs {
    uint rows;     // hidden size
    uint routed;   // routed slots
    uint shared;   // 1: slot `routed` holds the shared expert (or the dense FFN)
};

// x[t][row] += the routing-weighted sum of y[t][0 .. routed)[row] in slot order, plus y[t][routed][row] with
// `shared`. Grid: (tokens, ceil(rows / threads)) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void moe_combine(constant CombineArgs & a [[buffer(0)]],
                        device const float * y [[buffer(1)]],
                        device const float * weights [[buffer(2)]],
                        device float * x [[buffer(3)]],
                        constant StepArgs * steps [[buffer(4)]],
                        uint3 tgpig [[threadgroup_position_in_grid]],
                        ushort tiitg [[thread_index_in_threadgroup]]) {
    uint t = tgpig.x;
    uint row = tgpig.y * GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH + tiitg;
    if (steps[t].kv_len == 0 || row >= a.rows) return;
    uint slots = a.routed + 1;
    float v = 0.0f;
    for (uint k = 0; k < a.routed; k++) v += weights[t * a.routed + k] * y[(t * slots + k) * a.rows + row];
    if (a.shared != 0) v += y[(t * slots + a.routed) * a.rows + row];
    x[t * a.rows + row] += v;
}
