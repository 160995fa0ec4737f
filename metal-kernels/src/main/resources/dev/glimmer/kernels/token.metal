// The ends of a step: the tokens' embedding rows, the last token's row of a batch, and the greedy choice
// from the logits.

struct EmbedArgs {
    uint type;    // ggml type id of token_embd
    uint cols;    // hidden size
};

// x + t * cols = token_embd[steps[t].token], dequantized; a token of PREVIOUS_GREEDY (a chained step) is the
// sequence's latest greedy token, greedy[steps[t].slot], which the argmax of its previous run wrote: the host queues
// the step without waiting for that token. Grid: (tokens, 1) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void embed_row(constant EmbedArgs & a [[buffer(0)]],
                      constant StepArgs * steps [[buffer(1)]],
                      device const char * table [[buffer(2)]],
                      device float * x [[buffer(3)]],
                      device const uint * greedy [[buffer(4)]],
                      uint3 tgpig [[threadgroup_position_in_grid]],
                      ushort tiitg [[thread_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    constant StepArgs & step = steps[tgpig.x];
    if (step.kv_len == 0) return;
    x += tgpig.x * a.cols;
    uint token = step.token == PREVIOUS_GREEDY ? greedy[step.slot] : step.token;
    device const uchar * row = (device const uchar *) table + token * row_bytes(a.type, a.cols);
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
    uint n;          // values
    uint parts;      // threadgroups of argmax_parts: (value, index) pairs argmax reads
};

// The first index of the largest value a threadgroup of `threads` threads saw, over the whole threadgroup:
// each thread's (best, index) in, the winner out to every thread. scratch: 2 * (threads / SIMD_WIDTH) floats.
static inline uint threadgroup_argmax(float best, uint index, threadgroup float * scratch, ushort tiitg, ushort tiisg,
                                      ushort sgitg, uint simdgroups, thread float & winner) {
    float simd_best = simd_max(best);
    uint simd_index = simd_min(best == simd_best ? index : 0xFFFFFFFFu);
    threadgroup uint * indices = (threadgroup uint *) (scratch + simdgroups);
    if (tiisg == 0) {
        scratch[sgitg] = simd_best;
        indices[sgitg] = simd_index;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float b = scratch[0];
    uint k = indices[0];
    for (uint s = 1; s < simdgroups; s++) {
        if (scratch[s] > b || (scratch[s] == b && indices[s] < k)) {
            b = scratch[s];
            k = indices[s];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    winner = b;
    return k;
}

// Stage 1 of the argmax over values[0..n) of each row (grid y; the decode step has one, a batch a row per
// token, at n values, parts pairs and one result apart): threadgroup g takes the g-th of `parts` equal slices and writes its
// largest value and that value's first index to best[g] and index[g] (NaN never wins: -INFINITY start, strict >).
// One threadgroup over the whole vocabulary took 2% of a decode step. Grid: parts threadgroups of
// GLIMMER_WIDE_SIMDGROUPS SIMD-groups per row; scratch: 2 * GLIMMER_WIDE_SIMDGROUPS floats.
kernel void argmax_parts(constant ArgmaxArgs & a [[buffer(0)]],
                         device const float * values [[buffer(1)]],
                         device float * best [[buffer(2)]],
                         device uint * index [[buffer(3)]],
                         threadgroup float * scratch TG_MEM(0),
                         uint3 tgpig [[threadgroup_position_in_grid]],
                         ushort tiitg [[thread_index_in_threadgroup]],
                         ushort tiisg [[thread_index_in_simdgroup]],
                         ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    values += tgpig.y * a.n;
    best += tgpig.y * a.parts;
    index += tgpig.y * a.parts;
    uint slice = (a.n + a.parts - 1) / a.parts;
    uint end = min(a.n, (tgpig.x + 1) * slice);
    float b = -INFINITY;
    uint k = 0xFFFFFFFFu;
    for (uint i = tgpig.x * slice + tiitg; i < end; i += threads) {
        if (values[i] > b) {  // strided scan: a later i only wins when strictly larger
            b = values[i];
            k = i;
        }
    }
    float winner;
    uint w = threadgroup_argmax(b, k, scratch, tiitg, tiisg, sgitg, GLIMMER_WIDE_SIMDGROUPS, winner);
    if (tiitg == 0) {
        best[tgpig.x] = winner;
        index[tgpig.x] = w;
    }
}

// Stage 2: result[row] = the index of the largest of the row's values[0..n), the first one on ties, from
// argmax_parts' pairs (slices in order, so the first slice's index wins a tie); also kept as its sequence's latest
// greedy token, greedy[steps[row].slot], for a chained next step (embed_row). Output row r is token r's (a
// batch), or the run's one output (row 0: every token of a prompt run is of one sequence). Grid: (1, rows)
// threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups; scratch: 2 * GLIMMER_WIDE_SIMDGROUPS floats.
kernel void argmax(constant ArgmaxArgs & a [[buffer(0)]],
                   device const float * best [[buffer(1)]],
                   device const uint * index [[buffer(2)]],
                   device uint * result [[buffer(3)]],
                   constant StepArgs * steps [[buffer(4)]],
                   device uint * greedy [[buffer(5)]],
                   threadgroup float * scratch TG_MEM(0),
                   uint3 tgpig [[threadgroup_position_in_grid]],
                   ushort tiitg [[thread_index_in_threadgroup]],
                   ushort tiisg [[thread_index_in_simdgroup]],
                   ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    best += tgpig.y * a.parts;
    index += tgpig.y * a.parts;
    float b = -INFINITY;
    uint k = 0xFFFFFFFFu;
    for (uint i = tiitg; i < a.parts; i += threads) {
        if (best[i] > b) {
            b = best[i];
            k = index[i];
        }
    }
    float winner;
    uint w = threadgroup_argmax(b, k, scratch, tiitg, tiisg, sgitg, GLIMMER_WIDE_SIMDGROUPS, winner);
    if (tiitg == 0) {
        result[tgpig.y] = w;
        if (steps[tgpig.y].kv_len != 0) greedy[steps[tgpig.y].slot] = w;
    }
}

// ---- the NextN (MTP) block's input and the trunk outputs it keeps (docs/MODEL.md §4b) ----
//
// The block's row at position p reads the token at p and the trunk's output at p - 1 (the final hidden state
// normed by output_norm, the row the output head reads). Within a run the output at p - 1 is the row before
// when that row is the same sequence's position before; the first row of a sequence in a run reads the output
// its sequence kept from the run before: each sequence keeps its last `ring` outputs in the pooled buffer
// kept[slot][pos % ring] (ring = the drafts a step verifies at most + 1, so that after a speculative step
// whose drafts were rejected the output before the next position is still there).

struct NextnInputArgs {
    uint cols;    // hidden size E
    float eps;    // of the RMS norms
    uint ring;    // trunk outputs each sequence keeps
    uint tokens;  // rows of the run (the command list's batch)
};

// y[t] = concat(emb[t] * enorm / rms(emb[t]), h * hnorm / rms(h)) (2E values), h the trunk output at the
// position before row t's: trunk[t - 1] when row t - 1 is that position of the same sequence, else
// kept[slot][(pos - 1) % ring], zeros at position 0. Grid: (tokens) threadgroups of GLIMMER_WIDE_SIMDGROUPS
// SIMD-groups; scratch: GLIMMER_WIDE_SIMDGROUPS floats.
kernel void nextn_input(constant NextnInputArgs & a [[buffer(0)]],
                        constant StepArgs * steps [[buffer(1)]],
                        device const float * emb [[buffer(2)]],
                        device const float * trunk [[buffer(3)]],
                        device const float * kept [[buffer(4)]],
                        device const float * enorm [[buffer(5)]],
                        device const float * hnorm [[buffer(6)]],
                        device float * y [[buffer(7)]],
                        threadgroup float * scratch TG_MEM(0),
                        uint3 tgpig [[threadgroup_position_in_grid]],
                        ushort tiitg [[thread_index_in_threadgroup]],
                        ushort tiisg [[thread_index_in_simdgroup]],
                        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    uint t = tgpig.x;
    constant StepArgs & step = steps[t];
    if (step.kv_len == 0) return;
    emb += t * a.cols;
    y += t * 2 * a.cols;
    float scale = rms_scale(emb, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, threads);
    for (uint i = tiitg; i < a.cols; i += threads) y[i] = emb[i] * scale * enorm[i];
    if (step.pos == 0) {
        for (uint i = tiitg; i < a.cols; i += threads) y[a.cols + i] = 0.0f;
        return;
    }
    bool inRun = t > 0 && steps[t - 1].kv_len != 0 && steps[t - 1].slot == step.slot && steps[t - 1].pos + 1 == step.pos;
    device const float * h = inRun ? trunk + (t - 1) * a.cols
                                   : kept + (step.slot * a.ring + (step.pos - 1) % a.ring) * a.cols;
    float hscale = rms_scale(h, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, threads);
    for (uint i = tiitg; i < a.cols; i += threads) y[a.cols + i] = h[i] * hscale * hnorm[i];
}

// kept[slot][pos % ring] = trunk[t] for the rows among the last `ring` positions of their sequence in this run (a
// sequence's rows in a run are consecutive, at consecutive positions: row t + ring, when it is the same sequence's,
// would take the same place). Grid: (tokens) threadgroups of GLIMMER_WIDE_SIMDGROUPS SIMD-groups.
kernel void keep_outputs(constant NextnInputArgs & a [[buffer(0)]],
                         constant StepArgs * steps [[buffer(1)]],
                         device const float * trunk [[buffer(2)]],
                         device float * kept [[buffer(3)]],
                         uint3 tgpig [[threadgroup_position_in_grid]],
                         ushort tiitg [[thread_index_in_threadgroup]]) {
    const uint threads = GLIMMER_WIDE_SIMDGROUPS * SIMD_WIDTH;
    uint t = tgpig.x;
    constant StepArgs & step = steps[t];
    if (step.kv_len == 0) return;
    uint later = t + a.ring;
    if (later < a.tokens && steps[later].kv_len != 0 && steps[later].slot == step.slot) return;
    device float * to = kept + (step.slot * a.ring + step.pos % a.ring) * a.cols;
    trunk += t * a.cols;
    for (uint i = tiitg; i < a.cols; i += threads) to[i] = trunk[i];
}
