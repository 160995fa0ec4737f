/*
 * Glimmer's optional native CPU kernel: Q4_0 weight rows times Q8_0 activation rows with integer dot
 * products, which the JDK's Vector API cannot emit. This file is the variant for processors with AVX-512
 * VNNI and VBMI (vpdpbusd on 512-bit vectors); q4_0_avx2.c has the 256-bit ones (AVX2, AVX-VNNI),
 * q4_0_neon.c the Arm one, q4_0_activations.c the quantizer of the activations into their layout.
 *
 * It computes exactly what the Java kernel Kernels.dotQ4_0 computes, operation for operation, so the two
 * give the same bits (NativeKernelsTest holds them to that):
 *   - per four blocks (128 values), 16 int32 lanes, lane 4k+j holding the exact sum of (q - 8) * x
 *     over values 4j..4j+3 and 4j+16..4j+19 of block k (the lanes of the Java kernel);
 *   - each lane converted to double and multiplied by the block's float scale fp16(d_w) * d_x, lanes
 *     0..7 (blocks 0, 1) into one accumulator and 8..15 (blocks 2, 3) into another;
 *   - the accumulators added lane-wise, then the halves of 256 and 128 bits, then the last two lanes.
 *
 * An activation row comes laid out by glimmer_q4_0_activations (ActivationRows' native layout), per group
 * of four blocks:
 *   xq:   128 int8 quants: bytes 16k+i = value i of block k, bytes 64+16k+i = value 16+i of block k;
 *   bias: 16 int32, lane 4k+j = -8 * (the sum of the lane's 8 quants) (so Σ q·x + bias = Σ (q-8)·x);
 *   xd:   16 floats, lane 4k+j = block k's activation scale.
 * Blocks after the last whole group (a row of 6 blocks has 2) go one at a time, as the Java kernel takes
 * them: their 32 quants in the order j, j+8, j+16, j+24 for j = 0..7 (tail_block_sums), each block's
 * scale the first of its 4 lanes of xd.
 *
 * Built by build-native.sh with each variant's instruction sets enabled per function, so the library
 * loads on any x86-64 machine; glimmer_cpu_variants says which variants this one runs.
 */
#include <immintrin.h>
#include <stdint.h>

#include "q4_0_layout.h"

/* Activation rows a weight row is unpacked once for, and weight rows an activation row is loaded once for. */
#define TOKENS_PER_PASS 4
#define ROWS_PER_PASS 2
/* The fewest activation rows for which a pass takes ROWS_PER_PASS weight rows (see glimmer_q4_0_matmul_avx512_vnni). */
#define PAIRED_ROWS_FROM 12

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,f16c,fma")))

/*
 * Indices for vpermt2b over (the 64 bytes at the group's start, the 64 bytes 8 bytes on): byte 16k+i of
 * the result is nibble byte i of block k, at 18k + 2 + i of the group (indices 64.. read the second load).
 */
TARGET static inline __m512i nibble_index(void) {
    uint8_t index[64];
    for (int k = 0; k < GROUP_BLOCKS; k++) {
        for (int i = 0; i < 16; i++) {
            int source = BLOCK_BYTES * k + 2 + i;
            index[16 * k + i] = (uint8_t) (source < 64 ? source : 64 + source - 8);
        }
    }
    return _mm512_loadu_si512(index);
}

/* Indices for vpermw over the group's first 64 bytes: 16-bit lane 4k+j is block k's fp16 scale (word 9k). */
TARGET static inline __m512i scale_index(void) {
    uint16_t index[32];
    for (int lane = 0; lane < 32; lane++) {
        index[lane] = (uint16_t) (9 * ((lane / 4) % GROUP_BLOCKS));
    }
    return _mm512_loadu_si512(index);
}

/*
 * A token's sum over the blocks left after the groups (fewer than four), one at a time as the Java
 * kernel takes them: the 8 lane sums of tail_block_sums times the block's scale into the double lanes of
 * acc (each block's scale the first of its 4 lane scales).
 */
