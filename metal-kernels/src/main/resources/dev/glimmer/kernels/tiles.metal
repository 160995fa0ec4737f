// Matrix-unit tiles for the prompt kernels (prompt.metal): a threadgroup multiplies a tile of ROWS weight rows
// with the activations of TOKENS tokens, MM_DEPTH values of the rows at a time. Each step dequantizes the
// weights once into threadgroup memory as half and splits each activation into two halves next to them, hi
// = half(x) and lo = half(x - hi); the SIMD-groups then multiply the weights with both in 16 x 8 tiles on the
// matrix units, accumulating in float. Why two halves: with weights as halves and activations as floats the
// prompts' logits match the CPU's on the oracle models, with activations as one half they moved by up to a
// third of their range on small-q4_k_m (a routing choice flipped); hi + lo holds 22 bits of each activation.
//
// Two tile shapes, both of MM_SIMDGROUPS SIMD-groups that each multiply MM_SIMDGROUP_ROWS rows x
// MM_SIMDGROUP_TOKENS tokens: the dense weights' MM_ROWS x MM_TOKENS (mat_mat: every token of a batch, so
// tiles wide in tokens), and the experts' EXPERT_ROWS x EXPERT_TOKENS (an expert gets about EXPERT_TOKENS
// tokens of a batch, so tiles tall in rows). What bounds a step is not the matrix units but staging (loads,
// dequantizing, stores into threadgroup memory) and the barrier: a SIMD-group's 32 x 32 block reuses each
// weight fragment for 4 token tiles and each activation fragment for 2 row tiles, 32 mma per barrier.
//
// The tile operations (MmaA, MmaB, MmaTile and the mma_* functions) are the one part written per target:
// here with MSL's simdgroup_matrix (Apple GPUs; the emulator runs the same code, its prelude provides
// simdgroup_matrix), and in the CUDA prelude with the tensor cores' mma.sync.m16n8k16.

#define MM_ROWS GLIMMER_MM_ROWS
#define MM_TOKENS GLIMMER_MM_TOKENS
#define EXPERT_ROWS GLIMMER_EXPERT_ROWS
#define EXPERT_TOKENS GLIMMER_EXPERT_TOKENS
#define MM_SIMDGROUP_ROWS GLIMMER_MM_SIMDGROUP_ROWS
#define MM_SIMDGROUP_TOKENS GLIMMER_MM_SIMDGROUP_TOKENS
#define MM_SIMDGROUPS GLIMMER_MM_SIMDGROUPS
#define MM_DEPTH GLIMMER_MM_DEPTH
#define MM_HALF_STRIDE GLIMMER_MM_HALF_STRIDE
#define MM_FLOAT_PAD GLIMMER_MM_FLOAT_PAD

#ifndef __CUDACC__
// A 16 x 16 block of weights (rows x depth), the left operand of mma_tile.
struct MmaA {
    simdgroup_half8x8 m[2][2];
};

// The activations of 8 tokens x 16 values (depth), the right operand of mma_tile.
struct MmaB {
    simdgroup_half8x8 m[2];
};

// A 16 x 8 block of sums (rows x tokens), held by a SIMD-group.
struct MmaTile {
    simdgroup_float8x8 top;
    simdgroup_float8x8 bottom;
};

static inline void mma_zero(thread MmaTile & c) {
    c.top = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    c.bottom = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
}

// The 16 x 16 halves at src (row-major, `stride` halves between rows).
static inline void mma_load_a(thread MmaA & a, threadgroup const half * src, uint stride, ushort lane) {
    simdgroup_load(a.m[0][0], src, stride);
    simdgroup_load(a.m[0][1], src + 8, stride);
    simdgroup_load(a.m[1][0], src + 8 * stride, stride);
    simdgroup_load(a.m[1][1], src + 8 * stride + 8, stride);
}

// The 8 tokens whose 16 values lie at src (a token's values consecutive, `stride` halves between tokens): the
// transpose of the right operand, as the activations are stored.
static inline void mma_load_b(thread MmaB & b, threadgroup const half * src, uint stride, ushort lane) {
    simdgroup_load(b.m[0], src, stride, 0, true);
    simdgroup_load(b.m[1], src + 8, stride, 0, true);
}

// c += a * b.
static inline void mma_tile(thread MmaTile & c, thread MmaA & a, thread MmaB & b) {
    simdgroup_multiply_accumulate(c.top, a.m[0][0], b.m[0], c.top);
    simdgroup_multiply_accumulate(c.top, a.m[0][1], b.m[1], c.top);
    simdgroup_multiply_accumulate(c.bottom, a.m[1][0], b.m[0], c.bottom);
    simdgroup_multiply_accumulate(c.bottom, a.m[1][1], b.m[1], c.bottom);
}

