/*
 * The native Q4_0 kernel for 64-bit Arm with the dot-product instructions (sdot: Apple M1 and later,
 * Neoverse, Cortex-A76 and later): 128-bit vectors, one block per vector.
 *
 * It computes exactly what q4_0_avx512.c computes, in the Java kernels' order: int32 lane j of a block's
 * vector is the exact sum of (q - 8) * x over values 4j..4j+3 and 4j+16..4j+19 (sdot sums 4 adjacent
 * bytes: the layout puts those values there; the nibbles 0..15 are signed bytes as well), plus the lane's
 * bias; each block's 4 lanes are converted to double and scaled by fp16(d_w) * d_x into two float64x2
 * accumulators of their own per block of the group (acc[k][0] lanes 0, 1 and acc[k][1] lanes 2, 3: the
 * AVX-512 kernel's lanes 4k'..4k'+3 of `low` for k = 0, 1 and of `high` for k = 2, 3); then the AVX-512
 * kernel's additions in its order: low + high, the blocks after the groups, the halves of 256 bits, of
 * 128, the last two lanes. Built for Arm only (by the Arm build, and by NeonKernelTest under qemu).
 */
#include <arm_neon.h>
#include <stdint.h>

#include "q4_0_layout.h"

/* Activation rows one weight row is unpacked once for. */
#define TOKENS_PER_PASS_NEON 2

/* One weight row with T activation rows (T a compile-time constant at every call): result[t]. */
__attribute__((target("+dotprod"))) static inline void tile(const uint8_t *w, int groups, int tail, int T,
                                                            const int8_t *const *xq, const int32_t *const *bias,
                                                            const float *const *xd, float *result) {
    const uint8x16_t low_nibble = vdupq_n_u8(0x0F);
    float64x2_t acc[TOKENS_PER_PASS_NEON][GROUP_BLOCKS][2];
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < GROUP_BLOCKS; k++) {
            acc[t][k][0] = vdupq_n_f64(0.0);
            acc[t][k][1] = vdupq_n_f64(0.0);
        }
    }
    for (int g = 0; g < groups; g++) {
        const uint8_t *p = w + (long) g * GROUP_BLOCKS * BLOCK_BYTES;
        __builtin_prefetch(p + PREFETCH_BYTES);
        __builtin_prefetch(p + PREFETCH_BYTES + 64);
        for (int k = 0; k < GROUP_BLOCKS; k++) {
            const uint8_t *block = p + k * BLOCK_BYTES;
            uint8x16_t nibbles = vld1q_u8(block + 2);
            int8x16_t q_low = vreinterpretq_s8_u8(vandq_u8(nibbles, low_nibble));
            int8x16_t q_high = vreinterpretq_s8_u8(vshrq_n_u8(nibbles, 4));
            float dw = half_to_float(block);
            for (int t = 0; t < T; t++) {
                const int8_t *x = xq[t] + (long) g * GROUP_QUANTS + 16 * k;
                int32x4_t sum = vld1q_s32(bias[t] + (long) g * GROUP_LANES + 4 * k);
                sum = vdotq_s32(sum, q_low, vld1q_s8(x));
                sum = vdotq_s32(sum, q_high, vld1q_s8(x + 64));
                float64x2_t d = vdupq_n_f64((double) (dw * xd[t][(long) g * GROUP_LANES + 4 * k]));
                acc[t][k][0] = vfmaq_f64(acc[t][k][0], vcvtq_f64_s64(vmovl_s32(vget_low_s32(sum))), d);
                acc[t][k][1] = vfmaq_f64(acc[t][k][1], vcvtq_f64_s64(vmovl_s32(vget_high_s32(sum))), d);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        /* The AVX-512 kernel's 8 lanes of low + high, as 4 pairs: lanes 0-1, 2-3, 4-5, 6-7. */
        float64x2_t lanes[4] = {
            vaddq_f64(acc[t][0][0], acc[t][2][0]), vaddq_f64(acc[t][0][1], acc[t][2][1]),
            vaddq_f64(acc[t][1][0], acc[t][3][0]), vaddq_f64(acc[t][1][1], acc[t][3][1]),
        };
        for (int b = 0; b < tail; b++) {
            const uint8_t *block = w + (long) (groups * GROUP_BLOCKS + b) * BLOCK_BYTES;
            int32_t sums[8];
            tail_block_sums(block, xq[t] + (long) groups * GROUP_QUANTS + b * QK, sums);
            float64x2_t d = vdupq_n_f64((double) (half_to_float(block) * xd[t][(long) groups * GROUP_LANES + 4 * b]));
            for (int i = 0; i < 4; i++) {
                lanes[i] = vfmaq_f64(lanes[i], vcvtq_f64_s64(vmovl_s32(vld1_s32(sums + 2 * i))), d);
            }
        }
        float64x2_t pair = vaddq_f64(vaddq_f64(lanes[0], lanes[2]), vaddq_f64(lanes[1], lanes[3]));
        result[t] = (float) (vgetq_lane_f64(pair, 0) + vgetq_lane_f64(pair, 1));
    }
}

/* glimmer_q4_0_matmul (see q4_0_avx512.c) for this variant: one weight row at a time, tokens in pairs. */
__attribute__((target("+dotprod"))) void glimmer_q4_0_matmul_neon_dotprod(
        const uint8_t *w, int64_t row_bytes, int32_t blocks, int32_t row_from, int32_t row_to,
        const int8_t *xq, const int32_t *bias, const float *xd, const int32_t *x_rows, int32_t n,
        float *out, int64_t out_offset, int32_t out_stride) {
    out += out_offset;
    const long cols = (long) blocks * QK;
    const int groups = blocks / GROUP_BLOCKS;
    const int tail = blocks % GROUP_BLOCKS;
    for (int32_t r = row_from; r < row_to; r++) {
        const uint8_t *row = w + (long) r * row_bytes;
        for (int32_t j = 0; j < n; j += TOKENS_PER_PASS_NEON) {
            const int8_t *q[TOKENS_PER_PASS_NEON];
            const int32_t *b[TOKENS_PER_PASS_NEON];
            const float *d[TOKENS_PER_PASS_NEON];
            float result[TOKENS_PER_PASS_NEON];
            int T = n - j < TOKENS_PER_PASS_NEON ? n - j : TOKENS_PER_PASS_NEON;
            for (int t = 0; t < T; t++) {
                long i = x_rows[j + t];
                q[t] = xq + i * cols;
                b[t] = bias + i * cols / 8;
                d[t] = xd + i * cols / 8;
            }
            if (T == 1) {
                tile(row, groups, tail, 1, q, b, d, result);
            } else {
                tile(row, groups, tail, TOKENS_PER_PASS_NEON, q, b, d, result);
            }
            for (int t = 0; t < T; t++) {
                out[(long) (j + t) * out_stride + (r - row_from)] = result[t];
            }
        }
    }
}