TARGET static inline __m512d tail_blocks(const uint8_t *w, int tail, const int8_t *x, const float *xd, __m512d acc) {
    for (int b = 0; b < tail; b++) {
        const uint8_t *block = w + (long) b * BLOCK_BYTES;
        int32_t sums[8];
        tail_block_sums(block, x + b * QK, sums);
        float d = half_to_float(block) * xd[4 * b];
        acc = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm256_loadu_si256((const __m256i *) sums)), _mm512_set1_pd(d), acc);
    }
    return acc;
}

/* A token's 8 double lanes added in the Java kernel's fixed order: halves of 256 bits, of 128, the last two. */
TARGET static inline float reduce(__m512d acc) {
    __m256d half = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
    __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(half), _mm256_extractf128_pd(half, 1));
    return (float) (_mm_cvtsd_f64(pair) + _mm_cvtsd_f64(_mm_unpackhi_pd(pair, pair)));
}

/*
 * R weight rows (row i at w + i * row_bytes) with T activation rows (xq[t], bias[t], xd[t] at the row's
 * start): result[i * TOKENS_PER_PASS + t]. R and T are compile-time constants at every call, so the
 * loops over them unroll and the R * T pairs of accumulators stay in registers; each group of weights
 * is unpacked once for the T tokens, each token's activations loaded once for the R rows.
 */
TARGET static inline void tile(const uint8_t *w, int64_t row_bytes, int groups, int tail, int R, int T,
                               __m512i nibbles_of, __m512i scales_of,
                               const int8_t *const *xq, const int32_t *const *bias, const float *const *xd,
                               float *result) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    __m512d low[ROWS_PER_PASS][TOKENS_PER_PASS];
    __m512d high[ROWS_PER_PASS][TOKENS_PER_PASS];
    for (int i = 0; i < R; i++) {
        for (int t = 0; t < T; t++) {
            low[i][t] = _mm512_setzero_pd();
            high[i][t] = _mm512_setzero_pd();
        }
    }
    for (int g = 0; g < groups; g++) {
        __m512i q_low[ROWS_PER_PASS];
        __m512i q_high[ROWS_PER_PASS];
        __m512 dw[ROWS_PER_PASS];
        for (int i = 0; i < R; i++) {
            const uint8_t *p = w + i * row_bytes + (long) g * GROUP_BLOCKS * BLOCK_BYTES;
            _mm_prefetch((const char *) p + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *) p + PREFETCH_BYTES + 64, _MM_HINT_T0);
            __m512i first = _mm512_loadu_si512(p);
            __m512i nibbles = _mm512_permutex2var_epi8(first, nibbles_of, _mm512_loadu_si512(p + 8));
            q_low[i] = _mm512_and_si512(nibbles, low_nibble);
            q_high[i] = _mm512_and_si512(_mm512_srli_epi16(nibbles, 4), low_nibble);
            dw[i] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(scales_of, first)));
        }
        for (int t = 0; t < T; t++) {
            const int8_t *x = xq[t] + (long) g * GROUP_QUANTS;
            __m512i x_low = _mm512_loadu_si512(x);
            __m512i x_high = _mm512_loadu_si512(x + 64);
            __m512i b = _mm512_loadu_si512(bias[t] + (long) g * GROUP_LANES);
            __m512 dx = _mm512_loadu_ps(xd[t] + (long) g * GROUP_LANES);
            for (int i = 0; i < R; i++) {
                __m512i sum = _mm512_dpbusd_epi32(b, q_low[i], x_low);
                sum = _mm512_dpbusd_epi32(sum, q_high[i], x_high);
                __m512 d = _mm512_mul_ps(dw[i], dx);
                low[i][t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(sum)),
                                            _mm512_cvtps_pd(_mm512_castps512_ps256(d)), low[i][t]);
                high[i][t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(sum, 1)),
                                             _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))),
                                             high[i][t]);
            }
        }
    }
    for (int i = 0; i < R; i++) {
        for (int t = 0; t < T; t++) {
            __m512d acc = _mm512_add_pd(low[i][t], high[i][t]);
            if (tail > 0) {
                acc = tail_blocks(w + i * row_bytes + (long) groups * GROUP_BLOCKS * BLOCK_BYTES, tail,
                                  xq[t] + (long) groups * GROUP_QUANTS, xd[t] + (long) groups * GROUP_LANES, acc);
            }
            result[i * TOKENS_PER_PASS + t] = reduce(acc);
        }
    }
}

