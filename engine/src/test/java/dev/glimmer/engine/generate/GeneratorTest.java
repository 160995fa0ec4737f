package dev.glimmer.engine.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.sampling.SamplingParams;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The generator on the real tiny model, greedy, against llama.cpp's greedy tokens. Token text here is
 * the id in brackets ("[427]"), so stop strings can be placed across token boundaries exactly.
 */
class GeneratorTest {
    private static GlmModel model;
    private static Oracle.Case chat;

    @BeforeAll
    static void open() throws Exception {
        model = GlmModel.open(Oracle.model("tiny-f32"));
        chat = Oracle.chatCase("tiny-f32");
    }

    @AfterAll
    static void close() {
        model.close();
    }

    /** Ids as text; {@code endOfGeneration} plays the role of the vocabulary's EOG set. */
    record BracketVocabulary(Set<Integer> endOfGeneration) implements Vocabulary {
        @Override
        public boolean isEndOfGeneration(int token) {
            return endOfGeneration.contains(token);
        }

        @Override
        public TextDecoder newDecoder() {
            return new TextDecoder() {
                @Override
                public String next(int id) {
                    return "[" + id + "]";
                }

                @Override
                public String finish() {
                    return "";
                }
            };
        }
    }

    private record Run(GenerationResult result, List<TokenEvent> events) {
        String eventText() {
            StringBuilder sb = new StringBuilder();
            events.forEach(e -> sb.append(e.text()));
            return sb.toString();
        }
    }

    private static Run generate(
            int contextSize,
            int batch,
            Set<Integer> eog,
            int maxTokens,
            List<String> stop,
            java.util.function.BooleanSupplier cancelled) {
        try (SequencePool pool = new CpuSequencePool(model, new CpuBackend(), 1, contextSize, KvCacheType.F32, batch);
                SequencePool.Sequence sequence = pool.open()) {
            Generator generator = new Generator(pool, sequence, new BracketVocabulary(eog), model.vocabSize(), batch);
            List<TokenEvent> events = new ArrayList<>();
            GenerationResult result = generator.generate(
                    new GenerationRequest(chat.promptTokens(), SamplingParams.greedy(), maxTokens, stop, true),
                    events::add,
                    cancelled);
            return new Run(result, events);
        }
    }

