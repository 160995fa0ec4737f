/*
 * The native K-quant kernels for x86-64 (Q4_K and Q6_K weight rows times Q8_K activation rows, one row at
 * a time; NativeKernels calls them from the Java kernels' places), in three variants of kquant_256.inc that
 * differ only in how 4 byte products are summed into an int32 lane:
 *   avx512_vnni  vpdpbusd in its EVEX form on 256-bit vectors (processors with AVX-512 VNNI),
 *   avx_vnni     vpdpbusd in its VEX form (AVX-VNNI without AVX-512),
 *   avx2         vpmaddubsw (pairs into int16: at most 2 * 63 * 127, never saturating) then vpmaddwd by 1.
 * Every variant gives the Java kernels' bits (NativeKernelsTest holds every variant this processor runs to
 * that).
 */
#include <immintrin.h>
#include <stdint.h>

#include "q4_0_layout.h"

#define QK_K 256
#define Q4_K_BLOCK_BYTES 144
#define Q6_K_BLOCK_BYTES 210

/*
 * The 6-bit scales and minimums of a Q4_K super-block's 8 sub-blocks from its 12 packed bytes: sub-blocks
 * 0..3 keep theirs in the low 6 bits of bytes 0..3 (scales) and 4..7 (minimums); sub-blocks 4..7 take the
 * low (scales) or high (minimums) nibble of bytes 8..11 and, as their top two bits, the spare high bits of
 * bytes 0..3 or 4..7 (as Q4_K.scale and Q4_K.min read them).
 */
static inline void q4_K_scales(const uint8_t *packed, int scales[8], int mins[8]) {
    for (int j = 0; j < 4; j++) {
        scales[j] = packed[j] & 63;
        mins[j] = packed[j + 4] & 63;
        scales[j + 4] = (packed[j + 8] & 0x0F) | (packed[j] >> 6) << 4;
        mins[j + 4] = (packed[j + 8] >> 4) | (packed[j + 4] >> 6) << 4;
    }
}

/* a·b + c rounded once (the fused multiply-add of the Java kernels' Math.fma). */
__attribute__((target("fma"))) static inline float fused(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

#define TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define NAME(f) f##_avx512_vnni
TARGET static inline __m256i dot_bytes_avx512_vnni(__m256i acc, __m256i q, __m256i x) {
    return _mm256_dpbusd_epi32(acc, q, x);
}
#define DOT_BYTES dot_bytes_avx512_vnni
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef DOT_BYTES

#define TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define NAME(f) f##_avx_vnni
TARGET static inline __m256i dot_bytes_avx_vnni(__m256i acc, __m256i q, __m256i x) {
    return _mm256_dpbusd_avx_epi32(acc, q, x);
}
#define DOT_BYTES dot_bytes_avx_vnni
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef DOT_BYTES

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define NAME(f) f##_avx2
TARGET static inline __m256i dot_bytes_avx2(__m256i acc, __m256i q, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
}
#define DOT_BYTES dot_bytes_avx2
#include "kquant_256.inc"
#undef TARGET
#undef NAME
#undef DOT_BYTES
