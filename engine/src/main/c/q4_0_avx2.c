/*
 * The native Q4_0 kernel for x86-64 processors without AVX-512 (q4_0_avx512.c has the one for those with
 * it): 256-bit vectors, in two variants of q4_0_256.inc that differ only in how 4 byte products are
 * summed into an int32 lane:
 *   avx2      vpmaddubsw (pairs into int16: at most 2 * 15 * 127, never saturating) then vpmaddwd by 1;
 *   avx_vnni  vpdpbusd in its VEX form (processors with AVX-VNNI but no AVX-512, such as Intel's client
 *             processors since Alder Lake).
 * Both give the Java kernel's bits (NativeKernelsTest holds every variant this processor runs to that).
 */
#include <immintrin.h>
#include <stdint.h>

#include "q4_0_layout.h"

/* Activation rows one weight row is unpacked once for: 4 (16 accumulators, some kept in memory) streamed
 * 2048x1536 at 4 and 64 tokens a tenth faster than 2 (CPU time of one thread, on a busy machine). */
#define TOKENS_PER_PASS_256 4

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define NAME(f) f##_avx2
TARGET static inline __m256i dot_bytes_avx2(__m256i acc, __m256i q, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
}
#define DOT_BYTES dot_bytes_avx2
#include "q4_0_256.inc"
#undef TARGET
#undef NAME
#undef DOT_BYTES

#define TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define NAME(f) f##_avx_vnni
TARGET static inline __m256i dot_bytes_avx_vnni(__m256i acc, __m256i q, __m256i x) {
    return _mm256_dpbusd_avx_epi32(acc, q, x);
}
#define DOT_BYTES dot_bytes_avx_vnni
#include "q4_0_256.inc"
#undef TARGET
#undef NAME
#undef DOT_BYTES
