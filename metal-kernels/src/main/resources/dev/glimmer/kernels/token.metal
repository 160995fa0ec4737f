// The ends of a step: the tokens' embedding rows, the last token's row of a batch, and the greedy choice
// from the logits.

struct EmbedArgs {
    uint type;    // ggml type id of token_embd
    uint cols;    // hidden size
};

// x + t * cols = token_embd[steps[t].token], dequantized. Grid: (tokens, 1) threadgroups of
// GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void embed_row(constant EmbedArgs & a [[buffer(0)]],
                      constant StepArgs * steps [[buffer(1)]],
                      device const char * table [[buffer(2)]],
                      device float * x [[buffer(3)]],
                      uint3 tgpig [[threadgroup_position_in_grid]],
                      ushort tiitg [[thread_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    constant StepArgs & step = steps[tgpig.x];
    if (step.kv_len == 0) return;
    x += tgpig.x * a.cols;
    device const uchar * row = (device const uchar *) table + step.token * row_bytes(a.type, a.cols);
    float v[CH];
    for (uint c = tiitg; c < a.cols / CH; c += threads) {
        switch (a.type) {
            case TYPE_F32: F32::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[F32::index(c, i)] = v[i]; break;
            case TYPE_F16: F16::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[F16::index(c, i)] = v[i]; break;
            case TYPE_Q4_0: Q4_0::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q4_0::index(c, i)] = v[i]; break;
            case TYPE_Q5_0: Q5_0::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q5_0::index(c, i)] = v[i]; break;
            case TYPE_Q8_0: Q8_0::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q8_0::index(c, i)] = v[i]; break;
            case TYPE_Q4_K: Q4_K::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q4_K::index(c, i)] = v[i]; break;
            case TYPE_Q5_K: Q5_K::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q5_K::index(c, i)] = v[i]; break;
            default: Q6_K::dequant(row, c, v); for (uint i = 0; i < CH; i++) x[Q6_K::index(c, i)] = v[i]; break;
        }
    }
}

struct LastRowArgs {
    uint tokens;  // rows of x (the command list's batch)
    uint cols;    // values per row
};

// y = the row of x of the batch's last token (the last with kv_len != 0): the one whose logits a prompt
// batch returns. One threadgroup of GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void last_row(constant LastRowArgs & a [[buffer(0)]],
                     constant StepArgs * steps [[buffer(1)]],
                     device const float * x [[buffer(2)]],
                     device float * y [[buffer(3)]],
                     ushort tiitg [[thread_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    uint last = 0;
    for (uint t = 1; t < a.tokens; t++) {
        if (steps[t].kv_len != 0) last = t;
    }
    for (uint i = tiitg; i < a.cols; i += threads) y[i] = x[last * a.cols + i];
}

struct ArgmaxArgs {
    uint n;
};

// result[0] = the index of the largest of values[0..n), the first one on ties. One threadgroup of
// GLIMMER_WIDE_SIMDGROUPS SIMD-groups; scratch: 2 * GLIMMER_WIDE_SIMDGROUPS floats.
kernel void argmax(constant ArgmaxArgs & a [[buffer(0)]],
                   device const float * values [[buffer(1)]],
                   device uint * result [[buffer(2)]],
                   threadgroup float * scratch TG_MEM(0),
                   ushort tiitg [[thread_index_in_threadgroup]],
                   ushort tiisg [[thread_index_in_simdgroup]],
                   ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    float best = -INFINITY;
    uint index = 0xFFFFFFFFu;
    for (uint i = tiitg; i < a.n; i += threads) {
        if (values[i] > best) {  // strided scan: a later i only wins when strictly larger
            best = values[i];
            index = i;
        }
    }
    float simd_best = simd_max(best);
    uint simd_index = simd_min(best == simd_best ? index : 0xFFFFFFFFu);
    threadgroup uint * indices = (threadgroup uint *) (scratch + GLIMMER_WIDE_SIMDGROUPS);
    if (tiisg == 0) {
        scratch[sgitg] = simd_best;
        indices[sgitg] = simd_index;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tiitg == 0) {
        float b = scratch[0];
        uint k = indices[0];
        for (uint s = 1; s < GLIMMER_WIDE_SIMDGROUPS; s++) {
            if (scratch[s] > b || (scratch[s] == b && indices[s] < k)) {
                b = scratch[s];
                k = indices[s];
            }
        }
        result[0] = k;
    }
}
