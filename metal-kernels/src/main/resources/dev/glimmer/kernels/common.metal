// Helpers every kernel file uses: weight block formats read in place, the SIMD-group mat-vec core,
// threadgroup reductions. Written in the portable MSL subset (docs/KERNELS.md §6); GLIMMER_* macros
// come from dev.glimmer.kernels.Geometry.

#define NR GLIMMER_MV_ROWS_PER_SIMDGROUP
#define CH GLIMMER_CHUNK
#define SIMD_WIDTH GLIMMER_SIMD_WIDTH

// What changes per token; the host writes it before each step, one per token of a batch (the decode step
// is a batch of one). The kernels of a batch (prompt.metal, and embed_row and mla_attention, which the
// decode step shares) read token t's entry at tgpig.x; a batch shorter than its command list's token count
// ends in entries with kv_len 0, whose threadgroups return at once. The tokens of a batch may belong to
// different sequences (a decode step of several conversations): each sequence's cache is a range of rows of
// the layer's KV buffer (the KV pool), starting at kv_row.
// A StepArgs token that stands for the sequence's latest greedy token (a chained step: embed_row).
#define PREVIOUS_GREEDY ((uint) GLIMMER_PREVIOUS_GREEDY)

struct StepArgs {
    uint token;    // input token id, or PREVIOUS_GREEDY
    uint pos;      // its position
    uint kv_len;   // cached rows after this token's row is written (pos + 1); 0: no token here
    uint kv_row;   // the KV buffer row of its sequence's position 0
    uint slot;     // its sequence's slot of the pool: where the sequence's latest greedy token is kept
};

// ggml type ids (GGUF tensor types) the kernels read; the ids and block sizes are
// dev.glimmer.kernels.WeightFormat's.
#define TYPE_F32 GLIMMER_TYPE_F32
#define TYPE_F16 GLIMMER_TYPE_F16
#define TYPE_Q4_0 GLIMMER_TYPE_Q4_0
#define TYPE_Q5_0 GLIMMER_TYPE_Q5_0
#define TYPE_Q8_0 GLIMMER_TYPE_Q8_0
#define TYPE_Q4_K GLIMMER_TYPE_Q4_K
#define TYPE_Q5_K GLIMMER_TYPE_Q5_K
#define TYPE_Q6_K GLIMMER_TYPE_Q6_K

// Bytes of a row of `cols` values of `type` (cols is a multiple of the type's block size).
static inline uint row_bytes(uint type, uint cols) {
    switch (type) {
        case TYPE_F32: return cols / GLIMMER_F32_BLOCK_VALUES * GLIMMER_F32_BLOCK_BYTES;
        case TYPE_F16: return cols / GLIMMER_F16_BLOCK_VALUES * GLIMMER_F16_BLOCK_BYTES;
        case TYPE_Q4_0: return cols / GLIMMER_Q4_0_BLOCK_VALUES * GLIMMER_Q4_0_BLOCK_BYTES;
        case TYPE_Q5_0: return cols / GLIMMER_Q5_0_BLOCK_VALUES * GLIMMER_Q5_0_BLOCK_BYTES;
        case TYPE_Q8_0: return cols / GLIMMER_Q8_0_BLOCK_VALUES * GLIMMER_Q8_0_BLOCK_BYTES;
        case TYPE_Q4_K: return cols / GLIMMER_Q4_K_BLOCK_VALUES * GLIMMER_Q4_K_BLOCK_BYTES;
        case TYPE_Q5_K: return cols / GLIMMER_Q5_K_BLOCK_VALUES * GLIMMER_Q5_K_BLOCK_BYTES;
        default: return cols / GLIMMER_Q6_K_BLOCK_VALUES * GLIMMER_Q6_K_BLOCK_BYTES;  // TYPE_Q6_K
    }
}

// n rounded up to a multiple of 4: float offsets of threadgroup arrays read as float4.
static inline uint align4(uint n) { return (n + 3) / 4 * 4; }

static inline float load_half(device const uchar * p) {
    return (float) *((device const half *) p);
}