// out[token * stride + row] = the tile's sum of (row, token): token-major, as the prompt kernels' outputs are.
static inline void mma_store_tokens(thread MmaTile & c, threadgroup float * out, uint stride, ushort lane) {
    simdgroup_store(c.top, out, stride, 0, true);
    simdgroup_store(c.bottom, out + 8, stride, 0, true);
}

// Each token's column of the tile times its factor: diag is an 8 x 8 float matrix (row-major) with token j's
// factor at (j, j) and zeros elsewhere, and c = c * diag (the attention's rescaling of its running sums).
static inline void mma_scale_tokens(thread MmaTile & c, threadgroup const float * diag, ushort lane) {
    simdgroup_float8x8 d;
    simdgroup_load(d, diag, 8);
    simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_multiply_accumulate(c.top, c.top, d, zero);
    simdgroup_multiply_accumulate(c.bottom, c.bottom, d, zero);
}
#endif

// ---- staging a step's operands ----

// Rows of a weight matrix that fill half of a tile's ROWS: rows first .. first + ROWS / 2 of the matrix
// at w (rows at or past `rows` give 0).
struct WeightRows {
    device const uchar * w;
    uint type;
    uint stride;   // bytes per row
    uint first;
    uint rows;
};

static inline WeightRows weight_rows(uint type, device const char * w, uint cols, uint first, uint rows) {
    WeightRows r = {(device const uchar *) w, type, row_bytes(type, cols), first, rows};
    return r;
}

template <typename T>
static inline void load_chunk_of(device const uchar * row, uint c, thread float * w) {
    T::dequant(row, c, w);
}

// Chunk c of a weight row, dequantized into w (values at T::index(c, i) of the row).
static inline void load_chunk(uint type, device const uchar * row, uint c, thread float * w) {
    switch (type) {
        case TYPE_F32: load_chunk_of<F32>(row, c, w); break;
        case TYPE_F16: load_chunk_of<F16>(row, c, w); break;
        case TYPE_Q4_0: load_chunk_of<Q4_0>(row, c, w); break;
        case TYPE_Q5_0: load_chunk_of<Q5_0>(row, c, w); break;
        case TYPE_Q8_0: load_chunk_of<Q8_0>(row, c, w); break;
        case TYPE_Q4_K: load_chunk_of<Q4_K>(row, c, w); break;
        case TYPE_Q5_K: load_chunk_of<Q5_K>(row, c, w); break;
        default: load_chunk_of<Q6_K>(row, c, w); break;
    }
}

// ---- Q4_0 rows read a block at a time through two 16-byte loads ----
// A step of a tile needs one 18-byte block per Q4_0 row. Read as the format's 2-byte fields (the blocks are only
// 2-byte aligned), each of a SIMD-group's load instructions touches 16 rows' cache lines and a step takes 10 of them:
// the prompt's expert kernels spent their time in the L1 unit (91 % busy on an H200), not in the matrix units. When
// the rows are 16-byte aligned (row bytes a multiple of 16, and the weights bound at 16-byte aligned places, which
// the command list checks), the block lies in the 32 bytes from its 16-byte aligned start, two 16-byte loads.

// The 32-bit word at even byte B of the 32-byte window a, b.
template <uint B>
static inline uint window_word(uint4 a, uint4 b) {
    const uint w = B / 4;
    uint lo = w == 0 ? a.x : w == 1 ? a.y : w == 2 ? a.z : w == 3 ? a.w : w == 4 ? b.x : w == 5 ? b.y : w == 6 ? b.z : b.w;
    if (B % 4 == 0) return lo;
    uint hi = w == 0 ? a.y : w == 1 ? a.z : w == 2 ? a.w : w == 3 ? b.x : w == 4 ? b.y : w == 5 ? b.z : b.w;
    return (lo >> 16) | (hi << 16);
}

// Chunk h (0: the block's values 0-7 and 16-23, 1: 8-15 and 24-31) of the Q4_0 block at byte S of the window,
// dequantized as Q4_0::dequant does.
template <uint S>
static inline void q4_0_window_chunk(uint4 a, uint4 b, uint h, thread float * out) {
    float d = (float) as_type<half>((ushort) (window_word<S>(a, b) & 0xFFFF));
    uint q0 = h == 0 ? window_word<S + 2>(a, b) : window_word<S + 10>(a, b);
    uint q1 = h == 0 ? window_word<S + 6>(a, b) : window_word<S + 14>(a, b);
    q4_0_chunk_values(d, q0, q1, out);
}

