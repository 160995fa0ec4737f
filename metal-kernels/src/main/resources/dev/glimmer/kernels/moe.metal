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
// as many as keep all SIMD-groups busy; SIMD-group 0 then applies the gating and picks the top experts.
// scratch: align4(HEAD_SIMDGROUPS + 2 * experts + max(experts, HEAD_SIMDGROUPS * NR)) + cols floats.
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
    threadgroup float * xs = scratch + align4(GLIMMER_HEAD_SIMDGROUPS + 2 * a.experts + max(a.experts, (uint) (GLIMMER_HEAD_SIMDGROUPS * NR)));
    stage_normed(x, norm_w, a.cols, a.eps, xs, scratch, tiitg, tiisg, sgitg, threads);
    XThreadgroup xn = {xs};
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
    if (sgitg != 0) {
        return;
    }
    // SIMD-group 0 finishes: lane l owns experts l, l + 32, ... (only the owner touches prob[e] and
    // choice[e]); the top-k picks are SIMD-group reductions, and lane 0 writes them.
    float m = -INFINITY;
    for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) {
        float logit = 0.0f;
        for (uint p = 0; p < parts; p++) logit += partial[p * a.experts + e];
        prob[e] = logit;
        m = max(m, logit);
    }
    if (a.gating == 1) {
        m = simd_max(m);
        float sum = 0.0f;
        for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) { prob[e] = exp(prob[e] - m); sum += prob[e]; }
        sum = simd_sum(sum);
        for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) prob[e] /= sum;
    } else {
        for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) prob[e] = 1.0f / (1.0f + exp(-prob[e]));
    }
    for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) choice[e] = prob[e] + (a.has_bias != 0 ? bias[e] : 0.0f);
    float total = 0.0f;
    for (uint k = 0; k < a.used; k++) {
        float best = -INFINITY;
        float best_e = (float) a.experts;
        for (uint e = tiisg; e < a.experts; e += SIMD_WIDTH) {
            if (choice[e] > best) { best = choice[e]; best_e = (float) e; }  // the lane's first maximum
        }
        float top = simd_max(best);
        uint chosen = (uint) simd_min(best == top ? best_e : (float) a.experts);  // first maximum wins
        bool owner = chosen % SIMD_WIDTH == tiisg;
        float p = simd_sum(owner ? prob[chosen] : 0.0f);
        if (owner) choice[chosen] = -INFINITY;
        if (tiisg == 0) {
            ids[k] = (int) chosen;
            weights[k] = p;
            total += p;
        }
    }
    if (tiisg == 0) {
        float divisor = a.normalize != 0 ? max(total, 6.103515625e-5f) : 1.0f;
        for (uint k = 0; k < a.used; k++) weights[k] = weights[k] / divisor * a.scale;
    }
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
    uint split;             // SIMD-groups per row set, as MatVecArgs.split
};

// Grid: (ceil(max(rows, shared_rows) / rows per threadgroup), routed + 1); slot y < routed is the
// y-th selected expert, slot `routed` the shared expert. act[slot][row] = silu(gate) * up.
// scratch: MV_SIMDGROUPS * NR + cols floats.
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
    uint slot = tgpig.y;
    bool shared = slot == a.routed;
    uint rows = shared ? a.shared_rows : a.rows;
    if (tgpig.x * mv_sets(a.split) * NR >= rows) {
        return;  // the whole threadgroup is past the slot's rows
    }
    threadgroup float * xs = scratch + GLIMMER_MV_SIMDGROUPS * NR;
    stage_normed(x, norm_w, a.cols, a.eps, xs, scratch, tiitg, tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH);
    XThreadgroup xn = {xs};
    uint first = (tgpig.x * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
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
    mv_rows_part(gate_type, gate, first, rows, a.cols, xn, lane, a.split * SIMD_WIDTH, g);
    mv_rows_part(up_type, up, first, rows, a.cols, xn, lane, a.split * SIMD_WIDTH, u);
    float gv = mv_combine(g, scratch, tiisg, sgitg, a.split);
    float uv = mv_combine(u, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < rows) {
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
    uint split;         // SIMD-groups per row set, as MatVecArgs.split
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
    uint first = (tgpig.x * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
    float total[NR];
    for (uint r = 0; r < NR; r++) total[r] = 0.0f;
    uint expert_bytes = a.rows * row_bytes(a.type, a.cols);
    for (uint slot = 0; slot < a.routed; slot++) {
        XDevice xs = {act + slot * a.act_stride};
        float sums[NR];
        mv_rows_part(a.type, down_exps + (uint) ids[slot] * expert_bytes, first, a.rows, a.cols, xs, lane,
                     a.split * SIMD_WIDTH, sums);
        for (uint r = 0; r < NR; r++) total[r] += weights[slot] * sums[r];
    }
    if (a.shared_cols != 0) {
        XDevice xs = {act + a.routed * a.act_stride};
        float sums[NR];
        mv_rows_part(a.shared_type, down_shared, first, a.rows, a.shared_cols, xs, lane, a.split * SIMD_WIDTH, sums);
        for (uint r = 0; r < NR; r++) total[r] += sums[r];
    }
    float v = mv_combine(total, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < a.rows) x[first + tiisg] += v;
}
