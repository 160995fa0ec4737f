/*
 * Which native kernel variants this processor runs: bit i for variant i, in the order of
 * NativeKernels.Variant (0 avx512_vnni, 1 avx_vnni, 2 avx2, 3 neon_dotprod). The Java side takes the
 * first one the library has and the processor runs, unless GLIMMER_CPU_KERNELS names another.
 */
#include <stdint.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

int32_t glimmer_cpu_variants(void) {
    int32_t variants = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
            && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
            && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi")
            && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma")) {
        variants |= 1 << 0;
    }
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avxvnni")) {
        variants |= 1 << 1;
    }
    if (avx2) {
        variants |= 1 << 2;
    }
#elif defined(__aarch64__)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) {
        variants |= 1 << 3;
    }
#endif
    return variants;
}
