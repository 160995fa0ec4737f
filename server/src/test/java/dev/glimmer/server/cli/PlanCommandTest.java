package dev.glimmer.server.cli;

import dev.glimmer.server.EngineTestData;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code ./glimmer plan} on the oracle models. */
class PlanCommandTest {
    static final Path ORACLE = EngineTestData.ORACLE;

    private static JsonNode plan(String model) throws Exception {
        MainTest.Result r = MainTest.run("plan", "--model", ORACLE.resolve(model).toString(), "--json");
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
        assertEquals(p.get("active_weight_bytes").asLong(), p.get("weight_bytes_per_token").asLong());
        assertEquals(3, p.get("dispatches_per_kernel").get("moe_router").asInt());
        assertEquals(1, p.get("weight_buffers").asInt());
    }

    @Test
    void tinyPlanSizesTheCacheForTheContext() throws Exception {
        MainTest.Result r = MainTest.run("plan", "--model", ORACLE.resolve("tiny-q4_0.gguf").toString(), "--ctx", "100",
                "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode p = new ObjectMapper().readTree(r.out());
        assertEquals(3L * 100 * (64 + 16) * 4, p.get("kv_cache_bytes").asLong());
    }

    @Test
    void textOutputListsTheChecks() {
        MainTest.Result r = MainTest.run("plan", "--model", ORACLE.resolve("tiny-f32.gguf").toString());
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("ok     weight_bytes_equal_active_bytes"), r.out());
        assertFalse(r.out().contains("FAILED"), r.out());
    }

    @Test
    void contextBeyondTheModelIsAUsageError() {
        MainTest.Result r = MainTest.run("plan", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--ctx", "999999");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("--ctx must be in 1..4096"), r.err());
    }
}
