package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.anthropic.models.messages.ContentBlock;
import com.anthropic.models.messages.Message;
import com.anthropic.models.messages.MessageCreateParams;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionTokenLogprob;
import io.restassured.path.json.JsonPath;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Protocol details that clients of any OpenAI-compatible server rely on, through the official SDKs
 * against a real server with the tiny model: several choices ({@code n}), a final assistant message
 * continued (a prefill), and log-probabilities that describe the reply's tokens, not the reasoning's.
 */
class ChoicesPrefillLogprobsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String QUESTION = "Tell me a story about a fox.";

    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of(), "none");

    static ChatCompletionCreateParams.Builder ask(int maxTokens) {
        return ChatCompletionCreateParams.builder()
                .model("m")
                .addUserMessage(QUESTION)
                .temperature(1.0)
                .maxCompletionTokens(maxTokens)
                .putAdditionalBodyProperty("chat_template_kwargs", JsonValue.from(Map.of("enable_thinking", false)));
    }

    static String content(ChatCompletion.Choice choice) {
        return choice.message().content().orElse("");
    }

    // ---- n ----

    /** Choice i of a seeded request is what a request of one choice with seed + i gives: sampled on its own. */
    @Test
    void severalChatChoicesAreIndependentSamples() {
        ChatCompletion three =
                server.openai().chat().completions().create(ask(8).n(3).seed(40).build());
        assertEquals(3, three.choices().size());
        for (int i = 0; i < 3; i++) {
            ChatCompletion.Choice choice = three.choices().get(i);
            assertEquals(i, choice.index());
            assertEquals(ChatCompletion.Choice.FinishReason.LENGTH, choice.finishReason());
            ChatCompletion one = server.openai()
                    .chat()
                    .completions()
                    .create(ask(8).seed(40 + i).build());
            assertEquals(content(one.choices().getFirst()), content(choice), "choice " + i);
        }
        assertNotEquals(content(three.choices().get(0)), content(three.choices().get(1)));
        assertEquals(3 * 8, three.usage().orElseThrow().completionTokens(), "usage counts every choice");
    }

    @Test
    void streamedChoicesCarryTheirIndex() {
        ChatCompletion whole =
                server.openai().chat().completions().create(ask(6).n(2).seed(7).build());
        Map<Long, StringBuilder> texts = new HashMap<>();
        Map<Long, String> reasons = new HashMap<>();
        List<Long> usage = new ArrayList<>();
        try (StreamResponse<ChatCompletionChunk> stream = server.openai()
                .chat()
                .completions()
                .createStreaming(ask(6).n(2)
                        .seed(7)
                        .streamOptions(com.openai.models.chat.completions.ChatCompletionStreamOptions.builder()
                                .includeUsage(true)
                                .build())
                        .build())) {
            stream.stream().forEach(chunk -> {
                chunk.usage().ifPresent(u -> usage.add(u.completionTokens()));
                chunk.choices().forEach(c -> {
                    c.delta()
                            .content()
                            .ifPresent(t -> texts.computeIfAbsent(c.index(), k -> new StringBuilder())
                                    .append(t));
                    c.finishReason().ifPresent(r -> reasons.put(c.index(), r.asString()));
                });
            });
        }
        assertEquals(Map.of(0L, "length", 1L, "length"), reasons);
        for (int i = 0; i < 2; i++) {
            assertEquals(content(whole.choices().get(i)), texts.get((long) i).toString(), "choice " + i);
        }
        assertEquals(List.of(12L), usage);
    }

    @Test
    void severalCompletionChoicesPerPrompt() {
        JsonPath two = post(
                "/v1/completions",
                Map.of("prompt", List.of("Once upon", "A fox"), "n", 2, "seed", 3, "max_tokens", 5, "temperature", 1));
        assertEquals(List.of(0, 1, 2, 3), two.getList("choices.index"));
        int tokens = 0;
        for (int p = 0; p < 2; p++) {
            for (int i = 0; i < 2; i++) {
                JsonPath one = post(
                        "/v1/completions",
                        Map.of(
                                "prompt",
                                p == 0 ? "Once upon" : "A fox",
                                "seed",
                                3 + i,
                                "max_tokens",
                                5,
                                "temperature",
                                1));
                String at = "choices[" + (p * 2 + i) + "]";
                assertEquals(one.getString("choices[0].text"), two.getString(at + ".text"), at);
                assertEquals(one.getString("choices[0].finish_reason"), two.getString(at + ".finish_reason"), at);
                tokens += one.getInt("usage.completion_tokens");
            }
        }
        assertEquals(tokens, two.getInt("usage.completion_tokens"), "usage counts every choice");
    }

    @Test
    void nIsBounded() {
        for (int n : new int[] {0, 9}) {
            JsonPath error = given().port(server.app().port())
                    .contentType("application/json")
                    .body(Map.of("messages", List.of(Map.of("role", "user", "content", "hi")), "n", n))
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(400)
                    .extract()
                    .jsonPath();
            assertEquals("n", error.getString("error.param"));
            assertTrue(error.getString("error.message").contains("between 1 and 8"), error.prettify());
        }
        JsonPath error = given().port(server.app().port())
                .contentType("application/json")
                .body(Map.of("prompt", List.of("a", "b", "c"), "n", 6))
                .post("/v1/completions")
                .then()
                .statusCode(400)
                .extract()
                .jsonPath();
        assertEquals("n", error.getString("error.param"));
    }

    // ---- a final assistant message is continued ----

    /** The greedy continuation of the rendered conversation: what a prefilled reply must be. */
    static String rawContinuation(List<Map<String, Object>> messages, boolean thinking, int maxTokens) {
        String prompt = post(
                        "/apply-template",
                        Map.of(
                                "messages",
                                messages,
                                "add_generation_prompt",
                                false,
                                "chat_template_kwargs",
                                Map.of("enable_thinking", thinking)))
                .getString("prompt");
        return post("/v1/completions", Map.of("prompt", prompt, "max_tokens", maxTokens, "temperature", 0))
                .getString("choices[0].text");
    }

    @Test
    void chatContinuesAFinalAssistantMessage() {
        List<Map<String, Object>> messages = List.of(
                Map.of("role", "user", "content", QUESTION),
                Map.of("role", "assistant", "content", "Once upon a time, a fox"));
        // Thinking on: the prefill is past the reasoning, so the continuation is content.
        JsonPath reply = post("/v1/chat/completions", Map.of("messages", messages, "max_tokens", 8, "temperature", 0));
        assertEquals(rawContinuation(messages, true, 8), reply.getString("choices[0].message.content"));
        assertEquals(null, reply.getString("choices[0].message.reasoning_content"));
        String prompt = post("/apply-template", Map.of("messages", messages, "add_generation_prompt", false))
                .getString("prompt");
        assertEquals(
                post("/tokenize", Map.of("content", prompt)).getList("tokens").size(),
                reply.getInt("usage.prompt_tokens"));
    }

    @Test
    void anthropicAssistantPrefillIsContinued() {
        Message m = server.anthropic()
                .messages()
                .create(MessageCreateParams.builder()
                        .model("m")
                        .maxTokens(8)
                        .putAdditionalBodyProperty("temperature", com.anthropic.core.JsonValue.from(0))
                        .addUserMessage(QUESTION)
                        .addAssistantMessage("Once upon a time, a fox")
                        .build());
        String text = m.content().stream()
                .filter(ContentBlock::isText)
                .map(b -> b.asText().text())
                .collect(Collectors.joining());
        assertEquals(
                rawContinuation(
                        List.of(
                                Map.of("role", "user", "content", QUESTION),
                                Map.of("role", "assistant", "content", "Once upon a time, a fox")),
                        false,
                        8),
                text);
    }

    @Test
    void aPrefillWithAJsonFormatIsA400() {
        JsonPath error = given().port(server.app().port())
                .contentType("application/json")
                .body(Map.of(
                        "messages",
                        List.of(Map.of("role", "user", "content", "hi"), Map.of("role", "assistant", "content", "{")),
                        "response_format",
                        Map.of("type", "json_object")))
                .post("/v1/chat/completions")
                .then()
                .statusCode(400)
                .extract()
                .jsonPath();
        assertTrue(error.getString("error.message").contains("continued"), error.prettify());
    }

    // ---- logprobs describe the reply ----

    /** With thinking on, the reasoning's tokens are not in logprobs.content: its tokens spell the content. */
    @Test
    void logprobsLeaveOutTheReasoning() {
        for (boolean thinking : new boolean[] {true, false}) {
            ChatCompletion c = server.openai()
                    .chat()
                    .completions()
                    .create(ask(12).seed(5)
                            .logprobs(true)
                            .topLogprobs(2)
                            .putAdditionalBodyProperty(
                                    "chat_template_kwargs", JsonValue.from(Map.of("enable_thinking", thinking)))
                            .build());
            ChatCompletion.Choice choice = c.choices().getFirst();
            List<ChatCompletionTokenLogprob> logprobs =
                    choice.logprobs().orElseThrow().content().orElseThrow();
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            logprobs.forEach(lp -> lp.bytes().orElseThrow().forEach(b -> bytes.write(b.intValue())));
            assertEquals(content(choice), bytes.toString(StandardCharsets.UTF_8), "thinking " + thinking);
            if (thinking) {
                assertTrue(
                        choice.message()._additionalProperties().containsKey("reasoning_content"), "the model thought");
            } else {
                assertEquals(12, logprobs.size());
            }
        }
    }

    @Test
    void streamedLogprobsLeaveOutTheReasoning() throws Exception {
        String body = given().port(server.app().port())
                .contentType("application/json")
                .body(Map.of(
                        "messages",
                        List.of(Map.of("role", "user", "content", QUESTION)),
                        "max_tokens",
                        12,
                        "seed",
                        5,
                        "logprobs",
                        true,
                        "stream",
                        true))
                .post("/v1/chat/completions")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        StringBuilder content = new StringBuilder();
        ByteArrayOutputStream spelled = new ByteArrayOutputStream();
        boolean reasoned = false;
        for (String frame : body.split("\n\n")) {
            if (!frame.startsWith("data: {")) {
                continue;
            }
            JsonNode choice = JSON.readTree(frame.substring("data: ".length()))
                    .path("choices")
                    .path(0);
            reasoned |= choice.path("delta").has("reasoning_content");
            content.append(choice.path("delta").path("content").asText(""));
            for (JsonNode lp : choice.path("logprobs").path("content")) {
                lp.path("bytes").forEach(b -> spelled.write(b.intValue()));
            }
        }
        assertTrue(reasoned, body);
        assertEquals(content.toString(), spelled.toString(StandardCharsets.UTF_8));
    }

    static JsonPath post(String path, Object body) {
        return given().port(server.app().port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }
}