/* tile() with R and T as constants (R in 1..ROWS_PER_PASS, T in 1..TOKENS_PER_PASS). */
#define TILE(R, T) tile(row, row_bytes, groups, tail, R, T, nibbles_of, scales_of, q, b, d, result)

/*
 * Every variant's entry point (glimmer_q4_0_matmul_<variant>): rows [row_from, row_to) of a Q4_0
 * matrix (row r at w + r * row_bytes, blocks blocks) times the
 * activation rows x_rows[0 .. n): out[out_offset + j * out_stride + (r - row_from)] = row r · row x_rows[j].
 * Activation row i starts at xq + i * cols, bias + i * cols / 8, xd + i * cols / 8 (cols = 32 * blocks).
 */
TARGET void glimmer_q4_0_matmul_avx512_vnni(const uint8_t *w, int64_t row_bytes, int32_t blocks, int32_t row_from, int32_t row_to,
                                const int8_t *xq, const int32_t *bias, const float *xd,
                                const int32_t *x_rows, int32_t n,
                                float *out, int64_t out_offset, int32_t out_stride) {
    out += out_offset;
    const long cols = (long) blocks * QK;
    const int groups = blocks / GROUP_BLOCKS;
    const int tail = blocks % GROUP_BLOCKS;
    const __m512i nibbles_of = nibble_index();
    const __m512i scales_of = scale_index();
    for (int32_t r = row_from; r < row_to; ) {
        const uint8_t *row = w + (long) r * row_bytes;
        /*
         * Two rows at once only for many tokens: rows come from memory fastest one stream at a time
         * (single thread, rows in DRAM: 1 token 25 against 9 GB/s with two rows; 4 tokens 63 against 45
         * GMAC/s), while 16 tokens and more are bound by arithmetic, which two rows share (64: 68 against 55).
         */
        int R = n < PAIRED_ROWS_FROM || row_to - r < ROWS_PER_PASS ? 1 : ROWS_PER_PASS;
        for (int32_t j = 0; j < n; j += TOKENS_PER_PASS) {
            const int8_t *q[TOKENS_PER_PASS];
            const int32_t *b[TOKENS_PER_PASS];
            const float *d[TOKENS_PER_PASS];
            float result[ROWS_PER_PASS * TOKENS_PER_PASS];
            int T = n - j < TOKENS_PER_PASS ? n - j : TOKENS_PER_PASS;
            for (int t = 0; t < T; t++) {
                long i = x_rows[j + t];
                q[t] = xq + i * cols;
                b[t] = bias + i * cols / 8;
                d[t] = xd + i * cols / 8;
            }
            if (R == 2) {
                switch (T) {
                    case 1: TILE(2, 1); break;
                    case 2: TILE(2, 2); break;
                    case 3: TILE(2, 3); break;
                    default: TILE(2, 4); break;
                }
            } else {
                switch (T) {
                    case 1: TILE(1, 1); break;
                    case 2: TILE(1, 2); break;
                    case 3: TILE(1, 3); break;
                    default: TILE(1, 4); break;
                }
            }
            for (int i = 0; i < R; i++) {
                for (int t = 0; t < T; t++) {
                    out[(long) (j + t) * out_stride + (r + i - row_from)] = result[i * TOKENS_PER_PASS + t];
                }
            }
        }
        r += R;
    }
}