// Chunk c of the 16-byte aligned Q4_0 row at `row`, as load_chunk.
static inline void load_q4_0_wide(device const uchar * row, uint c, thread float * out) {
    uint at = (c / 2) * GLIMMER_Q4_0_BLOCK_BYTES;
    device const uint4 * window = (device const uint4 *) (row + (at & ~15u));
    uint4 a = window[0];
    uint4 b = window[1];
    uint h = c % 2;
    switch (at & 15) {
        case 0: q4_0_window_chunk<0>(a, b, h, out); break;
        case 2: q4_0_window_chunk<2>(a, b, h, out); break;
        case 4: q4_0_window_chunk<4>(a, b, h, out); break;
        case 6: q4_0_window_chunk<6>(a, b, h, out); break;
        case 8: q4_0_window_chunk<8>(a, b, h, out); break;
        case 10: q4_0_window_chunk<10>(a, b, h, out); break;
        case 12: q4_0_window_chunk<12>(a, b, h, out); break;
        default: q4_0_window_chunk<14>(a, b, h, out); break;
    }
}

// Two values as the halves of one 32-bit word (the first in the low half, as in threadgroup memory).
static inline uint half_pair(float x, float y) {
    half2 p;
    p.x = (half) x;
    p.y = (half) y;
    return as_type<uint>(p);
}

// A dequantized Q4_0 chunk (w in load_q4_0_wide's order) into its step's tile row (dst, 16-byte aligned; the step is
// the chunk's block): its values 0-7 and 16-23 of the block's half c % 2 are two runs of 8 halves, one 16-byte store
// each. Stores of one word per pair conflicted 4.7-way in threadgroup memory's banks (ncu, q_b on an H200).
static inline void store_q4_0_chunk(thread float * w, uint c, threadgroup half * dst) {
    uint4 lo;
    lo.x = half_pair(w[0], w[1]);
    lo.y = half_pair(w[4], w[5]);
    lo.z = half_pair(w[8], w[9]);
    lo.w = half_pair(w[12], w[13]);
    uint4 hi;
    hi.x = half_pair(w[2], w[3]);
    hi.y = half_pair(w[6], w[7]);
    hi.z = half_pair(w[10], w[11]);
    hi.w = half_pair(w[14], w[15]);
    *((threadgroup uint4 *) (dst + (c % 2) * 8)) = lo;
    *((threadgroup uint4 *) (dst + 16 + (c % 2) * 8)) = hi;
}

// The dequantized chunk c as halves into its step's tile row (dst, 4-byte aligned, holds the values k0 .. k0 +
// MM_DEPTH of the row). Values i and i + 1 that lie side by side at an even place (every pair of the 32-value
// blocks' formats) go as one 32-bit store: threadgroup memory's store slots, not the matrix units, bound a step.
template <typename T>
static inline void store_chunk_of(thread float * w, uint c, uint k0, threadgroup half * dst) {
    #pragma unroll
    for (uint i = 0; i < CH; i += 2) {
        uint at = T::index(c, i) - k0;
        uint next = T::index(c, i + 1) - k0;
        if (next == at + 1 && at % 2 == 0) {
            half2 pair;
            pair.x = (half) w[i];
            pair.y = (half) w[i + 1];
            *((threadgroup uint *) (dst + at)) = as_type<uint>(pair);
        } else {
            dst[at] = (half) w[i];
            dst[next] = (half) w[i + 1];
        }
    }
}

static inline void store_chunk(uint type, thread float * w, uint c, uint k0, threadgroup half * dst) {
    switch (type) {
        case TYPE_F32: store_chunk_of<F32>(w, c, k0, dst); break;
        case TYPE_F16: store_chunk_of<F16>(w, c, k0, dst); break;
        case TYPE_Q4_0: store_chunk_of<Q4_0>(w, c, k0, dst); break;
        case TYPE_Q5_0: store_chunk_of<Q5_0>(w, c, k0, dst); break;
        case TYPE_Q8_0: store_chunk_of<Q8_0>(w, c, k0, dst); break;
        case TYPE_Q4_K: store_chunk_of<Q4_K>(w, c, k0, dst); break;
        case TYPE_Q5_K: store_chunk_of<Q5_K>(w, c, k0, dst); break;
        default: store_chunk_of<Q6_K>(w, c, k0, dst); break;
    }
}

// x as hi + lo, two halves: hi = x rounded to half, lo = the rest rounded to half (this function).
static inline half split_lo(float x, half hi) {
    return (half) (x - (float) hi);
}

