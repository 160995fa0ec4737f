// Kernels that exercise the emulator itself: collectives, barriers, and the failures it must report.

struct MechanicsArgs {
    uint n;
    float bias;
};

// out[8 * tid + k]: the results of eight collectives for each thread.
kernel void mech_collectives(constant MechanicsArgs & a [[buffer(0)]],
                             device float * out [[buffer(1)]],
                             ushort tiitg [[thread_index_in_threadgroup]],
                             ushort tiisg [[thread_index_in_simdgroup]],
                             uint3 tgpig [[threadgroup_position_in_grid]]) {
    float v = (float) tiitg + a.bias + 100.0f * (float) tgpig.x;
    device float * o = out + 8 * (tgpig.x * a.n + tiitg);
    o[0] = simd_sum(v);
    o[1] = simd_max(v);
    o[2] = simd_min(v);
    o[3] = simd_shuffle_xor(v, 1);
    o[4] = simd_shuffle_down(v, 3);
    o[5] = simd_shuffle_up(v, 2);
    o[6] = simd_broadcast(v, 5);
    o[7] = simd_shuffle(v, 31 - tiisg);
}

// Each thread reads its right neighbour's value, written before a barrier.
kernel void mech_barrier(constant MechanicsArgs & a [[buffer(0)]],
                         device float * out [[buffer(1)]],
                         threadgroup float * shared TG_MEM(0),
                         ushort tiitg [[thread_index_in_threadgroup]]) {
    shared[tiitg] = 2.0f * (float) tiitg;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tiitg] = shared[(tiitg + 1) % a.n];
}

// The same without the barrier: a race that only some schedules hide.
kernel void mech_race(constant MechanicsArgs & a [[buffer(0)]],
                      device float * out [[buffer(1)]],
                      threadgroup float * shared TG_MEM(0),
                      ushort tiitg [[thread_index_in_threadgroup]]) {
    shared[tiitg] = 2.0f * (float) tiitg;
    out[tiitg] = shared[(tiitg + 1) % a.n];
}

// Only the lower half of the SIMD-group reaches the collective.
kernel void mech_partial_collective(device float * out [[buffer(1)]],
                                    ushort tiisg [[thread_index_in_simdgroup]]) {
    if (tiisg < 16) {
        out[tiisg] = simd_sum(1.0f);
    }
}

// Thread 0 leaves before the barrier.
kernel void mech_skipped_barrier(device float * out [[buffer(1)]],
                                 ushort tiitg [[thread_index_in_threadgroup]]) {
    if (tiitg == 0) {
        return;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tiitg] = 1.0f;
}

// Even and odd lanes call different collectives.
kernel void mech_diverged(device float * out [[buffer(1)]],
                          ushort tiisg [[thread_index_in_simdgroup]]) {
    if (tiisg % 2 == 0) {
        out[tiisg] = simd_sum(1.0f);
    } else {
        out[tiisg] = simd_max(1.0f);
    }
}

// One SIMD-group multiplies 8 x 8 half matrices: A[r][c] = (8 r + c) / 4 and B[r][c] = (c - r) / 2, written to
// threadgroup memory by the lanes. out[0 ..): A B + 1 row-major; out[64 ..): the same stored transposed;
// out[128 ..): A B^T + 1, B loaded transposed.
kernel void mech_matrix(device float * out [[buffer(1)]],
                        threadgroup half * shared TG_MEM(0),
                        ushort tiisg [[thread_index_in_simdgroup]]) {
    for (uint i = tiisg; i < 64; i += 32) {
        shared[i] = (half) ((float) i / 4.0f);
        shared[64 + i] = (half) (((float) (i % 8) - (float) (i / 8)) / 2.0f);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_half8x8 a;
    simdgroup_half8x8 b;
    simdgroup_half8x8 bt;
    simdgroup_load(a, shared, 8);
    simdgroup_load(b, shared + 64, 8);
    simdgroup_load(bt, shared + 64, 8, 0, true);
    simdgroup_float8x8 d = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_float8x8 e = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_multiply_accumulate(d, a, b, d);
    simdgroup_multiply_accumulate(e, a, bt, e);
    simdgroup_store(d, out, 8);
    simdgroup_store(d, out + 64, 8, 0, true);
    simdgroup_store(e, out + 128, 8);
}

// Only the lower half of the SIMD-group loads a matrix.
kernel void mech_partial_matrix(device float * out [[buffer(1)]],
                                threadgroup half * shared TG_MEM(0),
                                ushort tiisg [[thread_index_in_simdgroup]]) {
    if (tiisg < 16) {
        simdgroup_half8x8 a;
        simdgroup_load(a, shared, 8);
    }
}
