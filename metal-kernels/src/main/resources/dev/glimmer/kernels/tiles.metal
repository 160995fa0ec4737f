// Matrix-unit tiles for the prompt kernels (prompt.metal): a threadgroup multiplies MM_ROWS weight rows with
// the activations of MM_TOKENS tokens, MM_DEPTH values of the rows at a time. Each step dequantizes the
// weights once into threadgroup memory as half and splits each activation into two halves next to them, hi
// = half(x) and lo = half(x - hi); the SIMD-groups then multiply the weights with both in 16 x 8 tiles on the
// matrix units, accumulating in float. Why two halves: with weights as halves and activations as floats the
// prompts' logits match the CPU's on the oracle models, with activations as one half they moved by up to a
// third of their range on small-q4_k_m (a routing choice flipped); hi + lo holds 22 bits of each activation.
//
// The tile operations (MmaA, MmaTile and the mma_* functions) are the one part written per target: here
// with MSL's simdgroup_matrix (Apple GPUs; the emulator runs the same code, its prelude provides
// simdgroup_matrix), and in the CUDA prelude with the tensor cores' mma.sync.m16n8k16.

#define MM_ROWS GLIMMER_MM_ROWS
#define MM_TOKENS GLIMMER_MM_TOKENS
#define MM_DEPTH GLIMMER_MM_DEPTH
#define MM_HALF_STRIDE GLIMMER_MM_HALF_STRIDE
#define MM_FLOAT_STRIDE GLIMMER_MM_FLOAT_STRIDE

