package dev.glimmer.engine.backend.cpu;

/**
 * Where a {@link CpuBackend}'s time goes: wall time, calls, weight bytes read and multiply-adds per kind of operation,
 * counted on the calling thread from the start of each operation to its end (so an operation's time
 * includes its threads' waits for each other). {@code bench} prints it per token or per prompt batch:
 * each operation's weight bytes per second (decode: set it against what the cores can stream) and its
 * multiply-adds per second (a prompt: set it against what the kernel reaches on data in the cache).
 */
public final class CpuProfile {
    /** The kinds of operation the backend times. */
    public enum Op {
        ACTIVATIONS("activations quantized"),
        MATMUL("matmul"),
        MATMUL_HEADS("matmul per head"),
        EXPERTS_GATE_UP("experts gate+up"),
        EXPERTS_DOWN("experts down"),
        ATTENTION("attention");

        private final String label;

        Op(String label) {
            this.label = label;
        }

        /** The operation's name in reports. */
        public String label() {
            return label;
        }
    }

    private final long[] nanos = new long[Op.values().length];
    private final long[] calls = new long[Op.values().length];
    private final long[] weightBytes = new long[Op.values().length];
    private final long[] multiplyAdds = new long[Op.values().length];

    /**
     * Adds one operation of {@code kind} that started at {@code startNanos} (System.nanoTime), read
     * {@code bytes} of weights and did {@code macs} multiply-adds.
     */
    void add(Op kind, long startNanos, long bytes, long macs) {
        nanos[kind.ordinal()] += System.nanoTime() - startNanos;
        calls[kind.ordinal()]++;
        weightBytes[kind.ordinal()] += bytes;
        multiplyAdds[kind.ordinal()] += macs;
    }

    /** Forgets everything counted so far. */
    public void reset() {
        java.util.Arrays.fill(nanos, 0);
        java.util.Arrays.fill(calls, 0);
        java.util.Arrays.fill(weightBytes, 0);
        java.util.Arrays.fill(multiplyAdds, 0);
    }

    /** Seconds spent in operations of {@code kind}. */
    public double seconds(Op kind) {
        return nanos[kind.ordinal()] / 1e9;
    }

    /** Operations of {@code kind} run. */
    public long calls(Op kind) {
        return calls[kind.ordinal()];
    }

    /** Weight bytes read by operations of {@code kind}. */
    public long weightBytes(Op kind) {
        return weightBytes[kind.ordinal()];
    }

    /** Multiply-adds of weights and activations done by operations of {@code kind}. */
    public long multiplyAdds(Op kind) {
        return multiplyAdds[kind.ordinal()];
    }
}
