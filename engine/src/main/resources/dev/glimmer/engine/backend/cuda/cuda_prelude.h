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

// IEEE half, stored as its bits: the kernels read halves as float, and the prompt kernels' tiles
// (tiles.metal) write floats rounded to the nearest half.
struct glimmer_half {
    unsigned short bits;
    glimmer_half() = default;
    __device__ glimmer_half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
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

// ---- matrix-unit tiles: tiles.metal's MmaA, MmaB, MmaTile and mma_* on the tensor cores ----
// mma.sync.aligned.m16n8k16 with half operands and float sums. Lane l holds, of each operand, the pairs of
// elements in row l / 4 (and row l / 4 + 8) at column 2 (l % 4) (and column 2 (l % 4) + 8): a weight
// tile's rows and depth, an activation tile's tokens and depth, a sum tile's rows and tokens. Pairs are
// adjacent halves in threadgroup memory, read as one 32-bit word each.
struct MmaA {
    uint r[4];
};

struct MmaTile {
    float c[4];
};

static __device__ __forceinline__ void mma_zero(MmaTile & t) {
    t.c[0] = 0.0f;
    t.c[1] = 0.0f;
    t.c[2] = 0.0f;
    t.c[3] = 0.0f;
}

static __device__ __forceinline__ uint mma_pair(const half * p) {
    return *(const uint *) p;
}

static __device__ __forceinline__ void mma_load_a(MmaA & a, const half * src, uint stride, ushort lane) {
    const half * p = src + (lane / 4) * stride + (lane % 4) * 2;
    a.r[0] = mma_pair(p);
    a.r[1] = mma_pair(p + 8 * stride);
    a.r[2] = mma_pair(p + 8);
    a.r[3] = mma_pair(p + 8 * stride + 8);
}

struct MmaB {
    uint r[2];
};

static __device__ __forceinline__ void mma_load_b(MmaB & b, const half * src, uint stride, ushort lane) {
    const half * p = src + (lane / 4) * stride + (lane % 4) * 2;
    b.r[0] = mma_pair(p);
    b.r[1] = mma_pair(p + 8);
}

static __device__ __forceinline__ void mma_tile(MmaTile & c, MmaA & a, MmaB & b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c.c[0]), "+f"(c.c[1]), "+f"(c.c[2]), "+f"(c.c[3])
                 : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
}

static __device__ __forceinline__ void mma_store_tokens(MmaTile & c, float * out, uint stride, ushort lane) {
    uint row = lane / 4;
    uint token = (lane % 4) * 2;
    out[token * stride + row] = c.c[0];
    out[(token + 1) * stride + row] = c.c[1];
    out[token * stride + row + 8] = c.c[2];
    out[(token + 1) * stride + row + 8] = c.c[3];
}

// diag: 8 x 8 floats with token j's factor at (j, j); a lane's sums are of tokens 2 (l % 4) and 2 (l % 4) + 1.
static __device__ __forceinline__ void mma_scale_tokens(MmaTile & c, const float * diag, ushort lane) {
    uint token = (lane % 4) * 2;
    float f0 = diag[token * 9];
    float f1 = diag[(token + 1) * 9];
    c.c[0] *= f0;
    c.c[1] *= f1;
    c.c[2] *= f0;
    c.c[3] *= f1;
}
