package dev.glimmer.server.cli;

import static dev.glimmer.server.cli.LogitsCommandTest.ORACLE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code ./glimmer generate} on the oracle models against llama.cpp's greedy continuations. */
class GenerateCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static JsonNode chatCase(String model) throws Exception {
        return JSON.readTree(ORACLE.resolve("refs/" + model + ".logits.json").toFile())
                .get("cases")
                .get(0);
    }

    /**
     * The references were made with an F32 KV cache, so the test asks for one. (small-q4_k_m is not here: an
     * activation of its prompt sits exactly on a Q8_K rounding boundary, so its continuation may legitimately
     * differ; the engine's QuantizedConformanceTest shows that near-tie.)
     */
    @ParameterizedTest
    @ValueSource(strings = {"tiny-f32", "tiny-q8_0", "tiny-q4_0"})
    void greedyPromptGivesLlamaCppsTokens(String model) throws Exception {
        JsonNode chat = chatCase(model);
        MainTest.Result r = MainTest.run(
                "generate",
                "--model",
                ORACLE.resolve(model + ".gguf").toString(),
                "--prompt",
                chat.get("prompt_text").asText(),
                "--max-tokens",
                "32",
                "--temperature",
                "0",
                "--cache-type",
                "f32",
                "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode out = JSON.readTree(r.out());
        assertEquals(chat.get("greedy_tokens"), out.get("tokens"), model);
        assertEquals("length", out.get("finish_reason").asText());
        assertEquals(chat.get("prompt_tokens").size(), out.get("prompt_tokens").asInt());
    }

    /**
     * {@code --backend emulated}: the GPU command lists on the kernel emulator (needs clang-19) run the same pool
     * contract; on the F32 model their greedy run is llama.cpp's.
     */
    @Test
    void theGpuPathGivesLlamaCppsTokensToo() throws Exception {
        JsonNode chat = chatCase("tiny-f32");
        MainTest.Result r = MainTest.run(
                "generate",
                "--model",
                ORACLE.resolve("tiny-f32.gguf").toString(),
                "--prompt",
                chat.get("prompt_text").asText(),
                "--max-tokens",
                "4",
                "--temperature",
                "0",
                "--backend",
                "emulated",
                "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode tokens = JSON.readTree(r.out()).get("tokens");
        assertEquals(4, tokens.size());
        for (int i = 0; i < 4; i++) {
            assertEquals(chat.get("greedy_tokens").get(i), tokens.get(i), "token " + i);
        }
        assertEquals(
                2,
                MainTest.run(
                                "generate",
                                "--model",
                                ORACLE.resolve("tiny-f32.gguf").toString(),
                                "--prompt",
                                "a",
                                "--backend",
                                "gpu")
                        .code());
    }

    @Test
    void chatWrapsTheMessageInTheChatFormatAndTheF16CacheKeepsTheTokens() throws Exception {
        JsonNode chat = chatCase("tiny-f32");
        // The oracle's chat prompt is this message rendered by the model's template.
        MainTest.Result r = MainTest.run(
                "generate",
                "--model",
                ORACLE.resolve("tiny-f32.gguf").toString(),
                "--chat",
                "Hello, world! Tell me a story about a fox.",
                "--max-tokens",
                "32",
                "--temperature",
                "0",
                "--json");
        assertEquals(0, r.code(), r.err());
        assertEquals(chat.get("greedy_tokens"), JSON.readTree(r.out()).get("tokens"));
    }

    @Test
    void streamsTheTextAndReportsTheSpeed() throws Exception {
        JsonNode chat = chatCase("tiny-f32");
        MainTest.Result json = MainTest.run(
                "generate",
                "--model",
                ORACLE.resolve("tiny-f32.gguf").toString(),
                "--prompt",
                chat.get("prompt_text").asText(),
                "--max-tokens",
                "8",
                "--temperature",
                "0",
                "--json");
        MainTest.Result text = MainTest.run(
                "generate",
                "--model",
                ORACLE.resolve("tiny-f32.gguf").toString(),
                "--prompt",
                chat.get("prompt_text").asText(),
                "--max-tokens",
                "8",
                "--temperature",
                "0");
        assertEquals(0, text.code(), text.err());
        assertEquals(JSON.readTree(json.out()).get("text").asText() + System.lineSeparator(), text.out());
        assertTrue(text.err().contains("24 prompt tokens") && text.err().contains("finish: length"), text.err());
    }

    /** --draft mtp on a tiny model with the NextN block: the same tokens as without, and the drafts reported. */
    @Test
    void draftMtpGivesTheSameTokensAndReportsTheDrafts(@TempDir Path dir) throws Exception {
        Path model = dir.resolve("tiny-mtp.gguf");
        ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, SynthWeightType.Q4_0, 3, true), model, (w, t) -> {});
        String[] common = {
            "generate",
            "--model",
            model.toString(),
            "--prompt",
            "a story",
            "--max-tokens",
            "24",
            "--temperature",
            "0",
            "--json"
        };
        MainTest.Result plain = MainTest.run(common);
        assertEquals(0, plain.code(), plain.err());
        for (String drafts : new String[] {"1", "2"}) {
            String[] args = java.util.Arrays.copyOf(common, common.length + 4);
            System.arraycopy(new String[] {"--draft", "mtp", "--draft-tokens", drafts}, 0, args, common.length, 4);
            MainTest.Result drafted = MainTest.run(args);
            assertEquals(0, drafted.code(), drafted.err());
            JsonNode out = JSON.readTree(drafted.out());
            assertEquals(JSON.readTree(plain.out()).get("tokens"), out.get("tokens"), drafts + " drafts");
            assertTrue(out.get("drafts").get("drafted").asInt() > 0, drafted.out());
        }
        MainTest.Result text = MainTest.run(
                "generate", "--model", model.toString(), "--prompt", "a", "--max-tokens", "4", "--draft", "mtp");
        assertTrue(text.err().contains("; drafts: "), text.err());

        String oracle = ORACLE.resolve("tiny-f32.gguf").toString();
        MainTest.Result noBlock = MainTest.run("generate", "--model", oracle, "--prompt", "a", "--draft", "mtp");
        assertEquals(2, noBlock.code());
        assertTrue(noBlock.err().contains("has no NextN (MTP) block"), noBlock.err());
        MainTest.Result bad = MainTest.run("generate", "--model", oracle, "--prompt", "a", "--draft", "eagle");
        assertEquals(2, bad.code());
        assertTrue(bad.err().contains("--draft must be mtp or none"), bad.err());
        MainTest.Result three = MainTest.run(
                "generate", "--model", model.toString(), "--prompt", "a", "--draft", "mtp", "--draft-tokens", "3");
        assertEquals(2, three.code());
        assertTrue(three.err().contains("--draft-tokens must be 1 or 2"), three.err());
    }

    @Test
    void promptAndChatAreExclusive() {
        String model = ORACLE.resolve("tiny-f32.gguf").toString();
        MainTest.Result both = MainTest.run("generate", "--model", model, "--prompt", "a", "--chat", "b");
        assertEquals(2, both.code());
        assertTrue(both.err().contains("exactly one of --prompt"), both.err());
        assertEquals(2, MainTest.run("generate", "--model", model).code());
        MainTest.Result ctx = MainTest.run("generate", "--model", model, "--prompt", "a", "--ctx", "100000");
        assertEquals(2, ctx.code());
        assertTrue(ctx.err().contains("100000") && ctx.err().contains("4096"), ctx.err());
    }
}
