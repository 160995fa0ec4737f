package dev.glimmer.engine.backend.cpu;

/**
 * One thread's accumulator lanes for the Vector API kernels ({@link Kernels}, {@link KQuantKernels}): a kernel
 * loads its accumulators from here at the start of each loop iteration and stores them back at its end, so that
 * no vector is carried from one iteration to the next.
 *
 * <p>Why: a vector carried in a local across iterations (a loop phi) is kept in a register only while C2 knows its
 * exact class, which it learns from type speculation; C2 gives that up for a method after enough uncommon traps
 * (and never has it with {@code -XX:-UseTypeSpeculation}), and from then on every iteration boxes the vector, or
 * runs the operation as the library's Java fallback: megabytes a decode step. A vector loaded from an array and
 * stored back in the same iteration has its species' class from the load, whatever C2 speculates. The stores and
 * loads keep each lane's operations in the same order, so the results are the same bits.
 */
final class Accumulators {
    /** Double lanes: up to four 512-bit accumulators (the two-token Q4_0 kernel's). */
    final double[] doubles = new double[32];
    /** Float lanes: two 256-bit accumulators (Q5_0, Q5_K, Q6_K). */
    final float[] floats = new float[16];
    /** Int lanes: one 512-bit or two 256-bit accumulators (the K-quant kernels' per super-block sums). */
    final int[] ints = new int[16];
}
