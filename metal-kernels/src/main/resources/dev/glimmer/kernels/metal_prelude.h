// The prelude for Apple's Metal compiler: what the portable subset (docs/KERNELS.md §6) spells through
// macros and helpers so that the same sources also build on the CPU emulator (emulator/prelude.h).
#include <metal_stdlib>
using namespace metal;

#define TG_MEM(index) [[threadgroup(index)]]

static inline float4 to_float4(half4 h) { return float4(h); }
static inline float2 to_float2(half2 h) { return float2(h); }
