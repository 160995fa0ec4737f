/*
 * The native K-quant and Q5_0 kernels for x86-64 (ranges of Q4_K, Q5_K and Q6_K weight rows times several Q8_K
 * activation rows, of Q5_0 rows times Q8_0 rows; NativeKernels calls them for every multiplication by such
 * weights, as the Q4_0 kernel), in three
 * variants of kquant_256.inc that differ only in how the int16 pair sums of vpmaddubsw are scaled into
 * int32 lanes:
 *   avx512_vnni  vpdpwssd in its EVEX form on 256-bit vectors (processors with AVX-512 VNNI),
 *   avx_vnni     vpdpwssd in its VEX form (AVX-VNNI without AVX-512),
 *   avx2         vpmaddwd then vpaddd.
 * Every variant gives the Java kernels' bits (NativeKernelsTest holds every variant this processor runs to
 * that).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "q4_0_layout.h"

#define QK_K 256
#define Q4_K_BLOCK_BYTES 144
#define Q6_K_BLOCK_BYTES 210
#define Q5_0_BLOCK_BYTES 22
#define Q5_K_BLOCK_BYTES 176
/* The weight types of typed_matmul. */
#define Q4_K_TYPE 0
#define Q6_K_TYPE 1
#define Q5_0_TYPE 2
#define Q5_K_TYPE 3
/* Activation rows a weight row's super-block is unpacked once for. */
#define TOKENS_PER_PASS 4

/*
 * The 6-bit scales and minimums of a Q4_K super-block's 8 sub-blocks from its 12 packed bytes: sub-blocks
 * 0..3 keep theirs in the low 6 bits of bytes 0..3 (scales) and 4..7 (minimums); sub-blocks 4..7 take the
 * low (scales) or high (minimums) nibble of bytes 8..11 and, as their top two bits, the spare high bits of
 * bytes 0..3 or 4..7 (as Q4_K.scale and Q4_K.min read them). Four bytes at a time, as 32-bit words.
 */
static inline void q4_K_scales(const uint8_t *packed, uint8_t scales[8], uint8_t mins[8]) {
    uint32_t first, second, third;
    memcpy(&first, packed, 4);
    memcpy(&second, packed + 4, 4);
    memcpy(&third, packed + 8, 4);
    uint32_t words[4] = {
        first & 0x3F3F3F3Fu,
        (third & 0x0F0F0F0Fu) | ((first >> 6) & 0x03030303u) << 4,
        second & 0x3F3F3F3Fu,
        ((third >> 4) & 0x0F0F0F0Fu) | ((second >> 6) & 0x03030303u) << 4,
    };
    memcpy(scales, words, 8);
    memcpy(mins, words + 2, 8);
}

/* a·b + c rounded once (the fused multiply-add of the Java kernels' Math.fma). */
__attribute__((target("fma"))) static inline float fused(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

#define TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define NAME(f) f##_avx512_vnni
TARGET static inline __m256i scaled_add_avx512_vnni(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_dpwssd_epi32(acc, pairs, scales);
}
#define SCALED_ADD scaled_add_avx512_vnni
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef SCALED_ADD

#define TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define NAME(f) f##_avx_vnni
TARGET static inline __m256i scaled_add_avx_vnni(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_dpwssd_avx_epi32(acc, pairs, scales);
}
#define SCALED_ADD scaled_add_avx_vnni
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef SCALED_ADD

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define NAME(f) f##_avx2
TARGET static inline __m256i scaled_add_avx2(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}
#define SCALED_ADD scaled_add_avx2
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef SCALED_ADD
