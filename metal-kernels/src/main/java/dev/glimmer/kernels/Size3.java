package dev.glimmer.kernels;

/** A grid (threadgroups) or threadgroup (threads) size, as Metal's {@code MTLSize}. */
public record Size3(int x, int y, int z) {

    public Size3 {
        if (x < 1 || y < 1 || z < 1) {
            throw new IllegalArgumentException("sizes must be at least 1, got " + x + "x" + y + "x" + z);
        }
    }

    public static Size3 of(int x) {
        return new Size3(x, 1, 1);
    }

    public static Size3 of(int x, int y) {
        return new Size3(x, y, 1);
    }

    public long count() {
        return (long) x * y * z;
    }
}