// Four values as hi and lo halves, one 8-byte store each (hi and lo 8-byte aligned).
static inline void split_half4(float4 x, threadgroup half * hi, threadgroup half * lo) {
    half4 h;
    h.x = (half) x.x;
    h.y = (half) x.y;
    h.z = (half) x.z;
    h.w = (half) x.w;
    half4 l;
    l.x = split_lo(x.x, h.x);
    l.y = split_lo(x.y, h.y);
    l.z = split_lo(x.z, h.z);
    l.w = split_lo(x.w, h.w);
    *((threadgroup half4 *) hi) = h;
    *((threadgroup half4 *) lo) = l;
}

// Threads of a tile's threadgroup.
#define MM_THREADS (MM_SIMDGROUPS * SIMD_WIDTH)

// The product of a ROWS x TOKENS tile: out[j * (ROWS + MM_FLOAT_PAD) + r] = (weight row r of the tile) .
// (activations of token j) over `cols` values, for r < ROWS (rows 0 .. ROWS / 2 from lo, the rest from hi) and
// j < TOKENS (token j's activations at src.row(j) for j < n; the others give 0). All MM_SIMDGROUPS SIMD-groups
// of the threadgroup call it; tiles: threadgroup memory of Geometry.mmMemoryFloats(ROWS, TOKENS). The caller
// reads out after it.
//
// Per step of MM_DEPTH values, the threads stage the step: weight chunk q (tile row q / 2, half q % 2 of the
// step) is thread q % MM_THREADS's, run q of 8 activations (token q / 4) too; each stage holds the step's
// weights (ROWS rows) and the activations' hi and lo halves (TOKENS rows each), MM_HALF_STRIDE halves a row.
// Then SIMD-group s multiplies its block: MM_SIMDGROUP_ROWS rows from (s % row blocks) * MM_SIMDGROUP_ROWS with
// MM_SIMDGROUP_TOKENS tokens from (s / row blocks) * MM_SIMDGROUP_TOKENS, hi and lo; token tiles at or past n
// are skipped (the same choice on every lane of the SIMD-group). The steps are double-buffered, two stages in
// threadgroup memory: each thread loads its share of step k + 1 into registers before the SIMD-groups multiply
// step k and stores it into the other stage after, so the loads' latency passes under the multiplies, and one
// barrier per step separates the stages.
template <uint ROWS, uint TOKENS, typename S>
static inline void mm_tile(WeightRows lo, WeightRows hi, S src, uint n, uint cols, threadgroup float * tiles,
                           ushort tiitg, ushort tiisg, ushort sgitg) {
    const uint W_CHUNKS = ROWS * (MM_DEPTH / CH) / MM_THREADS;   // weight chunks a thread stages per step
    const uint X_RUNS = TOKENS * (MM_DEPTH / 8) / MM_THREADS;    // runs of 8 activations a thread stages per step
    const uint STAGE_HALVES = (ROWS + 2 * TOKENS) * MM_HALF_STRIDE;
    const uint FLOAT_STRIDE = ROWS + MM_FLOAT_PAD;
    const uint ROW_BLOCKS = ROWS / MM_SIMDGROUP_ROWS;
    const uint A_TILES = MM_SIMDGROUP_ROWS / 16;
    const uint B_TILES = MM_SIMDGROUP_TOKENS / 8;
    // this thread's share of a step: weight chunks (type, row) and runs of activations (token row)
    uint w_type[W_CHUNKS];
    bool w_wide[W_CHUNKS];   // a Q4_0 row read through load_q4_0_wide
    device const uchar * w_row[W_CHUNKS];
    uint w_at[W_CHUNKS];
    uint half_of_step = tiitg % (MM_DEPTH / CH);
    #pragma unroll
    for (uint i = 0; i < W_CHUNKS; i++) {
        uint tile_row = (tiitg + i * MM_THREADS) / (MM_DEPTH / CH);
        WeightRows wr = tile_row < ROWS / 2 ? lo : hi;
        uint row = wr.first + tile_row % (ROWS / 2);
        w_type[i] = wr.type;
        w_wide[i] = wr.type == TYPE_Q4_0 && wr.stride % 16 == 0;
        w_row[i] = row < wr.rows ? wr.w + row * wr.stride : nullptr;
        w_at[i] = tile_row * MM_HALF_STRIDE;
    }
    uint part = (tiitg % (MM_DEPTH / 8)) * 8;
    device const float * x_row[X_RUNS];
    uint x_at[X_RUNS];
    #pragma unroll
    for (uint i = 0; i < X_RUNS; i++) {
        uint token = (tiitg + i * MM_THREADS) / (MM_DEPTH / 8);
        x_row[i] = token < n ? src.row(token) : nullptr;
        x_at[i] = ROWS * MM_HALF_STRIDE + token * MM_HALF_STRIDE + part;
    }
    float w[W_CHUNKS][CH];
    float4 x[X_RUNS][2];
    // this SIMD-group's block of the tile
    uint block_row = (sgitg % ROW_BLOCKS) * MM_SIMDGROUP_ROWS;
    uint block_token = (sgitg / ROW_BLOCKS) * MM_SIMDGROUP_TOKENS;
    MmaTile acc[A_TILES][B_TILES];
    #pragma unroll
    for (uint m = 0; m < A_TILES; m++) {
        #pragma unroll
        for (uint g = 0; g < B_TILES; g++) mma_zero(acc[m][g]);
    }
    for (uint k0 = 0, stage = 0; k0 < cols + MM_DEPTH; k0 += MM_DEPTH, stage ^= 1) {
        // k0 < cols: load step k0 (staged below); k0 > 0: multiply step k0 - MM_DEPTH, staged in the other stage
        uint c = k0 / CH + half_of_step;
        bool load = k0 < cols;
        #pragma unroll
        for (uint i = 0; i < W_CHUNKS; i++) {
            if (load && w_row[i] != nullptr && c * CH < cols) {
                if (w_wide[i]) {
                    load_q4_0_wide(w_row[i], c, w[i]);
                } else {
                    load_chunk(w_type[i], w_row[i], c, w[i]);
                }
            }
        }
        #pragma unroll
        for (uint i = 0; i < X_RUNS; i++) {
            if (load && x_row[i] != nullptr && k0 + part < cols) {
                x[i][0] = *((device const float4 *) (x_row[i] + k0 + part));
                x[i][1] = *((device const float4 *) (x_row[i] + k0 + part + 4));
            } else {
                x[i][0].x = x[i][0].y = x[i][0].z = x[i][0].w = 0.0f;
                x[i][1].x = x[i][1].y = x[i][1].z = x[i][1].w = 0.0f;
            }
        }
        if (k0 > 0) {
            threadgroup const half * wt = (threadgroup const half *) tiles + (stage ^ 1) * STAGE_HALVES
                                          + block_row * MM_HALF_STRIDE;
            threadgroup const half * xt_hi = (threadgroup const half *) tiles + (stage ^ 1) * STAGE_HALVES
                                             + (ROWS + block_token) * MM_HALF_STRIDE;
            threadgroup const half * xt_lo = xt_hi + TOKENS * MM_HALF_STRIDE;
            #pragma unroll
            for (uint kk = 0; kk < MM_DEPTH; kk += 16) {
                MmaA a[A_TILES];
                #pragma unroll
                for (uint m = 0; m < A_TILES; m++) {
                    mma_load_a(a[m], wt + m * 16 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                }
                #pragma unroll
                for (uint g = 0; g < B_TILES; g++) {
                    if (block_token + g * 8 < n) {
                        MmaB b;
                        mma_load_b(b, xt_hi + g * 8 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                        #pragma unroll
                        for (uint m = 0; m < A_TILES; m++) mma_tile(acc[m][g], a[m], b);
                        mma_load_b(b, xt_lo + g * 8 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                        #pragma unroll
                        for (uint m = 0; m < A_TILES; m++) mma_tile(acc[m][g], a[m], b);
                    }
                }
            }
        }
        if (load) {
            threadgroup half * st = (threadgroup half *) tiles + stage * STAGE_HALVES;
            #pragma unroll
            for (uint i = 0; i < W_CHUNKS; i++) {
                if (w_row[i] != nullptr && c * CH < cols) {
                    if (w_wide[i]) {
                        store_q4_0_chunk(w[i], c, st + w_at[i]);
                    } else {
                        store_chunk(w_type[i], w[i], c, k0, st + w_at[i]);
                    }
                } else {
                    for (uint v = 0; v < CH; v++) st[w_at[i] + half_of_step * CH + v] = (half) 0.0f;
                }
            }
            #pragma unroll
            for (uint i = 0; i < X_RUNS; i++) {
                threadgroup half * x_hi = st + x_at[i];
                threadgroup half * x_lo = x_hi + TOKENS * MM_HALF_STRIDE;
                split_half4(x[i][0], x_hi, x_lo);
                split_half4(x[i][1], x_hi + 4, x_lo + 4);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    #pragma unroll
    for (uint m = 0; m < A_TILES; m++) {
        #pragma unroll
        for (uint g = 0; g < B_TILES; g++) {
            mma_store_tokens(acc[m][g], tiles + (block_token + g * 8) * FLOAT_STRIDE + block_row + m * 16, FLOAT_STRIDE,
                             tiisg);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