#ifndef __CUDACC__
// A 16 x 16 block of weights (rows x depth), the left operand of mma_tile.
struct MmaA {
    simdgroup_half8x8 m[2][2];
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

// The 16 x 16 halves at a (row-major, `stride` halves between rows).
static inline void mma_load_a(thread MmaA & a, threadgroup const half * src, uint stride, ushort lane) {
    simdgroup_load(a.m[0][0], src, stride);
    simdgroup_load(a.m[0][1], src + 8, stride);
    simdgroup_load(a.m[1][0], src + 8 * stride, stride);
    simdgroup_load(a.m[1][1], src + 8 * stride + 8, stride);
}

// c += a * b for the 8 tokens whose 16 values lie at b (a token's values consecutive, `stride` halves
// between tokens): b is the transpose of the right operand, as the activations are stored.
static inline void mma_tile(thread MmaTile & c, thread MmaA & a, threadgroup const half * b, uint stride,
                            ushort lane) {
    simdgroup_half8x8 b0;
    simdgroup_half8x8 b1;
    simdgroup_load(b0, b, stride, 0, true);
    simdgroup_load(b1, b + 8, stride, 0, true);
    simdgroup_multiply_accumulate(c.top, a.m[0][0], b0, c.top);
    simdgroup_multiply_accumulate(c.top, a.m[0][1], b1, c.top);
    simdgroup_multiply_accumulate(c.bottom, a.m[1][0], b0, c.bottom);
    simdgroup_multiply_accumulate(c.bottom, a.m[1][1], b1, c.bottom);
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

// Rows of a weight matrix that fill half of a tile's MM_ROWS: rows first .. first + MM_ROWS / 2 of the matrix
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

// A thread's share of one step, held in registers from its loads to its stores into threadgroup memory: chunk c
// of a weight row dequantized (values at w_pos(c, i) of the step) and 8 activations of a token.
struct StepShare {
    float w[CH];
    float4 x0;
    float4 x1;
};

template <typename T>
static inline void load_chunk_of(device const uchar * row, uint c, thread StepShare & share) {
    T::dequant(row, c, share.w);
}

static inline void load_chunk(uint type, device const uchar * row, uint c, thread StepShare & share) {
    switch (type) {
        case TYPE_F32: load_chunk_of<F32>(row, c, share); break;
        case TYPE_F16: load_chunk_of<F16>(row, c, share); break;
        case TYPE_Q4_0: load_chunk_of<Q4_0>(row, c, share); break;
        case TYPE_Q5_0: load_chunk_of<Q5_0>(row, c, share); break;
        case TYPE_Q8_0: load_chunk_of<Q8_0>(row, c, share); break;
        case TYPE_Q4_K: load_chunk_of<Q4_K>(row, c, share); break;
        case TYPE_Q5_K: load_chunk_of<Q5_K>(row, c, share); break;
        default: load_chunk_of<Q6_K>(row, c, share); break;
    }
}

// The dequantized chunk c as halves into its step's tile row (dst, 4-byte aligned, holds the values k0 .. k0 +
// MM_DEPTH of the row). Values i and i + 1 that lie side by side at an even place (every pair of the 32-value
// blocks' formats) go as one 32-bit store: threadgroup memory's store slots, not the matrix units, bound a step.
template <typename T>
static inline void store_chunk_of(thread StepShare & share, uint c, uint k0, threadgroup half * dst) {
    #pragma unroll
    for (uint i = 0; i < CH; i += 2) {
        uint at = T::index(c, i) - k0;
        uint next = T::index(c, i + 1) - k0;
        if (next == at + 1 && at % 2 == 0) {
            half2 pair;
            pair.x = (half) share.w[i];
            pair.y = (half) share.w[i + 1];
            *((threadgroup uint *) (dst + at)) = as_type<uint>(pair);
        } else {
            dst[at] = (half) share.w[i];
            dst[next] = (half) share.w[i + 1];
        }
    }
}

static inline void store_chunk(uint type, thread StepShare & share, uint c, uint k0, threadgroup half * dst) {
    switch (type) {
        case TYPE_F32: store_chunk_of<F32>(share, c, k0, dst); break;
        case TYPE_F16: store_chunk_of<F16>(share, c, k0, dst); break;
        case TYPE_Q4_0: store_chunk_of<Q4_0>(share, c, k0, dst); break;
        case TYPE_Q5_0: store_chunk_of<Q5_0>(share, c, k0, dst); break;
        case TYPE_Q8_0: store_chunk_of<Q8_0>(share, c, k0, dst); break;
        case TYPE_Q4_K: store_chunk_of<Q4_K>(share, c, k0, dst); break;
        case TYPE_Q5_K: store_chunk_of<Q5_K>(share, c, k0, dst); break;
        default: store_chunk_of<Q6_K>(share, c, k0, dst); break;
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

// Halves of one stage of a tile's operands: the step's weights (MM_ROWS rows) and the activations' hi and lo
// halves (MM_TOKENS rows each), MM_HALF_STRIDE halves a row.
#define MM_STAGE_HALVES ((MM_ROWS + 2 * MM_TOKENS) * MM_HALF_STRIDE)

// The product of a tile: out[j * MM_FLOAT_STRIDE + r] = (weight row r of the tile) . (activations of token j)
// over `cols` values, for r < MM_ROWS (rows 0 .. MM_ROWS / 2 from lo, the rest from hi) and j < MM_TOKENS
// (token j's activations at src.row(j) for j < n; the others give 0). All MM_SIMDGROUPS SIMD-groups of the
// threadgroup call it; tiles: threadgroup memory of Geometry.mmMemoryFloats(). The caller reads out after it.
//
// Per step of MM_DEPTH values, thread t dequantizes chunk t % 2 of tile row t / 2 (MM_ROWS * MM_DEPTH / CH
// chunks, one per thread) and splits 8 activations of token t / 4; then SIMD-group s multiplies tile rows
// 16 s .. 16 s + 16 with all MM_TOKENS tokens (MM_TOKENS / 8 tiles, MmaA loaded once for them), hi and lo.
// The steps are double-buffered, two stages in threadgroup memory: each thread loads its share of step k + 1
// into registers before the SIMD-groups multiply step k and stores it into the other stage after, so the
// loads' latency passes under the multiplies, and one barrier per step separates the stages.
template <typename S>
static inline void mm_tile(WeightRows lo, WeightRows hi, S src, uint n, uint cols, threadgroup float * tiles,
                           ushort tiitg, ushort tiisg, ushort sgitg) {
    uint tile_row = tiitg / 2;
    WeightRows wr = tile_row < MM_ROWS / 2 ? lo : hi;
    uint row = wr.first + tile_row % (MM_ROWS / 2);
    device const uchar * w_row = row < wr.rows ? wr.w + row * wr.stride : nullptr;
    uint token = tiitg / 4;
    uint part = (tiitg % 4) * 8;
    device const float * x_row = token < n ? src.row(token) : nullptr;
    uint w_at = tile_row * MM_HALF_STRIDE;
    uint x_at = MM_ROWS * MM_HALF_STRIDE + token * MM_HALF_STRIDE + part;
    MmaTile acc[MM_TOKENS / 8];
    #pragma unroll
    for (uint g = 0; g < MM_TOKENS / 8; g++) mma_zero(acc[g]);
    StepShare share;
    for (uint k0 = 0, stage = 0; k0 < cols + MM_DEPTH; k0 += MM_DEPTH, stage ^= 1) {
        // k0 < cols: load step k0 (staged below); k0 > 0: multiply step k0 - MM_DEPTH, staged in the other stage
        uint c = k0 / CH + tiitg % 2;
        bool load = k0 < cols;
        bool weights = load && w_row != nullptr && c * CH < cols;
        bool acts = load && x_row != nullptr && k0 + part < cols;
        if (weights) load_chunk(wr.type, w_row, c, share);
        if (acts) {
            share.x0 = *((device const float4 *) (x_row + k0 + part));
            share.x1 = *((device const float4 *) (x_row + k0 + part + 4));
        }
        if (k0 > 0) {
            threadgroup const half * wt = (threadgroup const half *) tiles + (stage ^ 1) * MM_STAGE_HALVES;
            threadgroup const half * xt_hi = wt + MM_ROWS * MM_HALF_STRIDE;
            threadgroup const half * xt_lo = xt_hi + MM_TOKENS * MM_HALF_STRIDE;
            #pragma unroll
            for (uint kk = 0; kk < MM_DEPTH; kk += 16) {
                MmaA a;
                mma_load_a(a, wt + sgitg * 16 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                #pragma unroll
                for (uint g = 0; g < MM_TOKENS / 8; g++) {
                    mma_tile(acc[g], a, xt_hi + g * 8 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                    mma_tile(acc[g], a, xt_lo + g * 8 * MM_HALF_STRIDE + kk, MM_HALF_STRIDE, tiisg);
                }
            }
        }
        if (load) {
            threadgroup half * st = (threadgroup half *) tiles + stage * MM_STAGE_HALVES;
            if (weights) {
                store_chunk(wr.type, share, c, k0, st + w_at);
            } else {
                for (uint i = 0; i < CH; i++) st[w_at + (tiitg % 2) * CH + i] = (half) 0.0f;
            }
            threadgroup half * x_hi = st + x_at;
            threadgroup half * x_lo = x_hi + MM_TOKENS * MM_HALF_STRIDE;
            if (!acts) {
                share.x0.x = share.x0.y = share.x0.z = share.x0.w = 0.0f;
                share.x1.x = share.x1.y = share.x1.z = share.x1.w = 0.0f;
            }
            split_half4(share.x0, x_hi, x_lo);
            split_half4(share.x1, x_hi + 4, x_lo + 4);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    #pragma unroll
    for (uint g = 0; g < MM_TOKENS / 8; g++) {
        mma_store_tokens(acc[g], tiles + g * 8 * MM_FLOAT_STRIDE + sgitg * 16, MM_FLOAT_STRIDE, tiisg);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
