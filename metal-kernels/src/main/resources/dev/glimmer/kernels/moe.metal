// The MoE block of a layer in three dispatches: the router writes the logits of every expert (many
// threadgroups: a single one streaming the router weights was most of the block's time); gate+up
// picks the experts from the logits on the GPU and runs the selected experts and the shared expert
// (weights read in place from the stacked tensors, no copies), with silu(gate)*up in the epilogue, and
// one of its SIMD-groups writes the selected ids and weights for down; down owns each output row across
// all experts and adds the weighted sum to the residual stream. A dense FFN layer is the same with no
// router, no routed slots and the dense FFN as the "shared" one. The batch decode list runs the same three
// for a few sequences' tokens at once (the last grid dimension: token t's x, logits, act, ids and weights at
// its stride; a token with kv_len 0 is none): each token reads its own experts, and the weights that several
// tokens share are read from the L2 cache after the first.

struct RouterArgs {
    uint type;        // ggml type id of the router weights (F32 in llama.cpp's files)
    uint cols;        // hidden size
    uint experts;     // routed experts (rows of the router)
    float eps;        // of the ffn_norm RMS norm
    uint split;       // SIMD-groups per row set, as MatVecArgs.split
};

// logits[e] = router row e . (x * norm_w / rms(x)), in the mat_vec layout. Grid: (ceil(experts / R), tokens)
// threadgroups, R = mv_sets(split) * NR; scratch: MV_SIMDGROUPS * NR floats.
kernel void moe_router(constant RouterArgs & a [[buffer(0)]],
                       device const char * w [[buffer(1)]],
                       device const float * x [[buffer(2)]],
                       device const float * norm_w [[buffer(3)]],
                       device float * logits [[buffer(4)]],
                       constant StepArgs * steps [[buffer(5)]],
                       threadgroup float * scratch TG_MEM(0),
                       uint3 tgpig [[threadgroup_position_in_grid]],
                       ushort tiitg [[thread_index_in_threadgroup]],
                       ushort tiisg [[thread_index_in_simdgroup]],
                       ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    if (steps[tgpig.y].kv_len == 0) return;
    x += tgpig.y * a.cols;
    logits += tgpig.y * a.experts;
    uint first = (tgpig.x * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    float sums[NR];
    mv_rows_normed(a.type, w, first, a.experts, a.cols, x, norm_w, a.eps, mv_lane(tiisg, sgitg, a.split),
                   a.split * SIMD_WIDTH, scratch, tiitg, tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH, sums);
    float v = mv_combine(sums, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < a.experts) logits[first + tiisg] = v;
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
    uint experts;           // routed experts (length of the logits)
    uint gating;            // llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid
    uint has_bias;          // 1: bias (exp_probs_b) is added for the selection only
    uint normalize;         // 1: the selected weights are divided by their sum
    float scale;            // then multiplied by this (expert_weights_scale)
    uint tokens;            // tokens of a prompt batch: the length of each expert's token list (prompt.metal)
};

// Register budget of the expert selection: lane l holds experts l, l + 32, ... (the host checks
// experts <= 32 * MAX_EXPERTS_PER_LANE).
#define MAX_EXPERTS_PER_LANE 8

// The router's choice from its logits, as llama.cpp makes it: gating (softmax or sigmoid), the bias
// added for the selection only, the top `routed` by repeated first-maximum picks, the picked
// probabilities normalized and scaled. One whole SIMD-group computes it from registers (every
// SIMD-group that needs it does so on its own: no barrier, no threadgroup memory) and gets the id
// picked `slot`-th; with `write`, this lane also stores every pick's id and final weight.
static inline uint select_experts(constant GateUpArgs & a, device const float * logits, device const float * bias,
                                  uint slot, bool write, device int * ids, device float * weights, ushort tiisg) {
    float prob[MAX_EXPERTS_PER_LANE], choice[MAX_EXPERTS_PER_LANE];
    float m = -INFINITY;
    #pragma unroll
    for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
        uint e = tiisg + SIMD_WIDTH * j;
        prob[j] = e < a.experts ? logits[e] : -INFINITY;
        m = max(m, prob[j]);
    }
    if (a.gating == 1) {
        m = simd_max(m);
        float sum = 0.0f;
        #pragma unroll
        for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
            prob[j] = tiisg + SIMD_WIDTH * j < a.experts ? exp(prob[j] - m) : 0.0f;
            sum += prob[j];
        }
        sum = simd_sum(sum);
        #pragma unroll
        for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) prob[j] /= sum;
    } else {
        #pragma unroll
        for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
            prob[j] = tiisg + SIMD_WIDTH * j < a.experts ? 1.0f / (1.0f + exp(-prob[j])) : 0.0f;
        }
    }
    #pragma unroll
    for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
        uint e = tiisg + SIMD_WIDTH * j;
        choice[j] = e < a.experts ? prob[j] + (a.has_bias != 0 ? bias[e] : 0.0f) : -INFINITY;
    }
    uint picked = a.experts;
    float total = 0.0f;
    for (uint k = 0; k < a.routed; k++) {
        float best = -INFINITY;
        uint best_e = a.experts;
        #pragma unroll
        for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
            if (choice[j] > best) {  // the lane's first maximum: its experts rise with j
                best = choice[j];
                best_e = tiisg + SIMD_WIDTH * j;
            }
        }
        float top = simd_max(best);
        uint chosen = simd_min(best == top ? best_e : a.experts);  // the first maximum wins
        float p = 0.0f;
        #pragma unroll
        for (uint j = 0; j < MAX_EXPERTS_PER_LANE; j++) {
            if (tiisg + SIMD_WIDTH * j == chosen) {
                p = prob[j];
                choice[j] = -INFINITY;
            }
        }
        p = simd_sum(p);
        total += p;
        if (k == slot) picked = chosen;
        if (write) {
            ids[k] = (int) chosen;
            weights[k] = p;
        }
    }
    if (write) {
        float divisor = a.normalize != 0 ? max(total, 6.103515625e-5f) : 1.0f;
        for (uint k = 0; k < a.routed; k++) weights[k] = weights[k] / divisor * a.scale;
    }
    return picked;
}

