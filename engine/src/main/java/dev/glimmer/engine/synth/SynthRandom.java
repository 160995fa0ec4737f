package dev.glimmer.engine.synth;

import java.nio.charset.StandardCharsets;

/**
 * A small, fast, fully specified random generator (SplitMix64), so that a synthetic model's bytes
 * depend only on the seed and never on the JDK version. Streams are derived from the seed and a
 * name (a tensor name plus a chunk index), so chunks can be generated in parallel and in any order.
 */
final class SynthRandom {
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;
    /** sqrt(3): scales the sum of four uniforms (variance 4/12) to unit variance. */
    private static final float SQRT3 = 1.7320508f;

    private long state;

    SynthRandom(long seed) {
        this.state = seed;
    }

    /** The stream for {@code name} and {@code index} under {@code seed}. */
    static SynthRandom forStream(long seed, String name, long index) {
        long h = 0xcbf29ce484222325L; // FNV-1a over the name's UTF-8 bytes
        for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return new SynthRandom(mix(mix(seed ^ h) + index * GOLDEN));
    }

    long nextLong() {
        state += GOLDEN;
        return mix(state);
    }

    /** Uniform in [0, bound). */
    int nextInt(int bound) {
        return (int) Math.floorMod(nextLong() >>> 1, (long) bound);
    }

    /**
     * An approximately standard-normal value: the sum of four 16-bit uniforms (Irwin–Hall), centred
     * and scaled to unit variance; bounded by ±3.46. One 64-bit draw per value keeps the full-size
     * model (30 billion weights) quick to generate.
     */
    float nextNormal() {
        long r = nextLong();
        int sum = (int) (r & 0xffff) + (int) ((r >>> 16) & 0xffff) + (int) ((r >>> 32) & 0xffff) + (int) (r >>> 48);
        return ((sum + 2f) / 65536f - 2f) * SQRT3;
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
