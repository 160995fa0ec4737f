package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.restassured.path.json.JsonPath;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Three conversations with one long system prompt sent at the same moment (an agent starting its sub-agents): none
 * finds the prefix computed when it is admitted, but prompts are computed one after another, so the first computes
 * the shared prefix and the other two copy it when their turn comes. The prefix is computed once: the cached tokens
 * add up to twice the shared prefix, and the answers are those the prompts get one at a time. The other two's own
 * parts (a few tokens each) are computed together, in one prompt pass.
 */
class SharedPrefixAtOnceTest {
    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "2048", "inference.prompt-chunk", "32", "inference.parallel", "3"));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    @Test
    void conversationsSentTogetherComputeTheirSharedPrefixOnce() throws Exception {
        List<Integer> system = new ArrayList<>();
        // long enough that the first keeps computing it (38 passes of 32) well after the other two have arrived
        while (system.size() < 1200) {
            system.addAll(
                    PrefixSharingTest.tokenize(app.port(), "You are a careful coding agent. Read the files first. "));
        }
        List<List<Integer>> prompts = new ArrayList<>();
        for (String task : List.of("Fix the parser.", "Write the docs.", "Review the tests.")) {
            List<Integer> prompt = new ArrayList<>(system);
            prompt.addAll(PrefixSharingTest.tokenize(app.port(), "<|user|>" + task + "<|assistant|>"));
            prompts.add(prompt);
        }
        int shared = 0;
        while (prompts.get(0).get(shared).equals(prompts.get(1).get(shared))
                && prompts.get(0).get(shared).equals(prompts.get(2).get(shared))) {
            shared++;
        }
        double savedBefore = savedTokens();

        List<JsonPath> together = new ArrayList<>();
        try (ExecutorService clients = Executors.newFixedThreadPool(prompts.size())) {
            CountDownLatch ready = new CountDownLatch(prompts.size());
            List<Future<JsonPath>> answers = new ArrayList<>();
            for (List<Integer> prompt : prompts) {
                answers.add(clients.submit(() -> {
                    // the three requests leave together, not as their threads happen to start
                    ready.countDown();
                    ready.await();
                    return complete(prompt);
                }));
            }
            for (Future<JsonPath> answer : answers) {
                together.add(answer.get());
            }
        }

        int cached = together.stream()
                .mapToInt(r -> r.getInt("usage.prompt_tokens_details.cached_tokens"))
                .sum();
        assertEquals(2 * shared, cached, "the shared prefix is computed by one request and copied by two");
        assertEquals(2.0 * shared, savedTokens() - savedBefore, "glimmer_prefix_tokens_saved_total");
        assertEquals(2.0, metric("glimmer_prompt_batch_size_max"), "the two followers' own parts in one pass");
        for (int i = 0; i < prompts.size(); i++) {
            assertEquals(
                    complete(prompts.get(i)).getString("choices[0].text"),
                    together.get(i).getString("choices[0].text"),
                    "request " + i + " answers as it does alone");
        }
    }

    private static JsonPath complete(List<Integer> prompt) {
        return given().port(app.port())
                .contentType("application/json")
                .body(Map.of("prompt", prompt, "max_tokens", 8, "temperature", 0))
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }

    /** A metric without labels from {@code /metrics}. */
    private static double metric(String name) {
        String metrics =
                given().port(app.port()).get("/metrics").then().extract().asString();
        Matcher m = Pattern.compile("(?m)^" + name + " ([0-9.E]+)$").matcher(metrics);
        if (!m.find()) {
            throw new AssertionError(name + " is not in /metrics");
        }
        return Double.parseDouble(m.group(1));
    }

    /** Prompt tokens copied from other conversations' caches so far ({@code /metrics}). */
    private static double savedTokens() {
        String metrics =
                given().port(app.port()).get("/metrics").then().extract().asString();
        Matcher m = Pattern.compile("glimmer_prefix_tokens_saved_total\\{source=\"conversation\"} ([0-9.E]+)")
                .matcher(metrics);
        return m.find() ? Double.parseDouble(m.group(1)) : 0;
    }
}