    private static String brackets(int[] ids, int count) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < count; i++) {
            sb.append('[').append(ids[i]).append(']');
        }
        return sb.toString();
    }

    @Test
    void greedyGenerationEqualsLlamaCppAndReportsEveryToken() {
        Run run = generate(256, 16, Set.of(), 32, List.of(), () -> false);
        assertArrayEquals(chat.greedyTokens(), run.result().tokens());
        assertEquals(FinishReason.LENGTH, run.result().finish());
        assertEquals(32, run.events().size());
        assertEquals(brackets(chat.greedyTokens(), 32), run.result().text());
        assertEquals(run.result().text(), run.eventText());
        Timings t = run.result().timings();
        assertEquals(chat.promptTokens().length, t.promptTokens());
        assertEquals(32, t.generatedTokens());
        assertTrue(t.promptMillis() > 0 && t.generationMillis() > 0 && t.tokensPerSecond() > 0, t.toString());
        // Each logprob is the log-softmax of llama.cpp's logits for that step.
        for (int k = 1; k < 32; k++) {
            float[] logits = chat.greedyStepLogits()[k - 1];
            double max = Double.NEGATIVE_INFINITY;
            for (float v : logits) {
                max = Math.max(max, v);
            }
            double sum = 0;
            for (float v : logits) {
                sum += Math.exp(v - max);
            }
            double expected = logits[chat.greedyTokens()[k]] - max - Math.log(sum);
            assertEquals(expected, run.events().get(k).logprob(), 1e-4, "step " + k);
        }
    }

    @Test
    void endOfGenerationTokenStopsWithoutItsText() {
        int eog = chat.greedyTokens()[5];
        Run run = generate(256, 16, Set.of(eog), 32, List.of(), () -> false);
        assertEquals(FinishReason.STOP, run.result().finish());
        assertArrayEquals(Arrays.copyOf(chat.greedyTokens(), 6), run.result().tokens());
        assertEquals(brackets(chat.greedyTokens(), 5), run.result().text());
        assertEquals(6, run.events().size());
        assertEquals(eog, run.events().get(5).token());
    }

    @Test
    void stopStringSplitAcrossTokensIsNotReturned() {
        int[] g = chat.greedyTokens();
        // Starts inside token 2's text and ends inside token 3's.
        String stop =
                String.valueOf(g[2]).substring(1) + "][" + String.valueOf(g[3]).charAt(0);
        Run run = generate(256, 16, Set.of(), 32, List.of("never", stop), () -> false);
        assertEquals(FinishReason.STOP, run.result().finish());
        String expected = brackets(g, 2) + "[" + String.valueOf(g[2]).charAt(0);
        assertEquals(expected, run.result().text());
        assertEquals(expected, run.eventText());
        assertEquals(4, run.result().tokens().length);
        assertTrue(run.events().get(2).text().length() < ("[" + g[2] + "]").length(), "token 2's text is held back");
    }

    @Test
    void maxTokensEndsWithLength() {
        Run run = generate(256, 16, Set.of(), 5, List.of(String.valueOf(chat.greedyTokens()[4]) + "]["), () -> false);
        assertEquals(FinishReason.LENGTH, run.result().finish());
        assertArrayEquals(Arrays.copyOf(chat.greedyTokens(), 5), run.result().tokens());
        assertEquals(brackets(chat.greedyTokens(), 5), run.result().text(), "held-back text is released at the end");
        assertEquals(run.result().text(), run.eventText());
    }

    @Test
    void fullContextEndsWithLengthNotAnException() {
        int prompt = chat.promptTokens().length;
        Run run = generate(prompt + 3, 16, Set.of(), 32, List.of(), () -> false);
        assertEquals(FinishReason.LENGTH, run.result().finish());
        assertArrayEquals(
                Arrays.copyOf(chat.greedyTokens(), 4),
                run.result().tokens(),
                "three tokens fill the cache, the fourth comes from the last logits");
    }

    @Test
    void promptLongerThanTheContextIsRefusedWithBothNumbers() {
        int prompt = chat.promptTokens().length;
        InvalidInputException e = assertThrows(
                InvalidInputException.class, () -> generate(prompt - 4, 16, Set.of(), 8, List.of(), () -> false));
        assertTrue(
                e.getMessage().contains(String.valueOf(prompt))
                        && e.getMessage().contains(String.valueOf(prompt - 4)),
                e.getMessage());
    }

    @Test
    void cancellationIsSeenBetweenTokens() {
        AtomicInteger checks = new AtomicInteger();
        // Prefill of 24 tokens in chunks of 8: 3 checks; then one check before each token.
        Run run = generate(256, 8, Set.of(), 32, List.of(), () -> checks.incrementAndGet() > 3 + 4);
        assertEquals(FinishReason.CANCELLED, run.result().finish());
        assertArrayEquals(Arrays.copyOf(chat.greedyTokens(), 4), run.result().tokens());
        assertEquals(4, run.events().size());
    }

    @Test
    void cancellationIsSeenBetweenPromptChunks() {
        AtomicInteger checks = new AtomicInteger();
        Run run = generate(256, 8, Set.of(), 32, List.of(), () -> checks.incrementAndGet() > 2);
        assertEquals(FinishReason.CANCELLED, run.result().finish());
        assertEquals(0, run.result().tokens().length);
        assertEquals(16, run.result().timings().promptTokens(), "two chunks of 8 were processed");
        assertTrue(run.events().isEmpty());
    }
}
