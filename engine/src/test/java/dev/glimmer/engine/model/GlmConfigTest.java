package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.gguf.GgufValue;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The config and weight views of the oracle models, and what happens when the metadata is changed. */
class GlmConfigTest {
    private static GgufFile tiny;

    @BeforeAll
    static void open() throws Exception {
        tiny = GgufFile.open(Oracle.model("tiny-f32"));
    }

    @AfterAll
    static void close() {
        tiny.close();
    }

    private static GlmConfig configWith(Consumer<Map<String, GgufValue>> change) {
        Map<String, GgufValue> entries = new LinkedHashMap<>(tiny.metadata().entries());
        change.accept(entries);
        return GlmConfig.from(new GgufMetadata(entries), "edited.gguf");
    }

    @Test
    void tinyConfigIsTheManifests() {
        GlmConfig c = GlmConfig.from(tiny);
        assertEquals(
                new GlmConfig(
                        3,
                        0,
                        4096,
                        128,
                        320,
                        4,
                        1e6f,
                        1e-5f,
                        2,
                        1,
                        1024,
                        96,
                        64,
                        48,
                        48,
                        16,
                        64,
                        8,
                        1,
                        1.8f,
                        true,
                        GlmConfig.GatingFunction.SIGMOID),
                c);
        assertEquals(80, c.kvRowWidth());
        assertEquals(32, c.nopeDims());
        assertEquals((float) (1 / Math.sqrt(48)), c.kqScale());
    }

    @Test
    void smallAndQuantizedFilesLoadWithEveryTensor() throws Exception {
        for (String name : new String[] {"tiny-q8_0", "tiny-q4_0", "small-q4_k_m"}) {
            try (GlmModel model = GlmModel.open(Oracle.model(name))) {
                assertEquals(model.config().layers(), model.weights().layers().size());
                GlmWeights.Layer moe = model.weights().layers().get(1);
                assertNull(moe.dense());
                assertNotNull(moe.moe().selectionBias());
                assertEquals(model.config().experts(), moe.moe().experts().length);
                assertEquals(model.config().heads(), moe.kB().length);
            }
        }
    }

    @Test
    void withoutTheGatingKeyLlamaCppsRuleApplies() {
        GlmConfig noKey = configWith(m -> m.remove("deepseek2.expert_gating_func"));
        assertEquals(GlmConfig.GatingFunction.SOFTMAX, noKey.gating(), "3 layers, vocab 1024: softmax");
        GlmConfig flash = configWith(m -> {
            m.remove("deepseek2.expert_gating_func");
            m.put("deepseek2.block_count", GgufValue.uint32(48));
            m.put("deepseek2.nextn_predict_layers", GgufValue.uint32(1));
            m.put("deepseek2.vocab_size", GgufValue.uint32(154880));
        });
        assertEquals(GlmConfig.GatingFunction.SIGMOID, flash.gating(), "47 trunk layers and GLM's vocabulary: sigmoid");
        assertEquals(47, flash.layers());
        GlmConfig softmaxKey = configWith(m -> m.put("deepseek2.expert_gating_func", GgufValue.uint32(1)));
        assertEquals(GlmConfig.GatingFunction.SOFTMAX, softmaxKey.gating());
    }

    @Test
    void anMtpBlockIsNotPartOfTheTrunk() {
        GlmConfig c = configWith(m -> {
            m.put("deepseek2.block_count", GgufValue.uint32(4));
            m.put("deepseek2.nextn_predict_layers", GgufValue.uint32(1));
        });
        assertEquals(3, c.layers());
        assertEquals(3, GlmWeights.from(tiny, c).layers().size());
    }

    @Test
    void otherArchitecturesAndFilesWithoutMlaAreRefusedSayingWhatTheyAre() {
        InvalidInputException llama = assertThrows(
                InvalidInputException.class,
                () -> configWith(m -> m.put("general.architecture", GgufValue.of("llama"))));
        assertTrue(
                llama.getMessage().contains("is a llama model")
                        && llama.getMessage().contains("edited.gguf"),
                llama.getMessage());
        InvalidInputException noMla = assertThrows(
                InvalidInputException.class, () -> configWith(m -> m.remove("deepseek2.attention.key_length_mla")));
        assertTrue(noMla.getMessage().contains("without MLA keys"), noMla.getMessage());
    }

    @Test
    void aShapeMismatchNamesTheKeyTheTensorAndBothValues() {
        GlmConfig wrong = configWith(m -> m.put("deepseek2.attention.q_lora_rank", GgufValue.uint32(95)));
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> GlmWeights.from(tiny, wrong));
        String msg = e.getMessage();
        assertTrue(
                msg.contains("blk.0.attn_q_a.weight")
                        && msg.contains("deepseek2.attention.q_lora_rank = 95")
                        && msg.contains("is 96"),
                msg);
        GlmConfig experts = configWith(m -> m.put("deepseek2.expert_count", GgufValue.uint32(16)));
        String msg2 = assertThrows(InvalidInputException.class, () -> GlmWeights.from(tiny, experts))
                .getMessage();
        assertTrue(msg2.contains("deepseek2.expert_count = 16") && msg2.contains("is 8"), msg2);
        InvalidInputException keyLength = assertThrows(
                InvalidInputException.class,
                () -> configWith(m -> m.put("deepseek2.attention.key_length", GgufValue.uint32(81))));
        assertTrue(
                keyLength.getMessage().contains("key_length = 81")
                        && keyLength.getMessage().contains("80"),
                keyLength.getMessage());
    }
}