// ---- activation sources: where the mat-vec reads x[i] from ----
// get4(i) reads x[i..i+4) in one load (i a multiple of 4, x 16-byte aligned): the chunk loads read
// their 16 activations as four of these, a quarter of the load instructions of scalar reads.

struct XDevice {
    device const float * x;
    float get(uint i) const { return x[i]; }
    float4 get4(uint i) const { return *((device const float4 *) (x + i)); }
};

struct XThreadgroup {
    threadgroup const float * x;
    float get(uint i) const { return x[i]; }
    float4 get4(uint i) const { return *((threadgroup const float4 *) (x + i)); }
};

// x[i] * w[i]: an RMS-normalized input without its 1/rms factor, read straight from device memory. The
// kernels that normalize their input multiply the finished dot products by that factor instead (it
// is common to every value of a row), so the weight loads go out together with the input loads rather
// than after a pass that stages the normalized input in threadgroup memory: one memory round trip
// and two barriers less before the mat-vec starts.
struct XScaled {
    device const float * x;
    device const float * w;
    float get(uint i) const { return x[i] * w[i]; }
    float4 get4(uint i) const {
        float4 v = *((device const float4 *) (x + i));
        float4 n = *((device const float4 *) (w + i));
        v.x *= n.x;
        v.y *= n.y;
        v.z *= n.z;
        v.w *= n.w;
        return v;
    }
};

// ---- weight formats ----
// A row is read in chunks of CH = 16 values; lane l of a SIMD-group takes chunks l, l+32, ...
// load() fetches the chunk's 16 activations (in the order dot() wants them), dot() multiplies them
// with the chunk's weights read in place, dequant() writes the 16 weights in load() order and
// index() says which element of the row chunk value i is; gather() fetches the chunk's 16 activations
// in that order as they are (the prompt kernels multiply them with dequantized weights).

// 32 values per block of 18 bytes {half d; uchar qs[16]}: value j in the low nibble of qs[j], j+16 in the high one.
// A chunk is half a block: bytes 8*il .. 8*il+7, i.e. values 8il..8il+7 and 16+8il..16+8il+7. The block
// is only 2-byte aligned, so qs is read as ushorts and masked in place; activations are pre-scaled
// by 1, 1/256, 1/16, 1/4096 to undo the nibble positions, and the -8 zero point folds into sumy.
// A Q4_0 chunk's 16 values (Q4_0::index order) from the block's scale d and its 8 quant bytes as two words: byte
// 2j (low word first) holds values 2j (low nibble) and 2j + 16, byte 2j + 1 values 2j + 1 and 2j + 17.
static inline void q4_0_chunk_values(float d, uint q0, uint q1, thread float * out) {
    #pragma unroll
    for (uint j = 0; j < 4; j++) {
        uint q = (j < 2 ? q0 : q1) >> (16 * (j % 2));
        out[4 * j + 0] = ((float) (q & 0xF) - 8.0f) * d;
        out[4 * j + 1] = ((float) ((q >> 8) & 0xF) - 8.0f) * d;
        out[4 * j + 2] = ((float) ((q >> 4) & 0xF) - 8.0f) * d;
        out[4 * j + 3] = ((float) ((q >> 12) & 0xF) - 8.0f) * d;
    }
}

