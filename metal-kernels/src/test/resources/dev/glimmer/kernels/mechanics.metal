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
