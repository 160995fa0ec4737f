// Mat-vec y = W x for every weight type, weights read in place: a threadgroup of
// GLIMMER_MV_SIMDGROUPS SIMD-groups computes mv_sets(split) sets of NR consecutive rows, `split` SIMD-groups
// per set. Optionally x is RMS-normalized (x * w_norm / rms(x)) and/or a residual is added to the result (y may alias the
// residual: each row is read and written by one lane). Grid: (ceil(rows / rows per threadgroup), matrices)
// threadgroups: grid y runs a stack of matrices of the same shape, each with its own x and y (the per-head k_b
// and v_b of the attention), w_step / x_step / y_step apart.
// (Prompt batches multiply their weights with mat_mat, prompt.metal.)

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
