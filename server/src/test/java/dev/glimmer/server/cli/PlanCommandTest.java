package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.EngineTestData;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/** {@code ./glimmer plan} on the oracle models. */
class PlanCommandTest {
    static final Path ORACLE = EngineTestData.ORACLE;

    private static JsonNode plan(String model) throws Exception {
        MainTest.Result r =
                MainTest.run("plan", "--model", ORACLE.resolve(model).toString(), "--json");
        assertEquals(0, r.code(), r.err());
        return new ObjectMapper().readTree(r.out());
    }

    @Test
    void smallQ4KmPlanPassesEveryCheck() throws Exception {
        JsonNode p = plan("small-q4_k_m.gguf");
        p.get("checks").forEach(c -> assertTrue(c.asBoolean(), p.get("checks").toString()));
        // 4 layers: the dense one has 10 dispatches, the MoE ones 11; plus embedding, output, the argmax's two stages
        assertEquals(4 + 10 + 3 * 11, p.get("dispatches_per_token").asInt());
        assertEquals(11, p.get("max_dispatches_per_layer").asInt());
        assertEquals(
                p.get("active_weight_bytes").asLong(),
                p.get("weight_bytes_per_token").asLong());
        assertEquals(3, p.get("dispatches_per_kernel").get("moe_router").asInt());
        assertEquals(1, p.get("weight_buffers").asInt());
    }

    @Test
    void tinyPlanSizesTheCacheForTheContext() throws Exception {
        MainTest.Result r =
                MainTest.run("plan", "--model", ORACLE.resolve("tiny-q4_0.gguf").toString(), "--ctx", "100", "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode p = new ObjectMapper().readTree(r.out());
        assertEquals(3L * 100 * (64 + 16) * 2, p.get("kv_cache_bytes").asLong()); // halves
    }

    @Test
    void gpuMemoryPerPartForThePoolOfParallelConversations() throws Exception {
        String tiny = ORACLE.resolve("tiny-q4_0.gguf").toString();
        MainTest.Result r = MainTest.run("plan", "--model", tiny, "--ctx", "100", "--parallel", "3", "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode m = new ObjectMapper().readTree(r.out()).get("gpu_memory");
        assertEquals(5, m.get("conversations").asInt()); // --parallel + 2
        assertEquals(5L * 100 * 3 * (64 + 16) * 2, m.get("kv_pool_bytes").asLong());
        assertEquals(3L * (64 + 16) * 2, m.get("kv_bytes_per_token").asLong());
        assertEquals(
                m.get("weights_bytes").asLong()
                        + m.get("kv_pool_bytes").asLong()
                        + m.get("activations_bytes").asLong(),
                m.get("total_bytes").asLong());

        // a GPU too small for the pool: the check fails and the text says what to change
        MainTest.Result small = MainTest.run("plan", "--model", tiny, "--ctx", "100", "--gpu-memory", "0.001");
        assertEquals(1, small.code(), small.err());
        assertTrue(small.out().contains("FAILED pool_within_gpu_memory"), small.out());
        // (the pool serve would make there: the --parallel 2 conversations, no cached ones beside them)
        assertTrue(small.out().contains("the GPU offers 1.0 MB, but 2 conversations of 100 tokens need"), small.out());
        MainTest.Result big = MainTest.run("plan", "--model", tiny, "--ctx", "100", "--gpu-memory", "24");
        assertEquals(0, big.code(), big.err());
        assertTrue(big.out().contains("fits in 24,000,000,000 bytes of GPU memory"), big.out());
        assertTrue(big.out().contains("ok     pool_within_gpu_memory"), big.out());

        // room for --parallel 3 but not for the two cached conversations beside them: serve makes the 3, so it fits
        long perConversation = m.get("kv_pool_bytes").asLong() / 5;
        long tight = m.get("total_bytes").asLong() - 3 * perConversation / 2;
        MainTest.Result justParallel = MainTest.run(
                "plan",
                "--model",
                tiny,
                "--ctx",
                "100",
                "--parallel",
                "3",
                "--gpu-memory",
                String.format(Locale.ROOT, "%.9f", tight / 1e9),
                "--json");
        assertEquals(0, justParallel.code(), justParallel.out());
        JsonNode fitted = new ObjectMapper().readTree(justParallel.out()).get("gpu_memory");
        assertEquals(3, fitted.get("conversations").asInt());
        assertTrue(fitted.get("total_bytes").asLong() <= tight, justParallel.out());

        assertEquals(2, MainTest.run("plan", "--model", tiny, "--parallel", "0").code());
        assertEquals(
                2, MainTest.run("plan", "--model", tiny, "--gpu-memory", "-1").code());
    }

    @Test
    void textOutputListsTheChecks() {
        MainTest.Result r =
                MainTest.run("plan", "--model", ORACLE.resolve("tiny-f32.gguf").toString());
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("ok     weight_bytes_equal_active_bytes"), r.out());
        assertFalse(r.out().contains("FAILED"), r.out());
    }

    @Test
    void contextBeyondTheModelIsAUsageError() {
        MainTest.Result r =
                MainTest.run("plan", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--ctx", "999999");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("--ctx must be in 1..4096"), r.err());
    }
}
