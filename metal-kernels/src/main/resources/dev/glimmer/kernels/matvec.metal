// Mat-vec y = W x for every weight type, weights read in place: a threadgroup of
// GLIMMER_MV_SIMDGROUPS SIMD-groups computes mv_sets(split) sets of NR consecutive rows, `split` SIMD-groups
// per set. Optionally x is RMS-normalized (x * w_norm / rms(x)) and/or a residual is added to the result (y may alias the
// residual: each row is read and written by one lane). Grid: (ceil(rows / rows per threadgroup), matrices)
// threadgroups: grid y runs a stack of matrices of the same shape, each with its own x and y (the per-head k_b
// and v_b of the attention), w_step / x_step / y_step apart.
// (Prompt batches multiply their weights with mat_mat, prompt.metal; the batch decode list with mat_vec_rows.)

struct MatVecArgs {
    uint type;       // ggml type id of W
    uint cols;       // values per row of W (= length of x)
    uint rows;       // rows of W (= length of y)
    uint norm;       // 1: x is RMS-normalized with norm_w first
    uint add;        // 1: y = W x + residual
    float eps;
    uint split;      // SIMD-groups per row set (1, 2, 4 or 8): rows per threadgroup = NR * MV_SIMDGROUPS / split
    uint w_step;     // bytes between the matrices of grid y (0 for one matrix)
    uint x_step;     // floats between their x (a multiple of 4)
    uint y_step;     // floats between their y
};

// scratch: MV_SIMDGROUPS * NR floats.

kernel void mat_vec(constant MatVecArgs & a [[buffer(0)]],
                    device const char * w [[buffer(1)]],
                    device const float * x [[buffer(2)]],
                    device float * y [[buffer(3)]],
                    device const float * norm_w [[buffer(4)]],
                    device const float * residual [[buffer(5)]],
                    threadgroup float * scratch TG_MEM(0),
                    uint3 tgpig [[threadgroup_position_in_grid]],
                    ushort tiitg [[thread_index_in_threadgroup]],
                    ushort tiisg [[thread_index_in_simdgroup]],
                    ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    w += tgpig.y * a.w_step;
    x += tgpig.y * a.x_step;
    y += tgpig.y * a.y_step;
    residual += tgpig.y * a.y_step;
    uint first = (tgpig.x * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
    float sums[NR];
    if (a.norm != 0) {
        mv_rows_normed(a.type, w, first, a.rows, a.cols, x, norm_w, a.eps, lane, a.split * SIMD_WIDTH, scratch, tiitg,
                       tiisg, sgitg, GLIMMER_MV_SIMDGROUPS * SIMD_WIDTH, sums);
    } else {
        XDevice xd = {x};
        mv_rows_part(a.type, w, first, a.rows, a.cols, xd, lane, a.split * SIMD_WIDTH, sums);
    }
    float v = mv_combine(sums, scratch, tiisg, sgitg, a.split);
    if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < a.rows) {
        uint r = first + tiisg;
        if (a.add != 0) v += residual[r];
        y[r] = v;
    }
}

// The batch decode list's dense projections: mat_vec for each token (row) of the batch, the tokens' x and y
// x_row and y_row floats apart. A threadgroup takes its rows of W for `per_group` tokens one after another,
// so that W comes from memory once for them and from the cache for the rest; tokens whose StepArgs have
// kv_len 0 (rows of the list past the step's sequences) are skipped. Grid: (ceil(rows / rows per
// threadgroup), matrices, ceil(tokens / per_group)).
struct MatVecRowsArgs {
    uint type;
    uint cols;
    uint rows;
    uint add;        // 1: y += W x
    uint split;
    uint w_step;     // as MatVecArgs: the matrices of grid y
    uint x_step;
    uint y_step;
    uint tokens;     // rows of the batch
    uint x_row;      // floats between two tokens' x
    uint y_row;      // floats between two tokens' y
    uint per_group;  // tokens a threadgroup takes
};

kernel void mat_vec_rows(constant MatVecRowsArgs & a [[buffer(0)]],
                         device const char * w [[buffer(1)]],
                         device const float * x [[buffer(2)]],
                         device float * y [[buffer(3)]],
                         constant StepArgs * steps [[buffer(4)]],
                         threadgroup float * scratch TG_MEM(0),
                         uint3 tgpig [[threadgroup_position_in_grid]],
                         ushort tiisg [[thread_index_in_simdgroup]],
                         ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    w += tgpig.y * a.w_step;
    uint first = (tgpig.x * mv_sets(a.split) + mv_set(sgitg, a.split)) * NR;
    uint lane = mv_lane(tiisg, sgitg, a.split);
    uint end = min(a.tokens, (tgpig.z + 1) * a.per_group);
    for (uint t = tgpig.z * a.per_group; t < end; t++) {
        if (steps[t].kv_len == 0) continue;  // the same for the whole threadgroup: the barriers stay uniform
        XDevice xt = {x + t * a.x_row + tgpig.y * a.x_step};
        float sums[NR];
        mv_rows_part(a.type, w, first, a.rows, a.cols, xt, lane, a.split * SIMD_WIDTH, sums);
        float v = mv_combine(sums, scratch, tiisg, sgitg, a.split);
        if (sgitg < mv_sets(a.split) && tiisg < NR && first + tiisg < a.rows) {
            device float * yt = y + t * a.y_row + tgpig.y * a.y_step;
            yt[first + tiisg] = a.add != 0 ? yt[first + tiisg] + v : v;
        }
    }
}
