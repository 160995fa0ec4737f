package dev.glimmer.engine.backend;

import java.util.List;

/**
 * A pool's GPU timing of one decode step or one prompt batch kernel by kernel ({@link SequencePool#timings}, for
 * {@code ./glimmer bench}: where the time goes).
 *
 * <p>A decode step is measured the way it really runs, as one graph: the whole step is timed, then the
 * step without one kind of dispatch, once per kind; a kind's time is the difference. Timing each kernel
 * alone (an event between every two kernels) serializes the step and inflates its short kernels several-fold;
 * by difference, the kinds' times add up to the step's time up to what no single kind owns. A prompt batch is
 * timed dispatch by dispatch instead: its experts' work depends on the routing, which leaving a kind out
 * changes, and its kernels are long enough that the events between them cost little.
 */
public interface KernelTimings {

    /**
     * GPU time of one kind of dispatch in a step: a kernel and the weight it reads
     * ({@code mat_vec attn_output.weight}), how many dispatches, the weight bytes they read (so
     * that the time can be held against the memory bandwidth) and the multiply-adds of their weight
     * matrices (against the arithmetic units; 0 for kernels that multiply no weight matrix).
     */
    record KernelTime(String kernel, int dispatches, double millis, long weightBytes, long multiplyAdds) {
        /** Weight bytes read per second of GPU time, in GB/s. */
        public double gigabytesPerSecond() {
            return millis > 0 ? weightBytes / (millis * 1e6) : 0;
        }

        /** Floating-point operations per second of GPU time (a multiply-add is two), in TFLOP/s. */
        public double teraflopsPerSecond() {
            return millis > 0 ? 2.0 * multiplyAdds / (millis * 1e9) : 0;
        }
    }

    /**
     * A step's profile: its measured time as one graph, the time of each kind of dispatch (largest first), and
     * the device's measured copy bandwidth (bytes read and written per second by a device-to-device copy, GB/s),
     * the yardstick for the kernels' GB/s; for a decode step also its time with the copies a decode queues between
     * graphs ({@code stepWithCopiesMillis}: the StepArgs in, the greedy tokens out, a fence; NaN where not measured),
     * so that what the device spends between graphs is told apart from what the host keeps it waiting.
     */
    record Profile(
            double stepMillis, List<KernelTime> kernels, double copyGigabytesPerSecond, double stepWithCopiesMillis) {
        public Profile {
            kernels = List.copyOf(kernels);
        }

        /** The kinds' times added up: close to {@link #stepMillis} when the profile is faithful. */
        public double kernelMillis() {
            return kernels.stream().mapToDouble(KernelTime::millis).sum();
        }
    }

    /**
     * Runs one real decode step of {@code sequences} (each fed {@code tokens[i]} at its next position; the positions
     * advance) and profiles that step (replayed at the same positions): one sequence through the decode list, more
     * through the batch list that holds them.
     */
    Profile profileStep(List<SequencePool.Sequence> sequences, int[] tokens);

    /** Tokens of one batch of the prompt command list. */
    int promptBatch();

    /**
     * Runs {@code tokens[from .. from+count)} ({@code count ≤ promptBatch()}) as one real prompt batch into
     * {@code sequence} at its next positions, and profiles that batch (replayed at the same positions).
     */
    Profile profilePrompt(SequencePool.Sequence sequence, int[] tokens, int from, int count);
}
