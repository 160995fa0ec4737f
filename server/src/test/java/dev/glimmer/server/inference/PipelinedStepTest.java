package dev.glimmer.server.inference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.server.EngineTestData;
import dev.glimmer.server.metrics.ServerMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * The scheduler on a GPU-style pool (the kernel emulator; needs clang-19) launches a greedy sequence's next step
 * before the decode rules have run on its token, and so feeds a token a stop string then ends the sequence with.
 * Compared with the CPU's pool, which never feeds ahead (its steps give logits): the same tokens and ends, one more
 * decode step on the GPU-style pool (the speculative one), and a follow-up finds the same number of tokens in the
 * cached conversation, so the speculative position was cut off.
 */
class PipelinedStepTest {
    private static final int MAX_TOKENS = 8;

    /** What a job reported: its tokens, their texts and its end. */
    record Run(int[] tokens, List<String> texts, JobEvent.Finished finished) {}

    @Test
    void aStopStringOnATokenFedAheadLeavesTheCacheAsWithoutIt() throws Exception {
        JsonNode oracle = new ObjectMapper()
                .readTree(EngineTestData.ORACLE
                        .resolve("refs/tiny-f32.logits.json")
                        .toFile())
                .get("cases")
                .get(0);
        int[] prompt = new int[oracle.get("prompt_tokens").size()];
        Arrays.setAll(prompt, i -> oracle.get("prompt_tokens").get(i).asInt());
        try (GlmModel model = GlmModel.open(EngineTestData.model("tiny-f32"))) {
            int ctx = prompt.length + 2 * MAX_TOKENS;
            Served decoders = new Served(model, EmulatorRunner.pool(model, 4, ctx));
            Served cpu =
                    new Served(model, new CpuSequencePool(model, new CpuBackend(1), 4, ctx, KvCacheType.DEFAULT, 64));
            try {
                Run free = decoders.run(prompt, List.of());
                assertArrayEquals(
                        cpu.run(prompt, List.of()).tokens(), free.tokens(), "the decoders' greedy run is the CPU's");
                // a stop string that first completes with token k: that token's text, found nowhere before it
                int k = IntStream.range(2, MAX_TOKENS - 1)
                        .filter(i -> !free.texts().get(i).isBlank()
                                && !String.join("", free.texts().subList(0, i))
                                        .contains(free.texts().get(i)))
                        .findFirst()
                        .orElseThrow(() -> new AssertionError("no stop string in " + free.texts()));
                List<String> stop = List.of(free.texts().get(k));

                double stepsBefore = decoders.metric("glimmer_decode_step_seconds_count");
                Run stopped = decoders.run(prompt, stop);
                assertEquals(FinishReason.STOP, stopped.finished().reason());
                assertArrayEquals(Arrays.copyOf(free.tokens(), k + 1), stopped.tokens());
                // the speculative step is collected after the end was reported: wait for it
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (decoders.metric("glimmer_decode_step_seconds_count") - stepsBefore < k + 1
                        && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertEquals(
                        k + 1,
                        decoders.metric("glimmer_decode_step_seconds_count") - stepsBefore,
                        "tokens 1.." + k + " came from " + k + " steps, and token " + k + " was fed ahead in one more");
                Run onCpu = cpu.run(prompt, stop);
                assertArrayEquals(onCpu.tokens(), stopped.tokens());
                assertEquals(onCpu.finished().stopString(), stopped.finished().stopString());

                // the follow-up continues the stopped answer: the cache holds the prompt and its tokens but the last
                int[] followUp = IntStream.concat(Arrays.stream(prompt), Arrays.stream(free.tokens(), 0, k + 2))
                        .toArray();
                Run next = decoders.run(followUp, List.of());
                assertEquals(prompt.length + k, next.finished().cachedTokens(), "cached positions after the stop");
                assertEquals(
                        cpu.run(followUp, List.of()).finished().cachedTokens(),
                        next.finished().cachedTokens());
            } finally {
                decoders.close();
                cpu.close();
            }
        }
    }

    /** A scheduler over {@code pool} as the server runs one (the model stays open: the test closes it). */
    private static final class Served {
        final ServerMetrics metrics = new ServerMetrics();
        final Scheduler scheduler;

        Served(GlmModel model, SequencePool pool) {
            SessionManager sessions = new SessionManager(pool, pool.slots() * pool.bytesPerSequence(), 2);
            Vocabulary vocabulary =
                    Vocabulary.of(Tokenizer.fromMetadata(model.file().metadata()), true);
            scheduler = new Scheduler(
                    pool,
                    true,
                    vocabulary,
                    model.vocabSize(),
                    sessions,
                    metrics,
                    2,
                    64,
                    4,
                    0,
                    Drafting.Use.WHILE_PAYING,
                    () -> {
                        sessions.close();
                        pool.close();
                    });
        }

        /** Runs a greedy job of at most {@link #MAX_TOKENS} tokens to its end. */
        Run run(int[] prompt, List<String> stop) throws InterruptedException {
            InferenceJob job = new InferenceJob(prompt, SamplingParams.greedy(), MAX_TOKENS, stop, false, 0);
            scheduler.submit(job);
            List<Integer> tokens = new ArrayList<>();
            List<String> texts = new ArrayList<>();
            while (true) {
                JobEvent event = job.poll(120, TimeUnit.SECONDS);
                assertNotNull(event, "the job went silent");
                switch (event) {
                    case JobEvent.Token t -> {
                        tokens.add(t.token());
                        texts.add(t.text());
                    }
                    case JobEvent.Finished f -> {
                        return new Run(
                                tokens.stream().mapToInt(Integer::intValue).toArray(), texts, f);
                    }
                    case JobEvent.Failed f -> throw new AssertionError("the job failed: " + f.message());
                    case JobEvent.Admitted a -> {}
                    case JobEvent.PromptProgress p -> {}
                }
            }
        }

        double metric(String name) {
            return metrics.scrape()
                    .lines()
                    .filter(l -> l.startsWith(name + " "))
                    .mapToDouble(l -> Double.parseDouble(l.split(" ")[1]))
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("no metric " + name));
        }

        void close() {
            assertTrue(scheduler.close(Duration.ofSeconds(60)), "the scheduler stopped");
            metrics.close();
        }
    }
}