// Grid: (tokens, routed + 1, ceil(max(rows, shared_rows) / rows per threadgroup)); slot y < routed is the
// y-th selected expert, slot `routed` the shared expert. act[slot][row] = silu(gate) * up. SIMD-group 0
// of the shared slot's first threadgroup writes the selection (ids, weights) that down reads. The tokens
// of a batch are the grid's first dimension so that their threadgroups for the same rows of a slot run
// side by side: the shared expert's rows (and an expert two tokens chose) come from memory once, the
// other tokens find them in the cache.
// scratch: MV_SIMDGROUPS * NR floats.
kernel void moe_gate_up(constant GateUpArgs & a [[buffer(0)]],
                        device const float * x [[buffer(1)]],
                        device const float * norm_w [[buffer(2)]],
                        device const char * gate_exps [[buffer(3)]],
                        device const char * up_exps [[buffer(4)]],
                        device const char * gate_shared [[buffer(5)]],
                        device const char * up_shared [[buffer(6)]],
                        device const float * logits [[buffer(7)]],
                        device const float * bias [[buffer(8)]],
                        device float * act [[buffer(9)]],
                        device int * ids [[buffer(10)]],
                        device float * weights [[buffer(11)]],
                        constant StepArgs * steps [[buffer(12)]],
                        threadgroup float * scratch TG_MEM(0),
                        uint3 tgpig [[threadgroup_position_in_grid]],
                        ushort tiitg [[thread_index_in_threadgroup]],
                        ushort tiisg [[thread_index_in_simdgroup]],
                        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint token = tgpig.x;
    uint slot = tgpig.y;
    uint group = tgpig.z;
    if (steps[token].kv_len == 0) return;
    x += token * a.cols;
    logits += token * a.experts;
    act += token * (a.routed + 1) * a.act_stride;
    ids += token * a.routed;
    weights += token * a.routed;
    bool shared = slot == a.routed;
    uint rows = shared ? a.shared_rows : a.rows;
    if (a.routed > 0 && shared && group == 0 && sgitg == 0) {
        select_experts(a, logits, bias, slot, tiisg == 0, ids, weights, tiisg);
    }
    if (group * mv_sets(a.split) * NR >= rows) {
        return;  // the whole threadgroup is past the slot's rows
    }
    uint first = (group * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
    uint gate_type = shared ? a.shared_gate_type : a.gate_type;
    uint up_type = shared ? a.shared_up_type : a.up_type;
    device const char * gate = gate_shared;
    device const char * up = up_shared;
    if (!shared) {
        uint expert = select_experts(a, logits, bias, slot, false, ids, weights, tiisg);
        gate = gate_exps + expert * a.rows * row_bytes(gate_type, a.cols);
        up = up_exps + expert * a.rows * row_bytes(up_type, a.cols);
    }
    XScaled xn = {x, norm_w};
    float g[NR], u[NR];
    if (gate_type == up_type) {
        mv_rows_part2(gate_type, gate, up, first, rows, rows, a.cols, xn, lane, a.split * SIMD_WIDTH, g, u);
    } else {
        mv_rows_part(gate_type, gate, first, rows, a.cols, xn, lane, a.split * SIMD_WIDTH, g);
        mv_rows_part(up_type, up, first, rows, a.cols, xn, lane, a.split * SIMD_WIDTH, u);
    }
    float scale = rms_scale(x, a.cols, a.eps, scratch, tiitg, tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH);
    for (uint r = 0; r < NR; r++) {
        g[r] *= scale;
        u[r] *= scale;
    }
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
    uint experts;       // routed experts and tokens of a prompt batch, for moe_experts_down (prompt.metal)
    uint tokens;
};

// The routed slots of down as one mat-vec: the chunks of every slot's rows are numbered one after another
// (slot k's chunk c is k * chunks + c) and lane l takes l, l + lanes, ..., so a lane's loads for several
// experts go out in one pass instead of one pass (and one SIMD-group reduction) per expert; each chunk's
// dot product is weighted by its slot's routing weight. sums as mv_rows_of.
template <typename T>
static inline void down_routed_of(device const uchar * exps, uint expert_bytes, uint stride, device const int * ids,
                                  device const float * weights, device const float * act, uint act_stride,
                                  uint routed, uint first, uint rows, uint cols, uint lane, uint lanes,
                                  thread float * sums) {
    float acc[NR];
    for (uint r = 0; r < NR; r++) acc[r] = 0.0f;
    uint chunks = cols / CH;
    for (uint k = lane; k < routed * chunks; k += lanes) {
        uint slot = k / chunks;
        uint c = k - slot * chunks;
        XDevice xs = {act + slot * act_stride};
        float yl[CH];
        float sumy = 0.0f;
        T::load(xs, c, yl, sumy);
        device const uchar * w = exps + (uint) ids[slot] * expert_bytes;
        float weight = weights[slot];
        for (uint r = 0; r < NR; r++) {
            if (first + r < rows) acc[r] += weight * T::dot(w + (first + r) * stride, c, yl, sumy);
        }
    }
    for (uint r = 0; r < NR; r++) sums[r] = simd_sum(acc[r]);
}

static inline void down_routed(uint type, device const char * exps, device const int * ids, device const float * weights,
                               device const float * act, uint act_stride, uint routed, uint first, uint rows,
                               uint cols, uint lane, uint lanes, thread float * sums) {
    device const uchar * e = (device const uchar *) exps;
    uint stride = row_bytes(type, cols);
    uint bytes = rows * stride;
    switch (type) {
        case TYPE_F32: down_routed_of<F32>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_F16: down_routed_of<F16>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_Q4_0: down_routed_of<Q4_0>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_Q5_0: down_routed_of<Q5_0>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_Q8_0: down_routed_of<Q8_0>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_Q4_K: down_routed_of<Q4_K>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        case TYPE_Q5_K: down_routed_of<Q5_K>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
        default: down_routed_of<Q6_K>(e, bytes, stride, ids, weights, act, act_stride, routed, first, rows, cols, lane, lanes, sums); break;
    }
}

// Grid: (tokens, ceil(rows / rows per threadgroup)) (tokens first, as moe_gate_up); scratch: MV_SIMDGROUPS * NR
// floats. x[row] += sum over slots of weight * (down_slot . act_slot), the shared slot with weight 1.
kernel void moe_down(constant DownArgs & a [[buffer(0)]],
                     device const char * down_exps [[buffer(1)]],
                     device const char * down_shared [[buffer(2)]],
                     device const float * act [[buffer(3)]],
                     device const int * ids [[buffer(4)]],
                     device const float * weights [[buffer(5)]],
                     device float * x [[buffer(6)]],
                     constant StepArgs * steps [[buffer(7)]],
                     threadgroup float * scratch TG_MEM(0),
                     uint3 tgpig [[threadgroup_position_in_grid]],
                     ushort tiisg [[thread_index_in_simdgroup]],
                     ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    uint token = tgpig.x;
    if (steps[token].kv_len == 0) return;
    x += token * a.rows;
    act += token * (a.routed + 1) * a.act_stride;
    ids += token * a.routed;
    weights += token * a.routed;
    uint first = (tgpig.y * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
    float total[NR];
    down_routed(a.type, down_exps, ids, weights, act, a.act_stride, a.routed, first, a.rows, a.cols, lane,
                a.split * SIMD_WIDTH, total);
    if (a.shared_cols != 0) {
        XDevice xs = {act + a.routed * a.act_stride};
        float sums[NR];
        mv_rows_part(a.shared_type, down_shared, first, a.rows, a.shared_cols, xs, lane, a.split * SIMD_WIDTH, sums);
        for (uint r = 0; r < NR; r++) total[r] += sums[r];
    }
    float v = mv_combine(total, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < a.rows) x[first + tiisg] += v;
}
