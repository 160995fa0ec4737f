// The MoE block of a layer in three dispatches: the router writes the selected expert ids and
// weights to a buffer; gate+up reads the ids on the GPU and runs the selected experts and the
// shared expert (weights read in place from the stacked tensors, no copies), with silu(gate)*up in
// the epilogue; down owns each output row across all experts and adds the weighted sum to the
// residual stream. A dense FFN layer is the same with no routed slots and the dense FFN as the
// "shared" one.

struct RouterArgs {
    uint type;        // ggml type id of the router weights (F32 in llama.cpp's files)
    uint cols;        // hidden size
    uint experts;     // routed experts
    uint used;        // experts selected per token
    uint gating;      // llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid
    uint has_bias;    // 1: bias (exp_probs_b) is added for the selection only
    uint normalize;   // 1: the selected weights are divided by their sum
    float scale;      // then multiplied by this (expert_weights_scale)
    float eps;        // of the ffn_norm RMS norm
};

// One threadgroup of GLIMMER_HEAD_SIMDGROUPS SIMD-groups (1024 threads, so that one threadgroup streams the
// router weights fast). Each set of NR experts is computed by `parts` SIMD-groups that split its columns,
// as many as keep all SIMD-groups busy. scratch: HEAD_SIMDGROUPS + 2 * experts + max(experts, HEAD_SIMDGROUPS * NR) floats.
[[max_total_threads_per_threadgroup(GLIMMER_HEAD_SIMDGROUPS * GLIMMER_SIMD_WIDTH)]]
kernel void moe_router(constant RouterArgs & a [[buffer(0)]],
                       device const char * w [[buffer(1)]],
                       device const float * x [[buffer(2)]],
                       device const float * norm_w [[buffer(3)]],
                       device const float * bias [[buffer(4)]],
                       device int * ids [[buffer(5)]],
                       device float * weights [[buffer(6)]],
                       threadgroup float * scratch TG_MEM(0),
                       ushort tiitg [[thread_index_in_threadgroup]],
                       ushort tiisg [[thread_index_in_simdgroup]],
                       ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const uint threads = GLIMMER_HEAD_SIMDGROUPS * SIMD_WIDTH;
    threadgroup float * prob = scratch + GLIMMER_HEAD_SIMDGROUPS;
    threadgroup float * choice = prob + a.experts;
    threadgroup float * partial = choice + a.experts;  // [part][expert]
    float scale = rms_scale(x, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, threads);
    XNormed xn = {x, norm_w, scale};
    uint sets = (a.experts + NR - 1) / NR;
    uint parts = max(1u, GLIMMER_HEAD_SIMDGROUPS / sets);
    uint part = sgitg % parts;
    for (uint set = sgitg / parts; set < sets; set += GLIMMER_HEAD_SIMDGROUPS / parts) {
        uint first = set * NR;
        float sums[NR];
        mv_rows_part(a.type, w, first, a.experts, a.cols, xn, part * SIMD_WIDTH + tiisg, parts * SIMD_WIDTH, sums);
        if (tiisg == 0) {
            for (uint r = 0; r < NR && first + r < a.experts; r++) partial[part * a.experts + first + r] = sums[r];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tiitg != 0) {
        return;
    }
    for (uint e = 0; e < a.experts; e++) {
        float logit = 0.0f;
        for (uint p = 0; p < parts; p++) logit += partial[p * a.experts + e];
        prob[e] = logit;
    }
    // a few dozen values: one thread is enough and keeps the selection order exact
    if (a.gating == 1) {
        float m = -INFINITY;
        for (uint e = 0; e < a.experts; e++) m = max(m, prob[e]);
        float sum = 0.0f;
        for (uint e = 0; e < a.experts; e++) { prob[e] = exp(prob[e] - m); sum += prob[e]; }
        for (uint e = 0; e < a.experts; e++) prob[e] /= sum;
    } else {
        for (uint e = 0; e < a.experts; e++) prob[e] = 1.0f / (1.0f + exp(-prob[e]));
    }
    for (uint e = 0; e < a.experts; e++) choice[e] = prob[e] + (a.has_bias != 0 ? bias[e] : 0.0f);
    float total = 0.0f;
    for (uint k = 0; k < a.used; k++) {
        uint best = 0;
        for (uint e = 1; e < a.experts; e++) best = choice[e] > choice[best] ? e : best;  // first maximum wins
        choice[best] = -INFINITY;
        ids[k] = (int) best;
        weights[k] = prob[best];
        total += prob[best];
    }
    float divisor = a.normalize != 0 ? max(total, 6.103515625e-5f) : 1.0f;
    for (uint k = 0; k < a.used; k++) weights[k] = weights[k] / divisor * a.scale;
}

struct GateUpArgs {
    uint cols;              // hidden size
    uint routed;            // routed expert slots (experts used; 0 for a dense layer)
    uint rows;              // rows of one routed expert's gate and up (expert FFN width)
    uint gate_type;         // ggml type ids of the stacked routed tensors
    uint up_type;
    uint shared_rows;       // rows of the shared expert (or the dense FFN); 0 for none
    uint shared_gate_type;
    uint shared_up_type;
    uint act_stride;        // floats between slots of act
    float eps;              // of the ffn_norm RMS norm
};

// Grid: (ceil(max(rows, shared_rows) / rows per threadgroup), routed + 1); slot y < routed is the
// y-th selected expert, slot `routed` the shared expert. act[slot][row] = silu(gate) * up.
kernel void moe_gate_up(constant GateUpArgs & a [[buffer(0)]],
                        device const float * x [[buffer(1)]],
                        device const float * norm_w [[buffer(2)]],
                        device const char * gate_exps [[buffer(3)]],
                        device const char * up_exps [[buffer(4)]],
                        device const char * gate_shared [[buffer(5)]],
                        device const char * up_shared [[buffer(6)]],
                        device const int * ids [[buffer(7)]],
                        device float * act [[buffer(8)]],
                        threadgroup float * scratch TG_MEM(0),
                        uint3 tgpig [[threadgroup_position_in_grid]],
                        ushort tiitg [[thread_index_in_threadgroup]],
                        ushort tiisg [[thread_index_in_simdgroup]],
                        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    float scale = rms_scale(x, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH);
    XNormed xn = {x, norm_w, scale};
    uint slot = tgpig.y;
    bool shared = slot == a.routed;
    uint rows = shared ? a.shared_rows : a.rows;
    if (tgpig.x * MV_SETS * NR >= rows) {
        return;  // the whole threadgroup is past the slot's rows
    }
    uint first = (tgpig.x * MV_SETS + mv_set(sgitg)) * NR;
    uint lane = mv_lane(tiisg, sgitg);
    uint gate_type = shared ? a.shared_gate_type : a.gate_type;
    uint up_type = shared ? a.shared_up_type : a.up_type;
    device const char * gate = gate_shared;
    device const char * up = up_shared;
    if (!shared) {
        uint expert = (uint) ids[slot];
        gate = gate_exps + expert * a.rows * row_bytes(gate_type, a.cols);
        up = up_exps + expert * a.rows * row_bytes(up_type, a.cols);
    }
    float g[NR], u[NR];
    mv_rows_part(gate_type, gate, first, rows, a.cols, xn, lane, MV_SPLIT * SIMD_WIDTH, g);
    mv_rows_part(up_type, up, first, rows, a.cols, xn, lane, MV_SPLIT * SIMD_WIDTH, u);
    float gv = mv_combine(g, scratch, tiisg, sgitg);
    float uv = mv_combine(u, scratch, tiisg, sgitg);
    if (sgitg < MV_SETS && tiisg < NR && first + tiisg < rows) {
        act[slot * a.act_stride + first + tiisg] = gv / (1.0f + exp(-gv)) * uv;
    }
}

struct DownArgs {
    uint cols;          // expert FFN width (length of each act slot)
    uint rows;          // hidden size
    uint routed;        // routed expert slots
    uint type;          // ggml type id of the stacked routed down tensor
    uint shared_cols;   // width of the shared expert (or the dense FFN); 0 for none
    uint shared_type;
    uint act_stride;
};

// Grid: ceil(rows / rows per threadgroup); scratch: MV_SIMDGROUPS * NR floats. x[row] += sum over slots of weight * (down_slot . act_slot),
// the shared slot with weight 1.
kernel void moe_down(constant DownArgs & a [[buffer(0)]],
                     device const char * down_exps [[buffer(1)]],
                     device const char * down_shared [[buffer(2)]],
                     device const float * act [[buffer(3)]],
                     device const int * ids [[buffer(4)]],
                     device const float * weights [[buffer(5)]],
                     device float * x [[buffer(6)]],
                     threadgroup float * scratch TG_MEM(0),
                     uint3 tgpig [[threadgroup_position_in_grid]],
                     ushort tiisg [[thread_index_in_simdgroup]],
                     ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint first = (tgpig.x * MV_SETS + mv_set(sgitg)) * NR;
    uint lane = mv_lane(tiisg, sgitg);
    float total[NR];
    for (uint r = 0; r < NR; r++) total[r] = 0.0f;
    uint expert_bytes = a.rows * row_bytes(a.type, a.cols);
    for (uint slot = 0; slot < a.routed; slot++) {
        XDevice xs = {act + slot * a.act_stride};
        float sums[NR];
        mv_rows_part(a.type, down_exps + (uint) ids[slot] * expert_bytes, first, a.rows, a.cols, xs, lane,
                     MV_SPLIT * SIMD_WIDTH, sums);
        for (uint r = 0; r < NR; r++) total[r] += weights[slot] * sums[r];
    }
    if (a.shared_cols != 0) {
        XDevice xs = {act + a.routed * a.act_stride};
        float sums[NR];
        mv_rows_part(a.shared_type, down_shared, first, a.rows, a.shared_cols, xs, lane, MV_SPLIT * SIMD_WIDTH, sums);
        for (uint r = 0; r < NR; r++) total[r] += sums[r];
    }
    float v = mv_combine(total, scratch, tiisg, sgitg);
    if (sgitg < MV_SETS && tiisg < NR && first + tiisg < a.rows) x[first + tiisg] += v;
}