struct Q4_0 {
    static uint index(uint c, uint i) {
        uint k = (c % 2) * 8 + 2 * (i / 4);
        uint t = i % 4;
        return (c / 2) * 32 + k + (t == 1 ? 1 : t == 2 ? 16 : t == 3 ? 17 : 0);
    }
    // values base + 2j, base + 2j + 1 (a, b) and base + 2j + 16, base + 2j + 17 (e, f)
    static void load_pair(uint j, float a, float b, float e, float f, thread float * yl, thread float & sumy) {
        sumy += a + b + e + f;
        yl[4 * j + 0] = a;
        yl[4 * j + 1] = b * (1.0f / 256.0f);
        yl[4 * j + 2] = e * (1.0f / 16.0f);
        yl[4 * j + 3] = f * (1.0f / 4096.0f);
    }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) {
        uint base = (c / 2) * 32 + (c % 2) * 8;
        float4 lo0 = x.get4(base), lo1 = x.get4(base + 4), hi0 = x.get4(base + 16), hi1 = x.get4(base + 20);
        load_pair(0, lo0.x, lo0.y, hi0.x, hi0.y, yl, sumy);
        load_pair(1, lo0.z, lo0.w, hi0.z, hi0.w, yl, sumy);
        load_pair(2, lo1.x, lo1.y, hi1.x, hi1.y, yl, sumy);
        load_pair(3, lo1.z, lo1.w, hi1.z, hi1.w, yl, sumy);
    }
    template <typename X> static void gather(X x, uint c, thread float * v) {
        uint base = (c / 2) * 32 + (c % 2) * 8;
        float4 lo0 = x.get4(base), lo1 = x.get4(base + 4), hi0 = x.get4(base + 16), hi1 = x.get4(base + 20);
        v[0] = lo0.x; v[1] = lo0.y; v[2] = hi0.x; v[3] = hi0.y;
        v[4] = lo0.z; v[5] = lo0.w; v[6] = hi0.z; v[7] = hi0.w;
        v[8] = lo1.x; v[9] = lo1.y; v[10] = hi1.x; v[11] = hi1.y;
        v[12] = lo1.z; v[13] = lo1.w; v[14] = hi1.z; v[15] = hi1.w;
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q4_0_BLOCK_BYTES;
        device const ushort * qs = (device const ushort *) (block + 2) + (c % 2) * 4;
        float acc = 0.0f;
        for (uint j = 0; j < 4; j++) {
            ushort q = qs[j];
            acc += yl[4 * j + 0] * (float) (q & 0x000F) + yl[4 * j + 1] * (float) (q & 0x0F00)
                 + yl[4 * j + 2] * (float) (q & 0x00F0) + yl[4 * j + 3] * (float) (q & 0xF000);
        }
        return load_half(block) * (acc - 8.0f * sumy);
    }
    static void dequant(device const uchar * row, uint c, thread float * out) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q4_0_BLOCK_BYTES;
        device const ushort * qs = (device const ushort *) (block + 2) + (c % 2) * 4;
        q4_0_chunk_values(load_half(block), (uint) qs[0] | (uint) qs[1] << 16, (uint) qs[2] | (uint) qs[3] << 16, out);
    }
};

// Activations of a chunk that covers 16 consecutive values.
template <typename X> static inline void gather_consecutive(X x, uint c, thread float * yl) {
    for (uint i = 0; i < CH / 4; i++) {
        float4 v = x.get4(c * CH + 4 * i);
        yl[4 * i] = v.x;
        yl[4 * i + 1] = v.y;
        yl[4 * i + 2] = v.z;
        yl[4 * i + 3] = v.w;
    }
}

template <typename X> static inline void load_consecutive(X x, uint c, thread float * yl, thread float & sumy) {
    gather_consecutive(x, c, yl);
    for (uint i = 0; i < CH; i++) sumy += yl[i];
}

// 32 values per block of 34 bytes {half d; char qs[32]}: value = qs[i] * d. A chunk is half a block.
struct Q8_0 {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static void dequant(device const uchar * row, uint c, thread float * out) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q8_0_BLOCK_BYTES;
        device const char * qs = (device const char *) (block + 2) + (c % 2) * 16;
        float d = load_half(block);
        for (uint i = 0; i < CH; i++) out[i] = (float) qs[i] * d;
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q8_0_BLOCK_BYTES;
        device const char * qs = (device const char *) (block + 2) + (c % 2) * 16;
        float acc = 0.0f;
        for (uint i = 0; i < CH; i++) acc += (float) qs[i] * yl[i];
        return acc * load_half(block);
    }
};

