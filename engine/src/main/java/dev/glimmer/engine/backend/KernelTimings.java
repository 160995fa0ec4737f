package dev.glimmer.engine.backend;

import java.util.List;

/**
 * A GPU decoder that can time one decode step or one prompt batch kernel by kernel (for
 * {@code ./glimmer bench}: where the time goes).
 */
public interface KernelTimings {

    /**
     * GPU time of one kind of dispatch summed over a step: a kernel and the weight it reads
     * ({@code mat_vec attn_output.weight}), how many dispatches, and the weight bytes they read (so
     * that the time can be held against the memory bandwidth).
     */
    record KernelTime(String kernel, int dispatches, double millis, long weightBytes) {
        /** Weight bytes read per second of GPU time, in GB/s. */
        public double gigabytesPerSecond() {
            return millis > 0 ? weightBytes / (millis * 1e6) : 0;
        }
    }

    /**
     * Runs one real decode step of {@code token} at the next position (the position advances), timing
     * every dispatch, and returns the time per kind of dispatch, largest first.
     */
    List<KernelTime> profileStep(int token);

    /** Tokens of one batch of the prompt command list. */
    int promptBatch();

    /**
     * Runs {@code tokens[from .. from+count)} ({@code count ≤ promptBatch()}) as one real prompt batch at the
     * next positions, timing every dispatch, and returns the time per kind of dispatch, largest first.
     */
    List<KernelTime> profilePrompt(int[] tokens, int from, int count);
}
