// The emulator's prelude: what the portable MSL subset (docs/KERNELS.md §6) needs so that clang-19
// compiles our .metal sources as C++17. Every GPU thread of a threadgroup runs as a fiber of
// runtime.cpp; the SIMD-group collectives and barriers below suspend the calling fiber until
// every participant has arrived, and report where each one waits when they never do.
#pragma once

#include <cmath>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <cstddef>

// Address spaces and the kernel keyword mean nothing on the CPU.
#define kernel
#define device
#define constant
#define thread
#define threadgroup
// `[[threadgroup(0)]]` would clash with the address-space macro, so kernels spell it TG_MEM(0).
#define TG_MEM(index)

typedef _Float16 half;
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

#define GLIMMER_VEC(T, N) typedef T T##N __attribute__((ext_vector_type(N)));
#define GLIMMER_VECS(T) GLIMMER_VEC(T, 2) GLIMMER_VEC(T, 3) GLIMMER_VEC(T, 4)
GLIMMER_VECS(float)
GLIMMER_VECS(half)
GLIMMER_VECS(int)
GLIMMER_VECS(uint)
GLIMMER_VECS(short)
GLIMMER_VECS(ushort)
GLIMMER_VECS(char)
GLIMMER_VECS(uchar)
GLIMMER_VEC(ulong, 2)
#undef GLIMMER_VECS
#undef GLIMMER_VEC

