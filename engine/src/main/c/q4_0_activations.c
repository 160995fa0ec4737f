/*
 * Activation rows quantized to Q8_0 and laid out for the native Q4_0 kernels (every variant reads the
 * same layout; see q4_0_avx512.c for it). Plain C, compiled for the baseline instruction set: the
 * kernels spend their time in the weights, this in a few thousand values per token.
 */
#include <stdint.h>

#include "q4_0_layout.h"

/*
 * Activation row x (cols values, a multiple of 32) quantized to Q8_0 as the Java quantizer does it (per
 * block of 32: amax the largest |x|, scale fp16(amax / 127) widened back, quant rint(x * (127 / amax)), 0
 * for an all-zero block), laid out as activation row `row` of xq, bias and xd.
 */
void glimmer_q4_0_activations(const float *x, int32_t cols, int8_t *xq, int32_t *bias, float *xd, int64_t row) {
    xq += row * cols;
    bias += row * cols / 8;
    xd += row * cols / 8;
    const int blocks = cols / QK;
    const int grouped = blocks - blocks % GROUP_BLOCKS;
    for (int b = 0; b < blocks; b++) {
        const float *v = x + b * QK;
        float amax = 0.0f;
        for (int i = 0; i < QK; i++) {
            float a = v[i] < 0.0f ? -v[i] : v[i];
            amax = a > amax ? a : amax;
        }
        /* The scale rounded to half precision (to nearest, ties to even) and widened back, exactly. */
        float scale = (float) (_Float16) (amax / 127.0f);
        float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
        int8_t quants[QK];
        for (int i = 0; i < QK; i++) {
            quants[i] = (int8_t) __builtin_rintf(v[i] * inverse); /* to nearest, halves to even */
        }
        if (b < grouped) {
            int group = b / GROUP_BLOCKS * GROUP_QUANTS;
            int k = b % GROUP_BLOCKS;
            for (int i = 0; i < 16; i++) {
                xq[group + 16 * k + i] = quants[i];
                xq[group + 64 + 16 * k + i] = quants[16 + i];
            }
            for (int j = 0; j < 4; j++) {
                int sum = 0;
                for (int i = 4 * j; i < 4 * j + 4; i++) {
                    sum += quants[i] + quants[16 + i];
                }
                bias[group / 8 + 4 * k + j] = -8 * sum;
                xd[group / 8 + 4 * k + j] = scale;
            }
        } else {
            for (int j = 0; j < 8; j++) {
                for (int m = 0; m < 4; m++) {
                    xq[b * QK + 4 * j + m] = quants[j + 8 * m];
                }
            }
            xd[b * QK / 8] = scale;
        }
    }
}
