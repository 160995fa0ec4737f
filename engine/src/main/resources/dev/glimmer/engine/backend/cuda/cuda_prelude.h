// Glimmer's CUDA prelude: what the portable MSL subset (docs/KERNELS.md §6) needs so that NVRTC compiles
// our .metal sources as CUDA C++. It uses only what NVRTC declares without headers (builtin vector
// types, thread ids, warp shuffles, math functions), so the same text also builds with nvcc.
// CudaSourceRewriter drops the address-space words (a macro `device` would break CUDA's own
// __device__), puts __device__ on every helper and appends one __global__ wrapper per kernel.

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// IEEE half, stored as its bits: the kernels only read halves and convert them to float.
struct glimmer_half {
    unsigned short bits;
    __device__ operator float() const {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
        return f;
    }
};
struct __align__(4) glimmer_half2 { glimmer_half x, y; };
struct __align__(8) glimmer_half4 { glimmer_half x, y, z, w; };
#define half glimmer_half
#define half2 glimmer_half2
#define half4 glimmer_half4

static __device__ __forceinline__ float4 to_float4(half4 h) { float4 f; f.x = h.x; f.y = h.y; f.z = h.z; f.w = h.w; return f; }
static __device__ __forceinline__ float2 to_float2(half2 h) { float2 f; f.x = h.x; f.y = h.y; return f; }

// The wrappers' values of MSL's vector builtins (written out: NVRTC need not declare make_uint3).
static __device__ __forceinline__ uint3 glimmer_uint3(uint x, uint y, uint z) { uint3 v; v.x = x; v.y = y; v.z = z; return v; }
static __device__ __forceinline__ uint2 glimmer_uint2(uint x, uint y) { uint2 v; v.x = x; v.y = y; return v; }

static __device__ __forceinline__ float dot(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
static __device__ __forceinline__ float dot(float2 a, float2 b) { return a.x * b.x + a.y * b.y; }
static __device__ __forceinline__ float clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }
template <typename T> static __device__ __forceinline__ T select(T a, T b, bool c) { return c ? b : a; }
template <typename To, typename From> static __device__ __forceinline__ To as_type(From from) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
    union { From f; To t; } u;
    u.f = from;
    return u.t;
}

// MSL's math namespaces: precise:: is the correctly rounded kind, fast:: the hardware approximations.
namespace precise {
static __device__ __forceinline__ float exp(float x) { return ::expf(x); }
static __device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
static __device__ __forceinline__ float cos(float x) { return ::cosf(x); }
static __device__ __forceinline__ float sin(float x) { return ::sinf(x); }
static __device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
}
namespace fast {
static __device__ __forceinline__ float exp(float x) { return __expf(x); }
static __device__ __forceinline__ float sqrt(float x) { return __fsqrt_rn(x); }
static __device__ __forceinline__ float cos(float x) { return __cosf(x); }
static __device__ __forceinline__ float sin(float x) { return __sinf(x); }
static __device__ __forceinline__ float pow(float x, float y) { return __powf(x, y); }
}

// SIMD-groups are warps. Every kernel runs whole warps, so the full mask is right. The sum ends with
// lane 0's value broadcast: a butterfly adds in a different order on each lane, and callers rely on
// every lane holding the same result (mla_attention's softmax state).
template <typename T> static __device__ __forceinline__ T simd_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}
template <typename T> static __device__ __forceinline__ T simd_max(T v) {
    for (int o = 16; o > 0; o >>= 1) { T u = __shfl_xor_sync(0xffffffffu, v, o); v = u > v ? u : v; }
    return v;
}
template <typename T> static __device__ __forceinline__ T simd_min(T v) {
    for (int o = 16; o > 0; o >>= 1) { T u = __shfl_xor_sync(0xffffffffu, v, o); v = u < v ? u : v; }
    return v;
}
template <typename T> static __device__ __forceinline__ T simd_shuffle(T v, ushort lane) { return __shfl_sync(0xffffffffu, v, lane); }
template <typename T> static __device__ __forceinline__ T simd_shuffle_xor(T v, ushort mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <typename T> static __device__ __forceinline__ T simd_shuffle_down(T v, ushort delta) { return __shfl_down_sync(0xffffffffu, v, delta); }
template <typename T> static __device__ __forceinline__ T simd_shuffle_up(T v, ushort delta) { return __shfl_up_sync(0xffffffffu, v, delta); }
template <typename T> static __device__ __forceinline__ T simd_broadcast(T v, ushort lane) { return __shfl_sync(0xffffffffu, v, lane); }

enum class mem_flags { mem_none, mem_device, mem_threadgroup };
#define threadgroup_barrier(flags) __syncthreads()
#define simdgroup_barrier(flags) __syncwarp()

// Threadgroup memory: one dynamic shared-memory block per launch; a kernel's TG_MEM(i) parameter
// points at offset i of it (the wrapper's tg<i> arguments).
extern __shared__ float4 glimmer_threadgroup_memory[];

// The kernels mark threadgroup-memory parameters TG_MEM(i); the wrapper supplies them.
#define TG_MEM(index)