// Math: float overloads only (MSL has no double).
using std::exp;
using std::sqrt;
using std::fabs;
using std::log;
using std::cos;
using std::sin;
using std::pow;
using std::isinf;
using std::isnan;
static inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
static inline float min(float a, float b) { return std::fmin(a, b); }
static inline float max(float a, float b) { return std::fmax(a, b); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline uint min(uint a, uint b) { return a < b ? a : b; }
static inline uint max(uint a, uint b) { return a > b ? a : b; }
static inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
template <typename T> static inline T select(T a, T b, bool c) { return c ? b : a; }
static inline float dot(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
static inline float dot(float2 a, float2 b) { return a.x * b.x + a.y * b.y; }
namespace fast { using std::exp; using std::sqrt; using std::cos; using std::sin; using std::pow; }
namespace precise { using std::exp; using std::sqrt; using std::cos; using std::sin; using std::pow; }

template <typename To, typename From> static inline To as_type(From from) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
    To to;
    std::memcpy(&to, &from, sizeof(To));
    return to;
}

// Conversions between vector types: a conversion in MSL (`float4(h)`), a bit-cast for clang's
// ext-vectors, so the portable subset uses named helpers.
static inline float4 to_float4(half4 h) { return __builtin_convertvector(h, float4); }
static inline float2 to_float2(half2 h) { return __builtin_convertvector(h, float2); }

enum class mem_flags { mem_none, mem_device, mem_threadgroup };

// ---- the runtime's side (runtime.cpp) ----
namespace emu {

enum Op { SUM, MAX, MIN, SHUFFLE, SHUFFLE_XOR, SHUFFLE_DOWN, SHUFFLE_UP, BROADCAST, SIMD_BARRIER };

constexpr int SIMD_WIDTH = 32;
constexpr int MAX_VALUE_BYTES = 32;

// Computes every lane's result from the 32 published values once all lanes have arrived.
typedef void (*Combine)(int op, int lanes, const unsigned char* values, const int* params, unsigned char* results);

// Publishes `value` (and an int parameter such as a source lane) for this lane, waits until
// every lane of the SIMD-group reaches the same collective, then copies this lane's result.
void collective(int op, const char* what, const char* file, int line, const void* value, int size, int param,
                void* result, Combine combine);
void barrier(const char* file, int line);

template <typename T> static void combine(int op, int lanes, const unsigned char* values, const int* params,
                                          unsigned char* results) {
    T v[SIMD_WIDTH];
    std::memcpy(v, values, sizeof(T) * lanes);
    T r[SIMD_WIDTH];
    switch (op) {
        case SUM: case MAX: case MIN: {
            // A fixed left-to-right order: results must not depend on the fiber schedule.
            T acc = v[0];
            for (int i = 1; i < lanes; i++) {
                if (op == SUM) acc = acc + v[i];
                else if (op == MAX) acc = v[i] > acc ? v[i] : acc;
                else acc = v[i] < acc ? v[i] : acc;
            }
            for (int i = 0; i < lanes; i++) r[i] = acc;
            break;
        }
        case SHUFFLE: case BROADCAST:
            for (int i = 0; i < lanes; i++) r[i] = v[(unsigned) params[i] % (unsigned) lanes];
            break;
        case SHUFFLE_XOR:
            for (int i = 0; i < lanes; i++) { int s = i ^ params[i]; r[i] = s < lanes ? v[s] : v[i]; }
            break;
        case SHUFFLE_DOWN:
            for (int i = 0; i < lanes; i++) { int s = i + params[i]; r[i] = s < lanes ? v[s] : v[i]; }
            break;
        case SHUFFLE_UP:
            for (int i = 0; i < lanes; i++) { int s = i - params[i]; r[i] = s >= 0 ? v[s] : v[i]; }
            break;
        default:
            for (int i = 0; i < lanes; i++) r[i] = v[i];
    }
    std::memcpy(results, r, sizeof(T) * lanes);
}

template <typename T> static inline T run(int op, const char* what, const char* file, int line, T value, int param) {
    static_assert(sizeof(T) <= MAX_VALUE_BYTES, "collective value too large");
    T result;
    collective(op, what, file, line, &value, (int) sizeof(T), param, &result, &combine<T>);
    return result;
}

}  // namespace emu

#define simd_sum(x) emu::run(emu::SUM, "simd_sum", __FILE__, __LINE__, (x), 0)
#define simd_max(x) emu::run(emu::MAX, "simd_max", __FILE__, __LINE__, (x), 0)
#define simd_min(x) emu::run(emu::MIN, "simd_min", __FILE__, __LINE__, (x), 0)
#define simd_shuffle(x, lane) emu::run(emu::SHUFFLE, "simd_shuffle", __FILE__, __LINE__, (x), (int) (lane))
#define simd_shuffle_xor(x, mask) emu::run(emu::SHUFFLE_XOR, "simd_shuffle_xor", __FILE__, __LINE__, (x), (int) (mask))
#define simd_shuffle_down(x, delta) emu::run(emu::SHUFFLE_DOWN, "simd_shuffle_down", __FILE__, __LINE__, (x), (int) (delta))
#define simd_shuffle_up(x, delta) emu::run(emu::SHUFFLE_UP, "simd_shuffle_up", __FILE__, __LINE__, (x), (int) (delta))
#define simd_broadcast(x, lane) emu::run(emu::BROADCAST, "simd_broadcast", __FILE__, __LINE__, (x), (int) (lane))
#define simdgroup_barrier(flags) ((void) emu::run(emu::SIMD_BARRIER, "simdgroup_barrier", __FILE__, __LINE__, 0, 0))
#define threadgroup_barrier(flags) emu::barrier(__FILE__, __LINE__)

// ---- SIMD-group matrices ----
// Every lane holds the whole matrix and computes each operation itself, exactly in float (the product of
// two halves is exact in float; sums in the order k = 0, 1, ...). Each operation is also a SIMD-group
// collective, as on the GPU, where all lanes take part: a lane that diverges fails the dispatch.
template <typename T, int Cols, int Rows> struct simdgroup_matrix {
    T e[Rows][Cols];
};
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

namespace emu {

template <typename T, int Cols, int Rows> static inline simdgroup_matrix<T, Cols, Rows> filled(T value) {
    simdgroup_matrix<T, Cols, Rows> m;
    for (int r = 0; r < Rows; r++) {
        for (int c = 0; c < Cols; c++) m.e[r][c] = value;
    }
    return m;
}

// Element (r, c) of the matrix at src + origin (origin.x a column, origin.y a row); transposed: element (c, r).
template <typename T, int Cols, int Rows>
static inline void load(simdgroup_matrix<T, Cols, Rows>& d, const T* src, ulong elements_per_row = Cols,
                        ulong2 origin = ulong2{0, 0}, bool transpose = false) {
    src += origin.y * elements_per_row + origin.x;
    for (int r = 0; r < Rows; r++) {
        for (int c = 0; c < Cols; c++) d.e[r][c] = transpose ? src[c * elements_per_row + r] : src[r * elements_per_row + c];
    }
}

template <typename T, int Cols, int Rows>
static inline void store(const simdgroup_matrix<T, Cols, Rows>& a, T* dst, ulong elements_per_row = Cols,
                         ulong2 origin = ulong2{0, 0}, bool transpose = false) {
    dst += origin.y * elements_per_row + origin.x;
    for (int r = 0; r < Rows; r++) {
        for (int c = 0; c < Cols; c++) (transpose ? dst[c * elements_per_row + r] : dst[r * elements_per_row + c]) = a.e[r][c];
    }
}

// d = a * b + c
template <typename T, typename U, int Cols, int Rows, int K>
static inline void multiply_accumulate(simdgroup_matrix<T, Cols, Rows>& d, const simdgroup_matrix<U, K, Rows>& a,
                                       const simdgroup_matrix<U, Cols, K>& b, const simdgroup_matrix<T, Cols, Rows>& c) {
    simdgroup_matrix<T, Cols, Rows> out;
    for (int r = 0; r < Rows; r++) {
        for (int j = 0; j < Cols; j++) {
            float sum = (float) c.e[r][j];
            for (int k = 0; k < K; k++) sum += (float) a.e[r][k] * (float) b.e[k][j];
            out.e[r][j] = (T) sum;
        }
    }
    d = out;
}

}  // namespace emu

#define GLIMMER_MATRIX_OP(what) ((void) emu::run(emu::SIMD_BARRIER, what, __FILE__, __LINE__, 0, 0))
template <typename T, int Cols, int Rows> static inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
    return emu::filled<T, Cols, Rows>(value);
}
// Lanes meet before a load (the matrix is read once all lanes have come) and after a store.
#define simdgroup_load(...) (GLIMMER_MATRIX_OP("simdgroup_load"), emu::load(__VA_ARGS__))
#define simdgroup_store(...) (emu::store(__VA_ARGS__), GLIMMER_MATRIX_OP("simdgroup_store"))
#define simdgroup_multiply_accumulate(...) (GLIMMER_MATRIX_OP("simdgroup_multiply_accumulate"), emu::multiply_accumulate(__VA_ARGS__))

// What a thunk passes to a kernel besides its buffers (the values of MSL's attribute builtins).
struct GlimmerThreadIds {
    uint3 threadgroup_position_in_grid;
    uint3 threadgroups_per_grid;
    uint3 thread_position_in_threadgroup;
    uint3 threads_per_threadgroup;
    uint3 thread_position_in_grid;
    uint thread_index_in_threadgroup;
    uint thread_index_in_simdgroup;
    uint simdgroup_index_in_threadgroup;
    uint threads_per_simdgroup;
    uint simdgroups_per_threadgroup;
};
