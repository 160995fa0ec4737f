package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.errors.BadRequestException;
import com.openai.errors.NotFoundException;
import com.openai.helpers.ResponseAccumulator;
import com.openai.models.Reasoning;
import com.openai.models.ReasoningEffort;
import com.openai.models.responses.FunctionTool;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseFunctionToolCall;
import com.openai.models.responses.ResponseInputItem;
import com.openai.models.responses.ResponseOutputItem;
import com.openai.models.responses.ResponseStatus;
import com.openai.models.responses.ResponseStreamEvent;
import io.restassured.path.json.JsonPath;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code /v1/responses} through the official OpenAI Java SDK's Responses API against a real server
 * with the tiny model: the same generation as chat completions, whole and streamed, tools, stored
 * responses continued with {@code previous_response_id} from the KV cache, and errors.
 */
class ResponsesApiTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String STORY = "Hello, world! Tell me a story about a fox.";

    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of("server.api-key", "sesame"), "sesame");

    static ResponseCreateParams.Builder story() {
        return ResponseCreateParams.builder()
                .model("any-model-name")
                .input(STORY)
                .temperature(0.0)
                .maxOutputTokens(10);
    }

    /** Greedy output is the chat completion's: the reasoning item holds reasoning_content, the message the content. */
    @Test
    void wholeResponseIsTheChatCompletion() {
        Response r = server.openai().responses().create(story().build());
        JsonPath chat = post(
                "/v1/chat/completions",
                Map.of(
                        "messages",
                        List.of(Map.of("role", "user", "content", STORY)),
                        "temperature",
                        0,
                        "max_tokens",
                        10));
        assertEquals(ResponseStatus.INCOMPLETE, r.status().orElseThrow());
        assertEquals(
                "max_output_tokens",
                r.incompleteDetails().orElseThrow().reason().orElseThrow().asString());
        assertEquals("tiny-f32", r.model().asString());
        assertEquals(chat.getInt("usage.prompt_tokens"), r.usage().orElseThrow().inputTokens());
        assertEquals(10, r.usage().orElseThrow().outputTokens());
        assertEquals(chat.getString("choices[0].message.reasoning_content"), reasoning(r));
        assertEquals(chat.getString("choices[0].message.content"), text(r));
        assertTrue(r.usage().orElseThrow().outputTokensDetails().reasoningTokens() > 0);
    }

    /**
     * The stream's events rebuild the same response (the SDK's accumulator), carry consecutive
     * sequence numbers and name themselves in the SSE event line.
     */
    @Test
    void streamedResponseHasTheDocumentedEvents() throws Exception {
        Response whole = server.openai().responses().create(story().build());
        ResponseAccumulator accumulator = ResponseAccumulator.createWithSnapshots();
        List<String> types = new ArrayList<>();
        try (StreamResponse<ResponseStreamEvent> stream =
                server.openai().responses().createStreaming(story().build())) {
            stream.stream().forEach(event -> {
                accumulator.accumulate(event);
                types.add(JSON.valueToTree(event).path("type").asText());
            });
        }
        Response streamed = accumulator.response();
        assertEquals(reasoning(whole), reasoning(streamed));
        assertEquals(text(whole), text(streamed));
        assertEquals(reasoning(whole), reasoning(accumulator.reconstructedResponse()));
        assertEquals(
                List.of(
                        "response.created",
                        "response.in_progress",
                        "response.output_item.added",
                        "response.content_part.added"),
                types.subList(0, 4));
        assertEquals("response.reasoning_text.delta", types.get(4));
        assertEquals("response.incomplete", types.getLast());
        for (String type :
                List.of("response.reasoning_text.done", "response.content_part.done", "response.output_item.done")) {
            assertTrue(types.contains(type), type);
        }

        String body = given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .contentType("application/json")
                .body(Map.of("input", STORY, "temperature", 0, "max_output_tokens", 10, "stream", true))
                .post("/v1/responses")
                .then()
                .statusCode(200)
                .contentType("text/event-stream")
                .extract()
                .asString();
        int expected = 0;
        for (String frame : body.split("\n\n")) {
            if (frame.equals(": ping")) {
                continue;
            }
            String[] lines = frame.split("\n");
            assertEquals(2, lines.length, frame);
            JsonNode data = JSON.readTree(lines[1].substring("data: ".length()));
            assertEquals("event: " + data.path("type").asText(), lines[0]);
            assertEquals(expected++, data.path("sequence_number").asInt());
        }
        assertEquals(types.size(), expected);
    }

    /** instructions are a system message; reasoning effort none turns GLM's thinking off. */
    @Test
    void instructionsAndNoReasoning() {
        Response r = server.openai()
                .responses()
                .create(story().instructions("Answer briefly.")
                        .reasoning(
                                Reasoning.builder().effort(ReasoningEffort.NONE).build())
                        .build());
        assertTrue(r.output().stream().noneMatch(ResponseOutputItem::isReasoning));
        assertEquals(0, r.usage().orElseThrow().outputTokensDetails().reasoningTokens());
        int expected = promptTokens(Map.of(
                "messages",
                List.of(
                        Map.of("role", "system", "content", "Answer briefly."),
                        Map.of("role", "user", "content", STORY)),
                "chat_template_kwargs",
                Map.of("enable_thinking", false)));
        assertEquals(expected, r.usage().orElseThrow().inputTokens());
    }

    /**
     * A stored response is continued by id: the follow-up's prompt is the chat template's rendering
     * of the whole conversation with every turn's thinking kept, so it starts with the first
     * exchange token for token and the KV cache already holds it.
     */
    @Test
    void previousResponseIdContinuesFromTheCache() {
        Response first = server.openai().responses().create(story().build());
        Response second = server.openai()
                .responses()
                .create(ResponseCreateParams.builder()
                        .model("m")
                        .input("And then?")
                        .previousResponseId(first.id())
                        .temperature(0.0)
                        .maxOutputTokens(4)
                        .build());
        long firstInput = first.usage().orElseThrow().inputTokens();
        assertTrue(second.usage().orElseThrow().inputTokens() > firstInput);
        // Everything but the first response's last token, which was generated but never fed to the model.
        assertEquals(
                firstInput + first.usage().orElseThrow().outputTokens() - 1,
                second.usage().orElseThrow().inputTokensDetails().cachedTokens());
        int expected = promptTokens(Map.of(
                "messages",
                List.of(
                        Map.of("role", "user", "content", STORY),
                        Map.of("role", "assistant", "content", text(first), "reasoning_content", reasoning(first)),
                        Map.of("role", "user", "content", "And then?")),
                "chat_template_kwargs",
                Map.of("clear_thinking", false)));
        assertEquals(expected, second.usage().orElseThrow().inputTokens());

        assertEquals(text(second), text(server.openai().responses().retrieve(second.id())));
        server.openai().responses().delete(second.id());
        assertThrows(NotFoundException.class, () -> server.openai().responses().retrieve(second.id()));
        BadRequestException gone = assertThrows(
                BadRequestException.class,
                () -> server.openai()
                        .responses()
                        .create(ResponseCreateParams.builder()
                                .model("m")
                                .input("Again?")
                                .previousResponseId(second.id())
                                .build()));
        assertTrue(gone.getMessage().contains(second.id()), gone.getMessage());
        Response unstored =
                server.openai().responses().create(story().store(false).build());
        assertThrows(NotFoundException.class, () -> server.openai().responses().retrieve(unstored.id()));
    }

    static final String WEATHER_QUESTION = "Please tell me what the weather is like today, and then tell me once"
            + " more, in a long and polite answer with many words, as long as possible, with details about the clouds,"
            + " the rain, the sun, the temperature, the humidity, the wind and what people should wear when they go out.";
    static final FunctionTool WEATHER = FunctionTool.builder()
            .name("z")
            .description("the weather")
            .strict(false)
            .parameters(FunctionTool.Parameters.builder()
                    .putAdditionalProperty("type", JsonValue.from("object"))
                    .putAdditionalProperty("properties", JsonValue.from(Map.of()))
                    .build())
            .build();

    /**
     * {@link #WEATHER} as a chat completions tool, its keys in the order the translations write them
     * (the prompt shows the tool's JSON as given, so the order counts).
     */
    static final Object WEATHER_AS_CHAT_TOOL = parse("{\"type\":\"function\",\"function\":{\"name\":\"z\","
            + "\"description\":\"the weather\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}");

    /** {@code json} as plain maps and lists, which every JSON mapper RestAssured may pick writes the same way. */
    private static Object parse(String json) {
        try {
            return JSON.readValue(json, Object.class);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * A call of tool z, forced with logit_bias and a repetition penalty as in OpenAiClientTest:
     * {@code <tool_call>}, the tool's one-token name, {@code </tool_call>} and {@code <|observation|>}
     * in that order.
     */
    static ResponseCreateParams.Builder forcedToolCall() {
        List<Integer> tags = OpenAiClientTest.tokens(
                "<tool_call></tool_call><|observation|>", server.app().port());
        int name = OpenAiClientTest.tokens("z", server.app().port()).getFirst();
        return ResponseCreateParams.builder()
                .model("m")
                .input(WEATHER_QUESTION)
                .addTool(WEATHER)
                .temperature(0.0)
                .maxOutputTokens(20)
                .reasoning(Reasoning.builder().effort(ReasoningEffort.NONE).build())
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

    /** A streamed call arrives as a function_call item with its arguments events. */
    @Test
    void streamedToolCall() {
        ResponseAccumulator accumulator = ResponseAccumulator.createWithSnapshots();
        List<String> types = new ArrayList<>();
        try (StreamResponse<ResponseStreamEvent> stream =
                server.openai().responses().createStreaming(forcedToolCall().build())) {
            stream.stream().forEach(event -> {
                accumulator.accumulate(event);
                types.add(JSON.valueToTree(event).path("type").asText());
            });
        }
        ResponseFunctionToolCall call =
                accumulator.response().output().getFirst().asFunctionCall();
        assertEquals("z", call.name());
        assertEquals("{}", call.arguments());
        assertEquals(ResponseFunctionToolCall.Status.COMPLETED, call.status().orElseThrow());
        assertEquals(
                List.of("response.created", "response.in_progress", "response.output_item.added"), types.subList(0, 3));
        assertTrue(types.contains("response.function_call_arguments.delta"), types.toString());
        assertEquals(
                List.of("response.function_call_arguments.done", "response.output_item.done", "response.completed"),
                types.subList(types.size() - 3, types.size()));
    }

    /**
     * A tool round trip: the call is forced with logit_bias (as in OpenAiClientTest), its output is
     * sent back with previous_response_id, and the follow-up's prompt is the chat template's rendering
     * of the same conversation with a tool message.
     */
    @Test
    void toolRoundTrip() {
        Response call = server.openai().responses().create(forcedToolCall().build());
        assertEquals(ResponseStatus.COMPLETED, call.status().orElseThrow());
        List<ResponseFunctionToolCall> calls = call.output().stream()
                .filter(ResponseOutputItem::isFunctionCall)
                .map(ResponseOutputItem::asFunctionCall)
                .toList();
        assertEquals(1, calls.size());
        assertEquals("z", calls.getFirst().name());
        assertEquals("{}", calls.getFirst().arguments());

        Response answer = server.openai()
                .responses()
                .create(ResponseCreateParams.builder()
                        .model("m")
                        .previousResponseId(call.id())
                        .addTool(WEATHER)
                        .temperature(0.0)
                        .maxOutputTokens(3)
                        .reasoning(
                                Reasoning.builder().effort(ReasoningEffort.NONE).build())
                        .inputOfResponse(List.of(
                                ResponseInputItem.ofFunctionCallOutput(ResponseInputItem.FunctionCallOutput.builder()
                                        .callId(calls.getFirst().callId())
                                        .output("Sunny, 21 degrees.")
                                        .build())))
                        .build());
        Object tool = WEATHER_AS_CHAT_TOOL;
        int expected = promptTokens(Map.of(
                "messages",
                List.of(
                        Map.of("role", "user", "content", WEATHER_QUESTION),
                        Map.of(
                                "role",
                                "assistant",
                                "content",
                                "",
                                "tool_calls",
                                List.of(Map.of(
                                        "id",
                                        calls.getFirst().callId(),
                                        "type",
                                        "function",
                                        "function",
                                        Map.of("name", "z", "arguments", "{}")))),
                        Map.of(
                                "role",
                                "tool",
                                "tool_call_id",
                                calls.getFirst().callId(),
                                "content",
                                "Sunny, 21 degrees.")),
                "tools",
                List.of(tool),
                "chat_template_kwargs",
                Map.of("enable_thinking", false, "clear_thinking", false)));
        assertEquals(expected, answer.usage().orElseThrow().inputTokens());
        assertTrue(answer.usage().orElseThrow().inputTokensDetails().cachedTokens()
                >= call.usage().orElseThrow().inputTokens());

        // The same conversation sent as items, without previous_response_id, is the same prompt.
        Response asItems = server.openai()
                .responses()
                .create(ResponseCreateParams.builder()
                        .model("m")
                        .addTool(WEATHER)
                        .temperature(0.0)
                        .maxOutputTokens(3)
                        .reasoning(
                                Reasoning.builder().effort(ReasoningEffort.NONE).build())
                        .inputOfResponse(List.of(
                                ResponseInputItem.ofEasyInputMessage(
                                        com.openai.models.responses.EasyInputMessage.builder()
                                                .role(com.openai.models.responses.EasyInputMessage.Role.USER)
                                                .content(WEATHER_QUESTION)
                                                .build()),
                                ResponseInputItem.ofFunctionCall(calls.getFirst()),
                                ResponseInputItem.ofFunctionCallOutput(ResponseInputItem.FunctionCallOutput.builder()
                                        .callId(calls.getFirst().callId())
                                        .output("Sunny, 21 degrees.")
                                        .build())))
                        .build());
        assertEquals(expected, asItems.usage().orElseThrow().inputTokens());
        assertEquals(text(answer), text(asItems));
    }

    /** Mistakes get a 400 OpenAI error object naming the Responses field. */
    @Test
    void badBodiesAre400sNamingTheField() {
        assertError(Map.of("input", 5), "input");
        assertError(Map.of(), "input");
        assertError(Map.of("input", List.of(Map.of("type", "image_generation_call", "id", "x"))), "input[0].type");
        assertError(
                Map.of(
                        "input",
                        List.of(Map.of(
                                "role",
                                "user",
                                "content",
                                List.of(Map.of("type", "input_image", "image_url", "http://x"))))),
                "input[0].content[0].type");
        assertError(Map.of("input", List.of(Map.of("role", "robot", "content", "hi"))), "input[0].role");
        assertError(Map.of("input", "hi", "tools", List.of(Map.of("type", "web_search"))), "tools[0].type");
        assertError(Map.of("input", "hi", "max_output_tokens", 0), "max_output_tokens");
        assertError(Map.of("input", "hi", "temperature", "hot"), "temperature");
        assertError(Map.of("input", "hi", "text", Map.of("format", Map.of("type", "yaml"))), "text.format.type");
        // text.format reaches chat completions' response_format; its 400s name text.format.
        assertError(
                Map.of(
                        "input",
                        "hi",
                        "text",
                        Map.of("format", Map.of("type", "json_schema", "name", "x", "schema", "not a schema"))),
                "text.format");
        assertError(Map.of("input", "hi", "previous_response_id", "resp_nothing"), "previous_response_id");
        given().port(server.app().port())
                .contentType("application/json")
                .body(Map.of("input", "hi"))
                .post("/v1/responses")
                .then()
                .statusCode(401)
                .body("error.type", org.hamcrest.Matchers.equalTo("authentication_error"));
        given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .get("/v1/responses/resp_nothing")
                .then()
                .statusCode(404)
                .body("error.message", org.hamcrest.Matchers.containsString("resp_nothing"));
        given().port(server.app().port()).get("/metrics").then().statusCode(401);
        String metrics = given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .get("/metrics")
                .asString();
        assertTrue(metrics.contains("glimmer_http_requests_total{route=\"/v1/responses\",status=\"400\"}"));
        assertTrue(metrics.contains("glimmer_http_requests_total{route=\"/v1/responses/{id}\",status=\"404\"}"));
    }

    private static void assertError(Map<String, Object> body, String param) {
        JsonPath error = given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .contentType("application/json")
                .body(body)
                .post("/v1/responses")
                .then()
                .statusCode(400)
                .extract()
                .jsonPath();
        assertEquals("invalid_request_error", error.getString("error.type"), error.prettify());
        assertTrue(error.getString("error.param").startsWith(param), param + " in " + error.prettify());
        assertFalse(error.getString("error.message").isBlank());
    }

    static String reasoning(Response r) {
        StringBuilder text = new StringBuilder();
        r.output().stream()
                .filter(ResponseOutputItem::isReasoning)
                .forEach(item -> item.asReasoning().content().orElseThrow().forEach(c -> text.append(c.text())));
        return text.toString();
    }

    static String text(Response r) {
        StringBuilder text = new StringBuilder();
        r.output().stream()
                .filter(ResponseOutputItem::isMessage)
                .forEach(item -> item.asMessage()
                        .content()
                        .forEach(c -> text.append(c.asOutputText().text())));
        return text.toString();
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

    /** The prompt length of a chat completions body, as the chat template renders it. */
    private static int promptTokens(Map<String, Object> chatBody) {
        String prompt = post("/apply-template", chatBody).getString("prompt");
        return post("/tokenize", Map.of("content", prompt)).getList("tokens").size();
    }
}
