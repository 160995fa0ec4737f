/*
 * The facts every native Q4_0 kernel variant shares: the block format and the activation layout (described
 * in q4_0_avx512.c), and the settings of their passes.
 */
#ifndef GLIMMER_Q4_0_LAYOUT_H
#define GLIMMER_Q4_0_LAYOUT_H

#include <stdint.h>

#define QK 32
#define BLOCK_BYTES 18
#define GROUP_BLOCKS 4
/* Bytes of a group of four blocks in the activation layout: 128 quants. */
#define GROUP_QUANTS (GROUP_BLOCKS * QK)
/* int32 (or float) lanes per group: four per block. */
#define GROUP_LANES 16
/*
 * How far ahead of the weights being read the kernels ask for them (the next rows: a matrix's rows are
 * contiguous). The hardware prefetcher alone streamed the decode step's matrices of 0.7-6 MB at 15-21 GB/s
 * a thread; asking 4 KB ahead took a layer's six kinds of matrix a tenth less time (median of 3 rounds).
 */
#define PREFETCH_BYTES 4096

/* An fp16 value widened to float (exactly). */
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("f16c"))) static inline float half_to_float(const uint8_t *p) {
    return _cvtsh_ss((unsigned short) (p[0] | p[1] << 8));
}
#elif defined(__aarch64__)
#include <string.h>

static inline float half_to_float(const uint8_t *p) {
    __fp16 h;
    memcpy(&h, p, sizeof h);
    return (float) h;
}
#endif

/*
 * A block after the groups, one at a time as the Java kernel takes it: lane j (of 8) the exact sum of
 * (q - 8) * x over values j, j+8, j+16, j+24, whose activation quants come at x[4j .. 4j+3] (the
 * layout's order for these blocks). Plain C: only rows of 1 to 3 blocks past their last group have any.
 */
static inline void tail_block_sums(const uint8_t *block, const int8_t *x, int32_t sums[8]) {
    for (int j = 0; j < 8; j++) {
        int32_t sum = 0;
        for (int m = 0; m < 4; m++) {
            int value = j + 8 * m;
            int q = value < 16 ? block[2 + value] & 0x0F : block[2 + value - 16] >> 4;
            sum += (q - 8) * x[4 * j + m];
        }
        sums[j] = sum;
    }
}

#endif
