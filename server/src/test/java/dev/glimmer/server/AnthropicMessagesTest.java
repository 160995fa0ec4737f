package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.anthropic.core.JsonValue;
import com.anthropic.core.http.StreamResponse;
import com.anthropic.errors.BadRequestException;
import com.anthropic.helpers.MessageAccumulator;
import com.anthropic.models.messages.ContentBlock;
import com.anthropic.models.messages.ContentBlockParam;
import com.anthropic.models.messages.Message;
import com.anthropic.models.messages.MessageContentParam;
import com.anthropic.models.messages.MessageCountTokensParams;
import com.anthropic.models.messages.MessageCreateParams;
import com.anthropic.models.messages.RawMessageStreamEvent;
import com.anthropic.models.messages.StopReason;
import com.anthropic.models.messages.Tool;
import com.anthropic.models.messages.ToolResultBlockParam;
import com.anthropic.models.messages.ToolUseBlock;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.restassured.path.json.JsonPath;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code /v1/messages} through the official Anthropic Java SDK against a real server with the tiny
 * model: the same generation as chat completions, whole and streamed, thinking on and off, a tool
 * round trip, stop sequences, token counting and Anthropic-shaped errors.
 */
class AnthropicMessagesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String STORY = "Hello, world! Tell me a story about a fox.";

    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of("server.api-key", "sesame"), "sesame");

    static MessageCreateParams.Builder story() {
        return MessageCreateParams.builder()
                .model("claude-any")
                .maxTokens(10)
                .putAdditionalBodyProperty("temperature", JsonValue.from(0))
                .addUserMessage(STORY);
    }

    /** Without thinking, greedy output is the chat completion's content with thinking off, in one text block. */
    @Test
    void wholeMessageIsTheChatCompletion() {
        Message m = server.anthropic().messages().create(story().build());
        JsonPath chat = chat(Map.of(
                "messages",
                List.of(Map.of("role", "user", "content", STORY)),
                "temperature",
                0,
                "max_tokens",
                10,
                "chat_template_kwargs",
                Map.of("enable_thinking", false)));
        assertEquals(1, m.content().size());
        assertEquals(
                chat.getString("choices[0].message.content"),
                m.content().getFirst().asText().text());
        assertEquals(StopReason.MAX_TOKENS, m.stopReason().orElseThrow());
        assertEquals(10, m.usage().outputTokens());
        assertEquals(
                chat.getInt("usage.prompt_tokens"),
                m.usage().inputTokens() + m.usage().cacheReadInputTokens().orElseThrow());
        assertEquals("tiny-f32", m.model().asString());
    }

    /** thinking enabled: a thinking block with the chat completion's reasoning_content comes first. */
    @Test
    void thinkingBlock() {
        Message m = server.anthropic()
                .messages()
                .create(story().enabledThinking(1024).build());
        JsonPath chat = chat(Map.of(
                "messages", List.of(Map.of("role", "user", "content", STORY)), "temperature", 0, "max_tokens", 10));
        assertTrue(m.content().getFirst().isThinking());
        assertEquals(
                chat.getString("choices[0].message.reasoning_content"),
                m.content().getFirst().asThinking().thinking());
    }

    /** The streamed events rebuild the whole message (the SDK's accumulator) in the documented order. */
    @Test
    void streamedMessageHasTheDocumentedEvents() throws Exception {
        Message whole = server.anthropic()
                .messages()
                .create(story().enabledThinking(1024).build());
        MessageAccumulator accumulator = MessageAccumulator.create();
        try (StreamResponse<RawMessageStreamEvent> stream = server.anthropic()
                .messages()
                .createStreaming(story().enabledThinking(1024).build())) {
            stream.stream().forEach(accumulator::accumulate);
        }
        Message streamed = accumulator.message();
        assertEquals(text(whole), text(streamed));
        assertEquals(
                whole.content().getFirst().asThinking().thinking(),
                streamed.content().getFirst().asThinking().thinking());
        assertEquals(StopReason.MAX_TOKENS, streamed.stopReason().orElseThrow());
        assertEquals(whole.usage().outputTokens(), streamed.usage().outputTokens());

        String body = given().port(server.app().port())
                .header("x-api-key", "sesame")
                .contentType("application/json")
                .body(Map.of(
                        "messages",
                        List.of(Map.of("role", "user", "content", STORY)),
                        "max_tokens",
                        10,
                        "temperature",
                        0,
                        "stream",
                        true,
                        "thinking",
                        Map.of("type", "enabled", "budget_tokens", 1024)))
                .post("/v1/messages")
                .then()
                .statusCode(200)
                .contentType("text/event-stream")
                .extract()
                .asString();
        List<String> types = new ArrayList<>();
        for (String frame : body.split("\n\n")) {
            String[] lines = frame.split("\n");
            assertEquals(2, lines.length, frame);
            JsonNode data = JSON.readTree(lines[1].substring("data: ".length()));
            assertEquals("event: " + data.path("type").asText(), lines[0]);
            if (!types.isEmpty() && types.getLast().equals(data.path("type").asText())) {
                continue; // one entry per run of deltas
            }
            types.add(data.path("type").asText());
        }
        List<String> thinkingBlock = List.of("content_block_start", "content_block_delta", "content_block_stop");
        assertEquals(List.of("message_start", "ping"), types.subList(0, 2));
        assertEquals(thinkingBlock, types.subList(2, 5));
        assertEquals(List.of("message_delta", "message_stop"), types.subList(types.size() - 2, types.size()));
    }

    /**
     * A streamed message's usage is the same in message_start and in the final message_delta: input and
     * cached tokens are known when message_start is sent (here a repeated prompt, most of it cached).
     */
    @Test
    void streamedUsageAgreesFromStartToEnd() throws Exception {
        Map<String, Object> request = Map.of(
                "messages",
                List.of(Map.of("role", "user", "content", STORY + " Again.")),
                "max_tokens",
                3,
                "temperature",
                0,
                "stream",
                true);
        for (int round = 0; round < 2; round++) {
            String body = given().port(server.app().port())
                    .header("x-api-key", "sesame")
                    .contentType("application/json")
                    .body(request)
                    .post("/v1/messages")
                    .then()
                    .statusCode(200)
                    .extract()
                    .asString();
            JsonNode start = null;
            JsonNode end = null;
            for (String frame : body.split("\n\n")) {
                if (frame.startsWith("event: message_start")) {
                    start = JSON.readTree(frame.split("\n")[1].substring("data: ".length()))
                            .path("message")
                            .path("usage");
                } else if (frame.startsWith("event: message_delta")) {
                    end = JSON.readTree(frame.split("\n")[1].substring("data: ".length()))
                            .path("usage");
                }
            }
            assertTrue(start != null && end != null, body);
            assertEquals(end.path("input_tokens"), start.path("input_tokens"), body);
            assertEquals(end.path("cache_read_input_tokens"), start.path("cache_read_input_tokens"), body);
            if (round == 1) {
                assertTrue(start.path("cache_read_input_tokens").asInt() > 0, "the repeated prompt is cached: " + body);
            }
        }
    }

    static final Tool WEATHER = Tool.builder()
            .name("z")
            .description("the weather")
            .inputSchema(Tool.InputSchema.builder()
                    .properties(JsonValue.from(Map.of()))
                    .build())
            .build();

    /** A use of tool z, forced with logit_bias as in {@link ResponsesApiTest#forcedToolCall}. */
    static MessageCreateParams.Builder forcedToolUse() {
        List<Integer> tags = OpenAiClientTest.tokens(
                "<tool_call></tool_call><|observation|>", server.app().port());
        int name = OpenAiClientTest.tokens("z", server.app().port()).getFirst();
        return MessageCreateParams.builder()
                .model("m")
                .maxTokens(20)
                .putAdditionalBodyProperty("temperature", JsonValue.from(0))
                .addUserMessage(ResponsesApiTest.WEATHER_QUESTION)
                .addTool(WEATHER)
                .putAdditionalBodyProperty(
                        "logit_bias",
                        JsonValue.from(Map.of(
                                tags.get(0).toString(),
                                100,
                                Integer.toString(name),
                                70,
                                tags.get(1).toString(),
                                40,
                                tags.get(2).toString(),
                                25)))
                .putAdditionalBodyProperty("repeat_penalty", JsonValue.from(8));
    }

    /** A streamed tool use: a tool_use block whose input arrives as input_json_delta, then stop_reason tool_use. */
    @Test
    void streamedToolUse() {
        MessageAccumulator accumulator = MessageAccumulator.create();
        List<String> deltas = new ArrayList<>();
        try (StreamResponse<RawMessageStreamEvent> stream =
                server.anthropic().messages().createStreaming(forcedToolUse().build())) {
            stream.stream().forEach(event -> {
                accumulator.accumulate(event);
                event.contentBlockDelta()
                        .ifPresent(d -> deltas.add(
                                JSON.valueToTree(d).path("delta").path("type").asText()));
            });
        }
        Message m = accumulator.message();
        assertEquals(StopReason.TOOL_USE, m.stopReason().orElseThrow());
        ToolUseBlock use = m.content().getFirst().asToolUse();
        assertEquals("z", use.name());
        assertEquals(JsonValue.from(Map.of()), use._input());
        assertTrue(deltas.contains("input_json_delta"), deltas.toString());
    }

    /**
     * A tool round trip: the call is forced with logit_bias (as in OpenAiClientTest), the SDK sends the
     * assistant message back with a tool_result, and the prompt is the chat template's rendering of
     * the same conversation, mostly from the KV cache.
     */
    @Test
    void toolRoundTrip() {
        String question = ResponsesApiTest.WEATHER_QUESTION;
        Message call = server.anthropic().messages().create(forcedToolUse().build());
        assertEquals(StopReason.TOOL_USE, call.stopReason().orElseThrow());
        ToolUseBlock use = call.content().stream()
                .filter(ContentBlock::isToolUse)
                .map(ContentBlock::asToolUse)
                .findFirst()
                .orElseThrow();
        assertEquals("z", use.name());
        assertEquals(JsonValue.from(Map.of()), use._input());

        Message answer = server.anthropic()
                .messages()
                .create(MessageCreateParams.builder()
                        .model("m")
                        .maxTokens(3)
                        .putAdditionalBodyProperty("temperature", JsonValue.from(0))
                        .addUserMessage(question)
                        .addTool(WEATHER)
                        .addMessage(call.toParam())
                        .addUserMessage(MessageContentParam.ofContentBlockParams(
                                List.of(ContentBlockParam.ofToolResult(ToolResultBlockParam.builder()
                                        .toolUseId(use.id())
                                        .content("Sunny, 21 degrees.")
                                        .build()))))
                        .build());
        Object tool = ResponsesApiTest.WEATHER_AS_CHAT_TOOL;
        String prompt = post(
                        "/apply-template",
                        Map.of(
                                "messages",
                                List.of(
                                        Map.of("role", "user", "content", question),
                                        Map.of(
                                                "role",
                                                "assistant",
                                                "content",
                                                "",
                                                "tool_calls",
                                                List.of(Map.of(
                                                        "id",
                                                        use.id(),
                                                        "type",
                                                        "function",
                                                        "function",
                                                        Map.of("name", "z", "arguments", "{}")))),
                                        Map.of(
                                                "role",
                                                "tool",
                                                "tool_call_id",
                                                use.id(),
                                                "content",
                                                "Sunny, 21 degrees.")),
                                "tools",
                                List.of(tool),
                                "chat_template_kwargs",
                                Map.of("enable_thinking", false)))
                .getString("prompt");
        int expected =
                post("/tokenize", Map.of("content", prompt)).getList("tokens").size();
        long cached = answer.usage().cacheReadInputTokens().orElseThrow();
        assertEquals(expected, answer.usage().inputTokens() + cached);
        assertTrue(
                cached
                        >= call.usage().inputTokens()
                                + call.usage().cacheReadInputTokens().orElseThrow(),
                "the first exchange comes from the cache");
    }

    /** A stop sequence ends the text before it and is reported. */
    @Test
    void stopSequence() {
        String text =
                text(server.anthropic().messages().create(story().maxTokens(16).build()));
        String stop = text.substring(text.length() / 2, text.length() / 2 + 2);
        Message m = server.anthropic()
                .messages()
                .create(story().maxTokens(16).addStopSequence(stop).build());
        assertEquals(StopReason.STOP_SEQUENCE, m.stopReason().orElseThrow());
        assertEquals(stop, m.stopSequence().orElseThrow());
        assertEquals(text.substring(0, text.indexOf(stop)), text(m));
    }

    @Test
    void countTokens() {
        long counted = server.anthropic()
                .messages()
                .countTokens(MessageCountTokensParams.builder()
                        .model("m")
                        .system("Be brief.")
                        .addUserMessage(STORY)
                        .build())
                .inputTokens();
        Message m =
                server.anthropic().messages().create(story().system("Be brief.").build());
        assertEquals(m.usage().inputTokens() + m.usage().cacheReadInputTokens().orElseThrow(), counted);
    }

    /** Tools are rendered into the prompt; tool_choice none leaves them out (as chat's tool_choice none does). */
    @Test
    void toolChoiceNoneLeavesTheToolsOut() {
        MessageCountTokensParams.Builder base =
                MessageCountTokensParams.builder().model("m").addUserMessage(STORY);
        long plain = server.anthropic().messages().countTokens(base.build()).inputTokens();
        long withTools = server.anthropic()
                .messages()
                .countTokens(base.addTool(WEATHER).build())
                .inputTokens();
        long none = server.anthropic()
                .messages()
                .countTokens(base.toolChoice(com.anthropic.models.messages.ToolChoiceNone.builder()
                                .build())
                        .build())
                .inputTokens();
        assertTrue(withTools > plain);
        assertEquals(plain, none);
    }

    /** Mistakes get a 400 in Anthropic's error shape, through the SDK and on the wire. */
    @Test
    void badBodiesAre400sInAnthropicsShape() {
        BadRequestException e = assertThrows(
                BadRequestException.class,
                () -> server.anthropic()
                        .messages()
                        .create(MessageCreateParams.builder()
                                .model("m")
                                .maxTokens(10)
                                .addUserMessage(STORY)
                                .putAdditionalBodyProperty("temperature", JsonValue.from(-1))
                                .build()));
        assertTrue(e.getMessage().contains("temperature"), e.getMessage());

        assertError(Map.of("messages", List.of(Map.of("role", "user", "content", "hi"))), "max_tokens");
        assertError(Map.of("max_tokens", 5), "messages");
        assertError(Map.of("max_tokens", 5, "messages", List.of(Map.of("role", "system", "content", "hi"))), "role");
        assertError(
                Map.of(
                        "max_tokens",
                        5,
                        "messages",
                        List.of(Map.of(
                                "role", "user", "content", List.of(Map.of("type", "image", "source", Map.of()))))),
                "image");
        assertError(
                Map.of(
                        "max_tokens",
                        5,
                        "messages",
                        List.of(Map.of("role", "user", "content", "hi")),
                        "tools",
                        List.of(Map.of("type", "web_search_20250305", "name", "web_search"))),
                "web_search_20250305");
        assertError(
                Map.of(
                        "max_tokens",
                        5,
                        "messages",
                        List.of(Map.of("role", "user", "content", "hi")),
                        "thinking",
                        Map.of("type", "sometimes")),
                "thinking.type");
        given().port(server.app().port())
                .header("x-api-key", "wrong")
                .contentType("application/json")
                .body(Map.of("max_tokens", 5, "messages", List.of(Map.of("role", "user", "content", "hi"))))
                .post("/v1/messages")
                .then()
                .statusCode(401)
                .body("type", org.hamcrest.Matchers.equalTo("error"))
                .body("error.type", org.hamcrest.Matchers.equalTo("authentication_error"));
    }

    private static void assertError(Map<String, Object> body, String mentioned) {
        JsonPath error = given().port(server.app().port())
                .header("x-api-key", "sesame")
                .contentType("application/json")
                .body(body)
                .post("/v1/messages")
                .then()
                .statusCode(400)
                .extract()
                .jsonPath();
        assertEquals("error", error.getString("type"), error.prettify());
        assertEquals("invalid_request_error", error.getString("error.type"), error.prettify());
        assertTrue(error.getString("error.message").contains(mentioned), mentioned + " in " + error.prettify());
        assertFalse(error.prettify().contains("\"param\""));
    }

    static String text(Message m) {
        StringBuilder text = new StringBuilder();
        m.content().stream()
                .filter(ContentBlock::isText)
                .forEach(b -> text.append(b.asText().text()));
        return text.toString();
    }

    private static JsonPath chat(Map<String, Object> body) {
        return post("/v1/chat/completions", body);
    }

    private static JsonPath post(String path, Object body) {
        return given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }
}