// 32 values per block of 22 bytes {half d; uchar qh[4]; uchar qs[16]}: value j has its low 4 bits in
// qs[j % 16] (low nibble for j < 16, high for j >= 16) and its 5th bit in bit j of qh; value = (q - 16) * d.
struct Q5_0 {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static void dequant(device const uchar * row, uint c, thread float * out) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q5_0_BLOCK_BYTES;
        uint h = c % 2;
        device const ushort * qh16 = (device const ushort *) (block + 2);
        uint qh = (uint) qh16[h];  // bits 16h .. 16h+15 of the 32-bit qh
        float d = load_half(block);
        for (uint i = 0; i < CH; i++) {
            uint q = ((block[6 + i] >> (4 * h)) & 0xF) | (((qh >> i) & 1) << 4);
            out[i] = ((float) q - 16.0f) * d;
        }
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) {
        device const uchar * block = row + (c / 2) * GLIMMER_Q5_0_BLOCK_BYTES;
        uint h = c % 2;
        device const ushort * qh16 = (device const ushort *) (block + 2);
        uint qh = (uint) qh16[h];
        float acc = 0.0f;
        for (uint i = 0; i < CH; i++) {
            uint q = ((block[6 + i] >> (4 * h)) & 0xF) | (((qh >> i) & 1) << 4);
            acc += (float) q * yl[i];
        }
        return load_half(block) * (acc - 16.0f * sumy);
    }
};

struct F16 {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static void dequant(device const uchar * row, uint c, thread float * out) {
        device const half * w = (device const half *) row + c * CH;
        for (uint i = 0; i < CH; i++) out[i] = (float) w[i];
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) {
        device const half4 * w = (device const half4 *) ((device const half *) row + c * CH);
        float acc = 0.0f;
        for (uint i = 0; i < CH / 4; i++) {
            float4 v = to_float4(w[i]);
            acc += v.x * yl[4 * i] + v.y * yl[4 * i + 1] + v.z * yl[4 * i + 2] + v.w * yl[4 * i + 3];
        }
        return acc;
    }
};

