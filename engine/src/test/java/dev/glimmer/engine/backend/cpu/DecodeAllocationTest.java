package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The decode path allocates (almost) nothing once warm: token steps of the tiny Q4_0 oracle model, on
 * the calling thread and on the pool's workers (the JVM's per-thread allocation counters), allocate
 * less than 64 bytes per token on average; one new activation or score buffer per step would be
 * kilobytes. Not exactly zero: in a test this short some Vector API code (the tiny model's attention
 * over a few positions) is still running in C1-compiled form, which boxes vectors now and then.
 */
class DecodeAllocationTest {

    @Test
    void decodeStepsAllocateNothingOnceWarm() throws Exception {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
             KvCache cache = model.newCache(64, KvCacheType.F16)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(2), 8);
            int[] tokens = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26};
            for (int warm = 0; warm < 3000; warm++) {
                decode(forward, cache, tokens);
            }
            long[] ids = Thread.getAllStackTraces().keySet().stream()
                    .filter(t -> t == Thread.currentThread() || t.getName().startsWith("glimmer-cpu-"))
                    .mapToLong(Thread::threadId).toArray();
            long before = Arrays.stream(threads.getThreadAllocatedBytes(ids)).sum();
            int rounds = 100;
            for (int i = 0; i < rounds; i++) {
                decode(forward, cache, tokens);
            }
            long allocated = Arrays.stream(threads.getThreadAllocatedBytes(ids)).sum() - before;
            double perToken = (double) allocated / (rounds * tokens.length);
            assertTrue(perToken < 64, rounds * tokens.length + " decode steps allocated " + allocated + " bytes");
        }
    }

    /** A 16-token sequence decoded one token at a time from an empty cache. */
    private static void decode(GlmForward forward, KvCache cache, int[] tokens) {
        cache.truncate(0);
        for (int i = 0; i < tokens.length; i++) {
            forward.forward(cache, tokens, i, 1, false);
        }
    }
}
