package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import dev.glimmer.server.inference.BackendChooser;
import dev.glimmer.server.inference.ModelHost;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve --draft mtp} on a real server with the tiny synthetic model that has the NextN block: the greedy output
 * over HTTP is the same as with {@code --draft none}, streamed or not, cut by a stop string inside an accepted run or by
 * {@code max_tokens}, constrained by a JSON schema; usage and {@code /metrics} count the drafts; a conversation whose
 * drafts are never accepted stops drafting.
 *
 * <p>The model's weights are random, so its own drafter is almost never right. To see accepted runs, the drafting
 * server's pool replaces each draft, through the contract's {@link SequencePool.DraftFilter} (as {@code bench
 * --draft-accept} does), by the token the plain server fed at that position for the same prompt: the drafting, the
 * verification pass, the picks and the rollback are the real ones, only the drafted tokens are chosen.
 */
class SpeculativeServingTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String PROMPT = "The fox and the crow, a fable";

    @TempDir
    static Path dir;

    /** Each position's token as the plain server last fed it (one request at a time, the same prompt). */
    static final Map<Integer, Integer> fed = new ConcurrentHashMap<>();

    static GlimmerApp plain;
    static GlimmerApp drafting;
    static Path model;

    @BeforeAll
    static void start() throws Exception {
        model = dir.resolve("tiny-mtp.gguf");
        ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, SynthWeightType.F32, 5, true), model, (w, t) -> {});
        plain = GlimmerApp.start(
                TestServer.config(Map.of("model.path", model.toString(), "inference.draft", "none")),
                Map.of(),
                wrapped(pool -> new Recording(pool, fed)),
                Drafting.Use.WHILE_PAYING);
        plain.awaitLoaded();
        drafting = GlimmerApp.start(
                TestServer.config(Map.of(
                        "model.path", model.toString(), "inference.draft", "mtp", "inference.draft-tokens", "2")),
                Map.of(),
                wrapped(Oracle::new),
                Drafting.Use.ALWAYS);
        drafting.awaitLoaded();
    }

    @AfterAll
    static void stop() {
        plain.close();
        drafting.close();
    }

    @Test
    void greedyTextIsTheSameWithDraftsAndMaxTokensNeverCutsAnAcceptedDraft() throws Exception {
        for (int maxTokens = 1; maxTokens <= 9; maxTokens++) {
            String body = completion(maxTokens, "[]");
            JsonNode reference = post(plain, "/v1/completions", body);
            JsonNode drafted = post(drafting, "/v1/completions", body);
            assertEquals(text(reference), text(drafted), "max_tokens " + maxTokens);
            assertEquals(maxTokens, drafted.at("/usage/completion_tokens").asInt());
            JsonNode details = drafted.at("/usage/completion_tokens_details");
            // Every draft is right, and none is drafted past the limit.
            assertEquals(0, details.get("rejected_prediction_tokens").asInt(), "max_tokens " + maxTokens);
            // Steps of 3 tokens after the first (two drafts), the last as many as the limit leaves.
            int after = maxTokens - 1;
            assertEquals(
                    after / 3 * 2 + Math.max(0, after % 3 - 1),
                    details.get("accepted_prediction_tokens").asInt());
            assertEquals(
                    0,
                    reference
                            .at("/usage/completion_tokens_details/accepted_prediction_tokens")
                            .asInt());
        }
    }

    @Test
    void aStopStringInsideAnAcceptedRunEndsTheOutputWhereItWouldWithoutDrafts() throws Exception {
        String full = text(post(plain, "/v1/completions", completion(24, "[]")));
        int cutInsideRuns = 0;
        for (int at = 2; at < 16; at++) {
            String stop = full.substring(at, at + 2);
            String body = completion(24, JSON.writeValueAsString(List.of(stop)));
            JsonNode reference = post(plain, "/v1/completions", body);
            JsonNode drafted = post(drafting, "/v1/completions", body);
            assertEquals(text(reference), text(drafted), "stop " + stop);
            assertEquals(
                    reference.at("/choices/0/finish_reason").asText(),
                    drafted.at("/choices/0/finish_reason").asText());
            assertEquals(
                    reference.at("/usage/completion_tokens").asInt(),
                    drafted.at("/usage/completion_tokens").asInt());
            // A right draft left unchecked: the stop string ended the run at an accepted draft before it.
            if (drafted.at("/usage/completion_tokens_details/rejected_prediction_tokens")
                            .asInt()
                    > 0) {
                cutInsideRuns++;
            }
        }
        assertTrue(cutInsideRuns > 0, "no stop string ended an accepted run early");
    }

    @Test
    void streamedTextIsTheSameAndItsUsageCountsTheDrafts() throws Exception {
        String body =
                completion(20, "[]").replace("{", "{\"stream\":true,\"stream_options\":{\"include_usage\":true},");
        String reference = streamedText(given().port(plain.port())
                .contentType("application/json")
                .body(body)
                .post("/v1/completions")
                .asString());
        String events = given().port(drafting.port())
                .contentType("application/json")
                .body(body)
                .post("/v1/completions")
                .asString();
        assertEquals(reference, streamedText(events));
        assertEquals(text(post(plain, "/v1/completions", completion(20, "[]"))), reference);
        JsonNode usage = null;
        for (String line : events.lines().toList()) {
            if (line.startsWith("data: {") && line.contains("\"usage\"")) {
                usage = JSON.readTree(line.substring(6)).get("usage");
            }
        }
        assertTrue(usage != null, events);
        assertEquals(
                12,
                usage.at("/completion_tokens_details/accepted_prediction_tokens")
                        .asInt());
    }

    @Test
    void sampledTextWithASeedIsTheSameWithDrafts() throws Exception {
        String body = """
                {"prompt":"%s","temperature":0.9,"top_k":40,"seed":3,"max_tokens":20,"frequency_penalty":0.3,
                 "logit_bias":{"5":2.5}}""".formatted(PROMPT);
        JsonNode reference = post(plain, "/v1/completions", body);
        JsonNode drafted = post(drafting, "/v1/completions", body);
        assertEquals(text(reference), text(drafted));
        assertEquals(
                reference.at("/usage/completion_tokens").asInt(),
                drafted.at("/usage/completion_tokens").asInt());
        assertTrue(drafted.at("/usage/completion_tokens_details/accepted_prediction_tokens")
                        .asInt()
                > 0);
    }

    @Test
    void aJsonSchemaReplyIsTheSameWithDrafts() throws Exception {
        String body = """
                {"messages":[{"role":"user","content":"%s"}],"temperature":0,"max_tokens":40,
                 "chat_template_kwargs":{"enable_thinking":false},
                 "response_format":{"type":"json_schema","json_schema":{"name":"t","strict":true,"schema":
                   {"type":"object","properties":{"name":{"type":"string","maxLength":12},
                    "n":{"type":"integer","minimum":0,"maximum":99}},"required":["name","n"],
                    "additionalProperties":false}}}}""".formatted(PROMPT);
        JsonNode reference = post(plain, "/v1/chat/completions", body);
        JsonNode drafted = post(drafting, "/v1/chat/completions", body);
        String content = reference.at("/choices/0/message/content").asText();
        assertEquals(content, drafted.at("/choices/0/message/content").asText());
        JSON.readTree(content); // the grammar made it JSON
        assertTrue(drafted.at("/usage/completion_tokens_details/accepted_prediction_tokens")
                        .asInt()
                > 0);
    }

    @Test
    void metricsCountWhatTheUsageReports() throws Exception {
        PrometheusText before = metrics(drafting);
        JsonNode drafted = post(drafting, "/v1/responses", """
                {"input":"%s","temperature":0,"max_output_tokens":15}""".formatted(PROMPT));
        JsonNode details = drafted.at("/usage/output_tokens_details");
        int accepted = details.get("accepted_prediction_tokens").asInt();
        int rejected = details.get("rejected_prediction_tokens").asInt();
        PrometheusText after = metrics(drafting);
        assertEquals(accepted + rejected, delta(before, after, "glimmer_draft_tokens_total"));
        assertEquals(accepted, delta(before, after, "glimmer_draft_tokens_accepted_total"));
        assertEquals(accepted + rejected, delta(before, after, "vllm:spec_decode_num_draft_tokens_total"));
        assertEquals(accepted, delta(before, after, "vllm:spec_decode_num_accepted_tokens_total"));
        // Up to two drafts per speculative step.
        double steps = delta(before, after, "glimmer_speculative_steps_total");
        assertTrue(steps >= (accepted + rejected) / 2.0 && steps <= accepted + rejected, steps + " steps");
        assertTrue(accepted + rejected > 0);
    }

    @Test
    void byDefaultAModelWithTheBlockDraftsAndAConversationStopsWhenItsDraftsAreNeverAccepted() throws Exception {
        Map<Integer, Integer> ownFed = new ConcurrentHashMap<>();
        GlimmerApp own = GlimmerApp.start(
                TestServer.config(Map.of("model.path", model.toString())),
                Map.of(),
                wrapped(pool -> new Recording(pool, ownFed)),
                Drafting.Use.WHILE_PAYING);
        own.awaitLoaded();
        try {
            List<Integer> prompt = new ArrayList<>();
            given().port(own.port())
                    .contentType("application/json")
                    .body(JSON.writeValueAsString(Map.of("content", PROMPT)))
                    .post("/tokenize")
                    .then()
                    .statusCode(200)
                    .extract()
                    .jsonPath()
                    .getList("tokens", Integer.class)
                    .forEach(prompt::add);
            JsonNode first = post(own, "/v1/completions", turn(prompt, 200));
            assertEquals(200, first.at("/usage/completion_tokens").asInt());
            JsonNode details = first.at("/usage/completion_tokens_details");
            int accepted = details.get("accepted_prediction_tokens").asInt();
            int drafted = accepted + details.get("rejected_prediction_tokens").asInt();
            assertTrue(drafted > 0, "drafts by default");
            // Random weights: the drafter is (almost) never right. Two steps measure what a speculative step costs,
            // at most 9 more fill the window while the published acceptance is believed, then a probe after 16 plain
            // steps, 32, 64: at most 2 + 9 + 3 drafts in 200 tokens, a few more for the odd accepted draft.
            assertTrue(drafted <= 14 + 3 * accepted, drafted + " drafted, " + accepted + " accepted");

            // The same conversation goes on (its cache holds the prompt and all but the last token generated): its
            // drafting goes on too, with a probe only after 128 more steps, where a new conversation would probe
            // after 16 and 48.
            List<Integer> followUp = new ArrayList<>(prompt);
            for (int p = prompt.size(); p < prompt.size() + 199; p++) {
                followUp.add(ownFed.get(p));
            }
            followUp.add(prompt.getFirst());
            JsonNode second = post(own, "/v1/completions", turn(followUp, 100));
            assertEquals(
                    followUp.size() - 1,
                    second.at("/usage/prompt_tokens_details/cached_tokens").asInt());
            JsonNode later = second.at("/usage/completion_tokens_details");
            int acceptedLater = later.get("accepted_prediction_tokens").asInt();
            int draftedLater =
                    acceptedLater + later.get("rejected_prediction_tokens").asInt();
            assertTrue(
                    draftedLater <= 1 + 3 * acceptedLater, draftedLater + " drafted, " + acceptedLater + " accepted");

            // Sampled with a seed: the same text as without drafts, whenever the switch drafted.
            String sampled = """
                    {"prompt":"%s","temperature":1.0,"seed":11,"max_tokens":60,"ignore_eos":true}""".formatted(PROMPT);
            assertEquals(text(post(plain, "/v1/completions", sampled)), text(post(own, "/v1/completions", sampled)));
        } finally {
            own.close();
        }
    }

    /** A greedy completion of {@code prompt}'s token ids, {@code maxTokens} long whatever the model picks. */
    private static String turn(List<Integer> prompt, int maxTokens) throws Exception {
        return JSON.writeValueAsString(
                Map.of("prompt", prompt, "temperature", 0, "max_tokens", maxTokens, "ignore_eos", true));
    }

    @Test
    void draftMtpOnAModelWithoutTheBlockIsRefusedWithAClearMessage() {
        GlimmerApp app = TestServer.start(Map.of("inference.draft", "mtp"));
        try {
            ModelHost.Failed failed =
                    assertInstanceOf(ModelHost.Failed.class, app.host().state());
            assertTrue(
                    failed.reason().contains("--draft mtp") && failed.reason().contains("no NextN"), failed.reason());
        } finally {
            app.close();
        }
    }

    private static String completion(int maxTokens, String stop) {
        return """
                {"prompt":"%s","temperature":0,"max_tokens":%d,"stop":%s}""".formatted(PROMPT, maxTokens, stop);
    }

    private static JsonNode post(GlimmerApp app, String path, String body) throws Exception {
        String answer = given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .extract()
                .asString();
        return JSON.readTree(answer);
    }

    private static String text(JsonNode completion) {
        return completion.at("/choices/0/text").asText();
    }

    private static String streamedText(String events) throws Exception {
        StringBuilder text = new StringBuilder();
        for (String line : events.lines().toList()) {
            if (line.startsWith("data: {")) {
                JsonNode chunk = JSON.readTree(line.substring(6));
                if (chunk.at("/choices/0/text").isTextual()) {
                    text.append(chunk.at("/choices/0/text").asText());
                }
            }
        }
        return text.toString();
    }

    private static PrometheusText metrics(GlimmerApp app) {
        return PrometheusText.parse(given().port(app.port()).get("/metrics").asString());
    }

    private static double delta(PrometheusText before, PrometheusText after, String name) {
        return sum(after, name) - sum(before, name);
    }

    private static double sum(PrometheusText scrape, String name) {
        return scrape.samples().stream()
                .filter(s -> s.name().equals(name))
                .mapToDouble(PrometheusText.Sample::value)
                .sum();
    }

    /** The CPU backend as the server would choose it, its pools wrapped by {@code wrap}. */
    private static BackendChooser wrapped(java.util.function.Function<SequencePool, SequencePool> wrap) {
        return (requested, model, cpu) -> {
            BackendChoice real = Backends.choose(BackendKind.CPU, model, cpu);
            return new BackendChoice(real.kind(), real.reason(), real.selfTest(), new SequencePools() {
                @Override
                public SequencePool pool(int slots, int capacity) {
                    return wrap.apply(real.pools().pool(slots, capacity));
                }

                @Override
                public long bytesPerSequence(int capacity) {
                    return real.pools().bytesPerSequence(capacity);
                }

                @Override
                public void close() {
                    real.close();
                }
            });
        };
    }

    /**
     * A pool that notes into {@code into} the token each decode step feeds at each position, the drafts of a
     * speculative step too: a rejected draft's position is noted again by the next step, which feeds there.
     */
    private static final class Recording extends Delegating {
        private final Map<Integer, Integer> into;

        Recording(SequencePool pool, Map<Integer, Integer> into) {
            super(pool);
            this.into = into;
        }

        @Override
        public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
            for (int i = 0; i < tokens.length; i++) {
                into.put(sequences.get(i).position(), tokens[i]);
            }
            return pool.launch(sequences, tokens, readouts);
        }

        @Override
        public Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
            int position = sequence.position();
            Speculation speculation = pool.speculate(sequence, token, drafts, readout, filter);
            into.put(position, token);
            for (int i = 0; i < speculation.drafts().length; i++) {
                into.put(position + 1 + i, speculation.drafts()[i]);
            }
            return speculation;
        }
    }

    /** The drafting server's pool: each draft replaced by the token the plain server fed at its position. */
    private static final class Oracle extends Delegating {
        Oracle(SequencePool pool) {
            super(pool);
        }

        @Override
        public Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
            return pool.speculate(sequence, token, drafts, readout, (position, drafted) -> {
                for (int i = 0; i < drafted.length; i++) {
                    drafted[i] = fed.getOrDefault(position + i, drafted[i]);
                }
            });
        }
    }

    /** A pool that runs everything on another. */
    private abstract static class Delegating implements SequencePool {
        final SequencePool pool;

        Delegating(SequencePool pool) {
            this.pool = pool;
        }

        @Override
        public Sequence open() {
            return pool.open();
        }

        @Override
        public int slots() {
            return pool.slots();
        }

        @Override
        public int capacity() {
            return pool.capacity();
        }

        @Override
        public long bytesPerSequence() {
            return pool.bytesPerSequence();
        }

        @Override
        public int inUse() {
            return pool.inUse();
        }

        @Override
        public long bytes() {
            return pool.bytes();
        }

        @Override
        public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
            return pool.prompt(sequence, tokens, from, count, readout);
        }

        @Override
        public Next[] prompts(
                List<Sequence> sequences, List<int[]> tokens, int[] from, int[] counts, Readout[] readouts) {
            return pool.prompts(sequences, tokens, from, counts, readouts);
        }

        @Override
        public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
            return pool.promptLogits(sequence, tokens, from, count);
        }

        @Override
        public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
            return pool.launch(sequences, tokens, readouts);
        }

        @Override
        public int maxDrafts() {
            return pool.maxDrafts();
        }

        @Override
        public Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
            return pool.speculate(sequence, token, drafts, readout, filter);
        }

        @Override
        public long bytesPerPosition() {
            return pool.bytesPerPosition();
        }

        @Override
        public String kvLayout() {
            return pool.kvLayout();
        }

        @Override
        public void exportPrefix(Sequence sequence, int n, MemorySegment into) {
            pool.exportPrefix(sequence, n, into);
        }

        @Override
        public void importPrefix(Sequence sequence, MemorySegment from, int n) {
            pool.importPrefix(sequence, from, n);
        }

        @Override
        public void copyPrefix(Sequence from, Sequence to, int n) {
            pool.copyPrefix(from, to, n);
        }

        @Override
        public void close() {
            pool.close();
        }
    }
}
