package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.kv.KvCacheType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** tiny-f32 against llama.cpp (F32 KV cache, as the references were made): every logit within 1e-4. */
class TinyF32ConformanceTest {
    private static GlmModel model;

    @BeforeAll
    static void open() throws Exception {
        model = GlmModel.open(Oracle.model("tiny-f32"));
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void everyPromptPositionAndGreedyStepWithin1e4() {
        for (Oracle.Case c : Oracle.cases("tiny-f32")) {
            Agreement a = Agreement.teacherForced(model, c, KvCacheType.F32);
            System.out.println("tiny-f32 F32 cache " + a);
            assertEquals(c.promptTokens().length + c.greedyStepLogits().length, a.positions());
            assertTrue(a.maxDiff() <= 1e-4, a.toString());
            assertEquals(a.positions(), a.argmaxAgreed(), a.toString());
        }
    }

    @Test
    void greedyContinuationEqualsLlamaCpp() {
        for (Oracle.Case c : Oracle.cases("tiny-f32")) {
            assertArrayEquals(
                    c.greedyTokens(), Agreement.greedy(model, c, KvCacheType.F32, c.greedyTokens().length), c.name());
        }
    }

    @Test
    void f16CacheMovesLogitsLittleAndNoGreedyToken() {
        for (Oracle.Case c : Oracle.cases("tiny-f32")) {
            Agreement a = Agreement.teacherForced(model, c, KvCacheType.F16);
            System.out.println("tiny-f32 F16 cache " + a);
            assertTrue(a.maxDiff() <= 1e-2, a.toString());
            assertTrue(a.maxDiff() > 0, "an F16 cache must round something: " + a);
            assertArrayEquals(
                    c.greedyTokens(), Agreement.greedy(model, c, KvCacheType.F16, c.greedyTokens().length), c.name());
        }
    }
}