struct F32 {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static void dequant(device const uchar * row, uint c, thread float * out) {
        device const float * w = (device const float *) row + c * CH;
        for (uint i = 0; i < CH; i++) out[i] = w[i];
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) {
        device const float4 * w = (device const float4 *) ((device const float *) row + c * CH);
        float acc = 0.0f;
        for (uint i = 0; i < CH / 4; i++) {
            float4 v = w[i];
            acc += v.x * yl[4 * i] + v.y * yl[4 * i + 1] + v.z * yl[4 * i + 2] + v.w * yl[4 * i + 3];
        }
        return acc;
    }
};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block, packed in 12 bytes.
static inline void scale_min_k4(uint j, device const uchar * q, thread float & sc, thread float & m) {
    if (j < 4) {
        sc = (float) (q[j] & 63);
        m = (float) (q[j + 4] & 63);
    } else {
        sc = (float) ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = (float) ((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// 256 values per block of 144 bytes {half d; half dmin; uchar scales[12]; uchar qs[128]}: 8 sub-blocks of
// 32; sub-block s uses the low (even s) or high (odd s) nibbles of qs[32*(s/2) ..]; value = d*sc*q - dmin*m.
// A chunk is 16 consecutive values of one sub-block.
struct Q4_K {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static float chunk(device const uchar * row, uint c, thread const float * yl, float sumy, thread float * out) {
        device const uchar * block = row + (c / 16) * GLIMMER_Q4_K_BLOCK_BYTES;
        uint v0 = (c % 16) * CH;
        uint s = v0 / 32;
        float sc, m;
        scale_min_k4(s, block + 4, sc, m);
        float d = load_half(block) * sc;
        float dm = load_half(block + 2) * m;
        device const uchar * qs = block + 16 + 32 * (v0 / 64) + v0 % 32;
        uint shift = (s % 2) * 4;
        float acc = 0.0f;
        for (uint i = 0; i < CH; i++) {
            float q = (float) ((qs[i] >> shift) & 0xF);
            if (out) out[i] = d * q - dm; else acc += q * yl[i];
        }
        return d * acc - dm * sumy;
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) { return chunk(row, c, yl, sumy, nullptr); }
    static void dequant(device const uchar * row, uint c, thread float * out) { chunk(row, c, out, 0.0f, out); }
};

// 256 values per block of 176 bytes {half d; half dmin; uchar scales[12]; uchar qh[32]; uchar qs[128]}:
// as Q4_K with a 5th bit: bit s of qh[l] for value l of sub-block s.
struct Q5_K {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static float chunk(device const uchar * row, uint c, thread const float * yl, float sumy, thread float * out) {
        device const uchar * block = row + (c / 16) * GLIMMER_Q5_K_BLOCK_BYTES;
        uint v0 = (c % 16) * CH;
        uint s = v0 / 32;
        float sc, m;
        scale_min_k4(s, block + 4, sc, m);
        float d = load_half(block) * sc;
        float dm = load_half(block + 2) * m;
        device const uchar * qh = block + 16 + v0 % 32;
        device const uchar * qs = block + 48 + 32 * (v0 / 64) + v0 % 32;
        uint shift = (s % 2) * 4;
        float acc = 0.0f;
        for (uint i = 0; i < CH; i++) {
            float q = (float) (((qs[i] >> shift) & 0xF) | (((qh[i] >> s) & 1) << 4));
            if (out) out[i] = d * q - dm; else acc += q * yl[i];
        }
        return d * acc - dm * sumy;
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) { return chunk(row, c, yl, sumy, nullptr); }
    static void dequant(device const uchar * row, uint c, thread float * out) { chunk(row, c, out, 0.0f, out); }
};

// 256 values per block of 210 bytes {uchar ql[128]; uchar qh[64]; char scales[16]; half d}: two halves
// of 128; in half n, quarter t (32 values) takes nibble t/2 of ql[64n + 32(t%2) + l] and bits 2t..2t+1
// of qh[32n + l]; value = d * scales[8n + l/16 + 2t] * (q - 32).
struct Q6_K {
    static uint index(uint c, uint i) { return c * CH + i; }
    template <typename X> static void load(X x, uint c, thread float * yl, thread float & sumy) { load_consecutive(x, c, yl, sumy); }
    template <typename X> static void gather(X x, uint c, thread float * v) { gather_consecutive(x, c, v); }
    static float chunk(device const uchar * row, uint c, thread const float * yl, float sumy, thread float * out) {
        device const uchar * block = row + (c / 16) * GLIMMER_Q6_K_BLOCK_BYTES;
        uint v0 = (c % 16) * CH;
        uint n = v0 / 128;
        uint t = (v0 % 128) / 32;
        uint l0 = v0 % 32;
        device const uchar * ql = block + 64 * n + 32 * (t % 2) + l0;
        device const uchar * qh = block + 128 + 32 * n + l0;
        float d = load_half(block + 208) * (float) ((device const char *) (block + 192))[8 * n + l0 / 16 + 2 * t];
        uint shift = (t / 2) * 4;
        float acc = 0.0f;
        for (uint i = 0; i < CH; i++) {
            float q = (float) (((ql[i] >> shift) & 0xF) | (((qh[i] >> (2 * t)) & 3) << 4));
            if (out) out[i] = d * (q - 32.0f); else acc += q * yl[i];
        }
        return d * (acc - 32.0f * sumy);
    }
    static float dot(device const uchar * row, uint c, thread const float * yl, float sumy) { return chunk(row, c, yl, sumy, nullptr); }
    static void dequant(device const uchar * row, uint c, thread float * out) { chunk(row, c, out, 0.0f, out); }
};

// ---- the SIMD-group mat-vec core ----

// sums[r] = row (first + r) of w times x over the chunks lane, lane + lanes, ... (lanes a multiple of
// SIMD_WIDTH, the SIMD-group's lanes consecutive), for r < NR (rows at or past `rows` give 0); every lane
// gets the SIMD-group's sums. lanes > SIMD_WIDTH splits a row over several SIMD-groups: see mv_combine.
template <typename T, typename X>
static inline void mv_rows_of(device const uchar * w, uint stride, uint first, uint rows, uint cols, X x,
                              uint lane, uint lanes, thread float * sums) {
    float acc[NR];
    for (uint r = 0; r < NR; r++) acc[r] = 0.0f;
    uint chunks = cols / CH;
    for (uint c = lane; c < chunks; c += lanes) {
        float yl[CH];
        float sumy = 0.0f;
        T::load(x, c, yl, sumy);
        for (uint r = 0; r < NR; r++) {
            if (first + r < rows) acc[r] += T::dot(w + (first + r) * stride, c, yl, sumy);
        }
    }
    for (uint r = 0; r < NR; r++) sums[r] = simd_sum(acc[r]);
}

template <typename X>
static inline void mv_rows_part(uint type, device const char * w, uint first, uint rows, uint cols, X x, uint lane,
                                uint lanes, thread float * sums) {
    device const uchar * wb = (device const uchar *) w;
    uint stride = row_bytes(type, cols);
    switch (type) {
        case TYPE_F32: mv_rows_of<F32>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_F16: mv_rows_of<F16>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_Q4_0: mv_rows_of<Q4_0>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_Q5_0: mv_rows_of<Q5_0>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_Q8_0: mv_rows_of<Q8_0>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_Q4_K: mv_rows_of<Q4_K>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        case TYPE_Q5_K: mv_rows_of<Q5_K>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
        default: mv_rows_of<Q6_K>(wb, stride, first, rows, cols, x, lane, lanes, sums); break;
    }
}

// As mv_rows_part for two matrices of one type and row length times the same x (gate and up, or two row
// sets of one matrix): each chunk of x is loaded once for both, and the two matrices' loads are in flight
// together. Rows at or past rows1 (of w1) and rows2 (of w2) give 0.
template <typename T, typename X>
static inline void mv_rows_of2(device const uchar * w1, device const uchar * w2, uint stride, uint first, uint rows1,
                               uint rows2, uint cols, X x, uint lane, uint lanes, thread float * sums1,
                               thread float * sums2) {
    float acc1[NR], acc2[NR];
    for (uint r = 0; r < NR; r++) {
        acc1[r] = 0.0f;
        acc2[r] = 0.0f;
    }
    uint chunks = cols / CH;
    for (uint c = lane; c < chunks; c += lanes) {
        float yl[CH];
        float sumy = 0.0f;
        T::load(x, c, yl, sumy);
        for (uint r = 0; r < NR; r++) {
            if (first + r < rows1) acc1[r] += T::dot(w1 + (first + r) * stride, c, yl, sumy);
            if (first + r < rows2) acc2[r] += T::dot(w2 + (first + r) * stride, c, yl, sumy);
        }
    }
    for (uint r = 0; r < NR; r++) {
        sums1[r] = simd_sum(acc1[r]);
        sums2[r] = simd_sum(acc2[r]);
    }
}

template <typename X>
static inline void mv_rows_part2(uint type, device const char * w1, device const char * w2, uint first, uint rows1,
                                 uint rows2, uint cols, X x, uint lane, uint lanes, thread float * sums1,
                                 thread float * sums2) {
    device const uchar * a = (device const uchar *) w1;
    device const uchar * b = (device const uchar *) w2;
    uint stride = row_bytes(type, cols);
    switch (type) {
        case TYPE_F32: mv_rows_of2<F32>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_F16: mv_rows_of2<F16>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_Q4_0: mv_rows_of2<Q4_0>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_Q5_0: mv_rows_of2<Q5_0>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_Q8_0: mv_rows_of2<Q8_0>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_Q4_K: mv_rows_of2<Q4_K>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        case TYPE_Q5_K: mv_rows_of2<Q5_K>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
        default: mv_rows_of2<Q6_K>(a, b, stride, first, rows1, rows2, cols, x, lane, lanes, sums1, sums2); break;
    }
}

// A whole row set computed by one SIMD-group.
template <typename X>
static inline void mv_rows(uint type, device const char * w, uint first, uint rows, uint cols, X x, ushort tiisg,
                           thread float * sums) {
    mv_rows_part(type, w, first, rows, cols, x, tiisg, SIMD_WIDTH, sums);
}

// The mat-vec threadgroup layout: GLIMMER_MV_SIMDGROUPS SIMD-groups form mv_sets(split) sets of NR rows;
// the `split` SIMD-groups of a set take every split-th chunk of the columns (SIMD-group sgitg computes part
// sgitg / sets of set sgitg % sets). The host picks the split per dispatch: splitting the columns keeps
// enough warps in flight when a matrix has few rows.
static inline uint mv_sets(uint split) { return GLIMMER_MV_SIMDGROUPS / split; }
static inline uint mv_set(ushort sgitg, uint split) { return sgitg % mv_sets(split); }
static inline uint mv_lane(ushort tiisg, ushort sgitg, uint split) { return (sgitg / mv_sets(split)) * SIMD_WIDTH + tiisg; }

// Adds up the `split` partial sums of each row set (mv_rows_part with mv_lane and split * SIMD_WIDTH
// lanes). Lane r < NR of the set's first SIMD-group (sgitg < mv_sets(split)) gets row r's total; every
// thread must call it (barriers, unless split is 1). scratch: MV_SIMDGROUPS * NR floats.
static inline float mv_combine(thread const float * sums, threadgroup float * scratch, ushort tiisg, ushort sgitg,
                               uint split) {
    if (split == 1) {
        float v = sums[0];
        for (uint i = 1; i < NR; i++) v = tiisg == i ? sums[i] : v;
        return v;
    }
    if (tiisg == 0) {
        for (uint r = 0; r < NR; r++) scratch[sgitg * NR + r] = sums[r];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float v = 0.0f;
    if (tiisg < NR) {
        for (uint p = 0; p < split; p++) v += scratch[(p * mv_sets(split) + mv_set(sgitg, split)) * NR + tiisg];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return v;
}

// ---- threadgroup reductions ----

// The sum of `v` over all threads of the threadgroup (every thread gets it). `scratch` holds one float
// per SIMD-group; the trailing barrier lets the caller reuse it at once.
static inline float threadgroup_sum(float v, threadgroup float * scratch, ushort tiisg, ushort sgitg, uint simdgroups) {
    float s = simd_sum(v);
    if (tiisg == 0) scratch[sgitg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = 0.0f;
    for (uint i = 0; i < simdgroups; i++) total += scratch[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return total;
}

// The maximum of `v` over all threads of the threadgroup, as threadgroup_sum.
static inline float threadgroup_max(float v, threadgroup float * scratch, ushort tiisg, ushort sgitg, uint simdgroups) {
    float s = simd_max(v);
    if (tiisg == 0) scratch[sgitg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float m = -INFINITY;
    for (uint i = 0; i < simdgroups; i++) m = max(m, scratch[i]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return m;
}

// 1/sqrt(mean(x^2) + eps) over x[0..n), computed by the whole threadgroup of `threads` threads.
static inline float rms_scale(device const float * x, uint n, float eps, threadgroup float * scratch, ushort tiitg,
                              ushort tiisg, ushort sgitg, uint threads) {
    float s = 0.0f;
    for (uint i = tiitg; i < n; i += threads) s += x[i] * x[i];
    float total = threadgroup_sum(s, scratch, tiisg, sgitg, threads / SIMD_WIDTH);
    return 1.0f / sqrt(total / (float) n + eps);
}

// sums[r] = row (first + r) of w times x * norm_w / rms(x), as mv_rows_part: the weights are read
// together with the input (XScaled) and the 1/rms factor is applied to the finished sums. Every thread
// of the threadgroup of `threads` threads must call it (the norm's reduction has barriers).
static inline void mv_rows_normed(uint type, device const char * w, uint first, uint rows, uint cols,
                                  device const float * x, device const float * norm_w, float eps, uint lane,
                                  uint lanes, threadgroup float * scratch, ushort tiitg, ushort tiisg, ushort sgitg,
                                  uint threads, thread float * sums) {
    XScaled xs = {x, norm_w};
    mv_rows_part(type, w, first, rows, cols, xs, lane, lanes, sums);
    float scale = rms_scale(x, cols, eps, scratch, tiitg, tiisg, sgitg, threads);
    for (uint r = 0; r < NR; r++) sums[r] *= scale;
}
