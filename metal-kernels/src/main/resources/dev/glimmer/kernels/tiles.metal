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

// Chunk c of a row dequantized into a step's tile row (dst holds the values k0 .. k0 + MM_DEPTH of the row).
template <typename T>
static inline void stage_chunk_of(device const uchar * row, uint c, uint k0, threadgroup half * dst) {
    float v[CH];
    T::dequant(row, c, v);
    #pragma unroll
    for (uint i = 0; i < CH; i++) dst[T::index(c, i) - k0] = (half) v[i];
}

static inline void stage_chunk(uint type, device const uchar * row, uint c, uint k0, threadgroup half * dst) {
    switch (type) {
        case TYPE_F32: stage_chunk_of<F32>(row, c, k0, dst); break;
        case TYPE_F16: stage_chunk_of<F16>(row, c, k0, dst); break;
        case TYPE_Q4_0: stage_chunk_of<Q4_0>(row, c, k0, dst); break;
        case TYPE_Q5_0: stage_chunk_of<Q5_0>(row, c, k0, dst); break;
        case TYPE_Q8_0: stage_chunk_of<Q8_0>(row, c, k0, dst); break;
        case TYPE_Q4_K: stage_chunk_of<Q4_K>(row, c, k0, dst); break;
        case TYPE_Q5_K: stage_chunk_of<Q5_K>(row, c, k0, dst); break;
        default: stage_chunk_of<Q6_K>(row, c, k0, dst); break;
    }
}

// x as hi + lo, two halves: hi = x rounded to half, lo = the rest rounded to half.
static inline void split_half(float x, threadgroup half * hi, threadgroup half * lo) {
    half h = (half) x;
    *hi = h;
    *lo = (half) (x - (float) h);
}

// The product of a tile: out[j * MM_FLOAT_STRIDE + r] = (weight row r of the tile) . (activations of token j)
// over `cols` values, for r < MM_ROWS (rows 0 .. MM_ROWS / 2 from lo, the rest from hi) and j < MM_TOKENS
// (token j's activations at src.row(j) for j < n; the others give 0). All MM_SIMDGROUPS SIMD-groups of the
// threadgroup call it; tiles: threadgroup memory of Geometry.mmMemoryFloats(). The caller reads out after it.
//
// Per step of MM_DEPTH values, thread t dequantizes chunk t % 2 of tile row t / 2 (MM_ROWS * MM_DEPTH / CH
// chunks, one per thread) and splits 8 activations of token t / 4; then SIMD-group s multiplies tile rows
// 16 s .. 16 s + 16 with all MM_TOKENS tokens (MM_TOKENS / 8 tiles, MmaA loaded once for them), hi and lo.
template <typename S>
static inline void mm_tile(WeightRows lo, WeightRows hi, S src, uint n, uint cols, threadgroup float * tiles,
                           ushort tiitg, ushort tiisg, ushort sgitg) {
    threadgroup half * wt = (threadgroup half *) tiles;
    threadgroup half * xt_hi = wt + MM_ROWS * MM_HALF_STRIDE;
    threadgroup half * xt_lo = xt_hi + MM_TOKENS * MM_HALF_STRIDE;
    uint tile_row = tiitg / 2;
    WeightRows wr = tile_row < MM_ROWS / 2 ? lo : hi;
    uint row = wr.first + tile_row % (MM_ROWS / 2);
    device const uchar * w_row = row < wr.rows ? wr.w + row * wr.stride : nullptr;
    uint token = tiitg / 4;
    uint part = (tiitg % 4) * 8;
    device const float * x_row = token < n ? src.row(token) : nullptr;
    MmaTile acc[MM_TOKENS / 8];
    #pragma unroll
    for (uint g = 0; g < MM_TOKENS / 8; g++) mma_zero(acc[g]);
    for (uint k0 = 0; k0 < cols; k0 += MM_DEPTH) {
        uint c = k0 / CH + tiitg % 2;
        threadgroup half * w_dst = wt + tile_row * MM_HALF_STRIDE;
        if (w_row != nullptr && c * CH < cols) {
            stage_chunk(wr.type, w_row, c, k0, w_dst);
        } else {
            for (uint i = 0; i < CH; i++) w_dst[(tiitg % 2) * CH + i] = (half) 0.0f;
        }
        uint x_at = token * MM_HALF_STRIDE + part;
        if (x_row != nullptr && k0 + part < cols) {
            float4 a = *((device const float4 *) (x_row + k0 + part));
            float4 b = *((device const float4 *) (x_row + k0 + part + 4));
            split_half(a.x, xt_hi + x_at, xt_lo + x_at);
            split_half(a.y, xt_hi + x_at + 1, xt_lo + x_at + 1);
            split_half(a.z, xt_hi + x_at + 2, xt_lo + x_at + 2);
            split_half(a.w, xt_hi + x_at + 3, xt_lo + x_at + 3);
            split_half(b.x, xt_hi + x_at + 4, xt_lo + x_at + 4);
            split_half(b.y, xt_hi + x_at + 5, xt_lo + x_at + 5);
            split_half(b.z, xt_hi + x_at + 6, xt_lo + x_at + 6);
            split_half(b.w, xt_hi + x_at + 7, xt_lo + x_at + 7);
        } else {
            for (uint i = 0; i < 8; i++) {
                xt_hi[x_at + i] = (half) 0.0f;
                xt_lo[x_at + i] = (half) 0.0f;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
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
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    #pragma unroll
    for (uint g = 0; g < MM_TOKENS / 8; g++) {
        mma_store_tokens(acc[g], tiles + g * 8 * MM_FLOAT_STRIDE + sgitg * 16, MM_FLOAT_STRIDE, tiisg);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
