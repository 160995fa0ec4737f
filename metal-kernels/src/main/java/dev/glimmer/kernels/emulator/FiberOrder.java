package dev.glimmer.kernels.emulator;

/**
 * The order in which the emulator runs threadgroups and the fibers inside each. A deterministic
 * schedule hides races (a thread reading threadgroup memory before another wrote it, threadgroups
 * depending on each other), so tests run kernels in more than one order and require identical results.
 */
public record FiberOrder(Mode mode, long seed) {

    public enum Mode {
        IN_ORDER,
        REVERSED,
        SHUFFLED
    }

    public static FiberOrder inOrder() {
        return new FiberOrder(Mode.IN_ORDER, 0);
    }

    public static FiberOrder reversed() {
        return new FiberOrder(Mode.REVERSED, 0);
    }

    public static FiberOrder shuffled(long seed) {
        return new FiberOrder(Mode.SHUFFLED, seed);
    }
}
