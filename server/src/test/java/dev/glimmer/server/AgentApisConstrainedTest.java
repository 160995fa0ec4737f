package dev.glimmer.server;

import static dev.glimmer.server.ConstrainedOutputTest.ALARM;
import static dev.glimmer.server.ConstrainedOutputTest.JSON;
import static dev.glimmer.server.ConstrainedOutputTest.SCHEMAS;
import static dev.glimmer.server.ConstrainedOutputTest.WEATHER;
import static dev.glimmer.server.ConstrainedOutputTest.assertValid;
import static dev.glimmer.server.ConstrainedOutputTest.schema;
import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.anthropic.helpers.MessageAccumulator;
import com.anthropic.models.messages.ContentBlock;
import com.anthropic.models.messages.Message;
import com.anthropic.models.messages.MessageCreateParams;
import com.anthropic.models.messages.RawMessageStreamEvent;
import com.anthropic.models.messages.StopReason;
import com.anthropic.models.messages.Tool;
import com.anthropic.models.messages.ToolChoiceAny;
import com.anthropic.models.messages.ToolChoiceTool;
import com.anthropic.models.messages.ToolUseBlock;
import com.fasterxml.jackson.databind.JsonNode;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.models.Reasoning;
import com.openai.models.ReasoningEffort;
import com.openai.models.ResponseFormatJsonObject;
import com.openai.models.responses.FunctionTool;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseFormatTextJsonSchemaConfig;
import com.openai.models.responses.ResponseFunctionToolCall;
import com.openai.models.responses.ResponseOutputItem;
import com.openai.models.responses.ResponseStatus;
import com.openai.models.responses.ResponseStreamEvent;
import com.openai.models.responses.ResponseTextConfig;
import com.openai.models.responses.ToolChoiceFunction;
import com.openai.models.responses.ToolChoiceOptions;
import io.restassured.path.json.JsonPath;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Constrained decoding through the agent APIs: the Responses API's {@code text.format} and forced
 * {@code tool_choice}, and the Messages API's {@code tool_choice} {@code any} / {@code tool}, through
 * the official OpenAI and Anthropic Java SDKs against a real server with the tiny random model.
 * Whatever the model samples at temperature 1, the grammar keeps it valid, and an independent
 * validator (networknt) checks it against the schema ({@link ConstrainedOutputTest} does the same
 * for chat completions).
 */
class AgentApisConstrainedTest {
    static final int SEEDS = 3;

    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of(), "none");

    // ---- Responses API ----

    static ResponseCreateParams.Builder respond(boolean thinking, long seed) {
        ResponseCreateParams.Builder b = ResponseCreateParams.builder()
                .model("m")
                .input("Describe a fox in JSON.")
                .temperature(1.0)
                .maxOutputTokens(64)
                .putAdditionalBodyProperty("seed", JsonValue.from(seed));
        return thinking
                ? b
                : b.reasoning(Reasoning.builder().effort(ReasoningEffort.NONE).build());
    }

    static ResponseTextConfig textFormat(JsonNode schema) {
        ResponseFormatTextJsonSchemaConfig.Schema.Builder s = ResponseFormatTextJsonSchemaConfig.Schema.builder();
        schema.properties()
                .forEach(e -> s.putAdditionalProperty(
                        e.getKey(), JsonValue.from(JSON.convertValue(e.getValue(), Object.class))));
        return ResponseTextConfig.builder()
                .format(ResponseFormatTextJsonSchemaConfig.builder()
                        .name("answer")
                        .schema(s.build())
                        .strict(true)
                        .build())
                .build();
    }

    static FunctionTool functionTool(String name, String parameters) {
        FunctionTool.Parameters.Builder p = FunctionTool.Parameters.builder();
        schema(parameters)
                .properties()
                .forEach(e -> p.putAdditionalProperty(
                        e.getKey(), JsonValue.from(JSON.convertValue(e.getValue(), Object.class))));
        return FunctionTool.builder()
                .name(name)
                .parameters(p.build())
                .strict(false)
                .build();
    }

    @Test
    void textFormatJsonSchemaGivesValidJsonForEverySeed() {
        for (String s : SCHEMAS) {
            JsonNode schema = schema(s);
            for (long seed = 0; seed < SEEDS; seed++) {
                Response r = server.openai()
                        .responses()
                        .create(respond(false, seed).text(textFormat(schema)).build());
                assertEquals(ResponseStatus.COMPLETED, r.status().orElseThrow(), s);
                assertValid(schema, ResponsesApiTest.text(r));
            }
        }
    }

    @Test
    void afterReasoningTheTextIsValid() {
        JsonNode schema = schema(SCHEMAS.getFirst());
        for (long seed = 0; seed < SEEDS; seed++) {
            Response r = server.openai()
                    .responses()
                    .create(respond(true, seed).text(textFormat(schema)).build());
            assertTrue(r.output().stream().anyMatch(ResponseOutputItem::isReasoning), "the model thought first");
            assertValid(schema, ResponsesApiTest.text(r));
        }
    }

    @Test
    void textFormatJsonObjectGivesAnObject() {
        for (long seed = 0; seed < SEEDS; seed++) {
            Response r = server.openai()
                    .responses()
                    .create(respond(false, seed)
                            .text(ResponseTextConfig.builder()
                                    .format(ResponseFormatJsonObject.builder().build())
                                    .build())
                            .build());
            assertValid(schema("{'type':'object'}"), ResponsesApiTest.text(r));
        }
    }

    /** The streamed output_text deltas make valid JSON too, and so does the text the completed event carries. */
    @Test
    void streamedTextIsValid() {
        for (String s : List.of(SCHEMAS.get(17), SCHEMAS.get(20), "{'type':'object'}")) {
            JsonNode schema = schema(s);
            for (long seed = 0; seed < SEEDS; seed++) {
                StringBuilder deltas = new StringBuilder();
                Response[] completed = new Response[1];
                try (StreamResponse<ResponseStreamEvent> stream = server.openai()
                        .responses()
                        .createStreaming(
                                respond(false, seed).text(textFormat(schema)).build())) {
                    stream.stream().forEach(event -> {
                        event.outputTextDelta().ifPresent(d -> deltas.append(d.delta()));
                        event.completed().ifPresent(c -> completed[0] = c.response());
                    });
                }
                assertValid(schema, deltas.toString());
                assertEquals(deltas.toString(), ResponsesApiTest.text(completed[0]));
            }
        }
    }

    static ResponseCreateParams.Builder respondWithTools(boolean thinking, long seed) {
        return respond(thinking, seed)
                .addTool(functionTool("get_weather", WEATHER))
                .addTool(functionTool("set_alarm", ALARM));
    }

    static ResponseFunctionToolCall onlyCall(Response r) {
        assertEquals(ResponseStatus.COMPLETED, r.status().orElseThrow());
        List<ResponseFunctionToolCall> calls = r.output().stream()
                .filter(ResponseOutputItem::isFunctionCall)
                .map(ResponseOutputItem::asFunctionCall)
                .toList();
        assertEquals(1, calls.size(), r.output().toString());
        assertTrue(r.output().stream().noneMatch(ResponseOutputItem::isMessage), "only the call, no text");
        return calls.getFirst();
    }

    static void assertArgumentsValid(String name, String arguments) {
        assertValid(schema(name.equals("get_weather") ? WEATHER : ALARM), arguments);
    }

    @Test
    void toolChoiceRequiredForcesAValidFunctionCall() {
        for (long seed = 0; seed < 2 * SEEDS; seed++) {
            ResponseFunctionToolCall call = onlyCall(server.openai()
                    .responses()
                    .create(respondWithTools(seed % 2 == 0, seed)
                            .toolChoice(ToolChoiceOptions.REQUIRED)
                            .build()));
            assertArgumentsValid(call.name(), call.arguments());
        }
    }

    @Test
    void aNamedFunctionIsTheOneCalled() {
        for (long seed = 0; seed < SEEDS; seed++) {
            ResponseFunctionToolCall call = onlyCall(server.openai()
                    .responses()
                    .create(respondWithTools(false, seed)
                            .toolChoice(ToolChoiceFunction.builder()
                                    .name("set_alarm")
                                    .build())
                            .build()));
            assertEquals("set_alarm", call.name());
            assertArgumentsValid(call.name(), call.arguments());
        }
    }

    @Test
    void aStreamedForcedCallIsValid() {
        for (long seed = 0; seed < SEEDS; seed++) {
            StringBuilder deltas = new StringBuilder();
            Response[] completed = new Response[1];
            try (StreamResponse<ResponseStreamEvent> stream = server.openai()
                    .responses()
                    .createStreaming(respondWithTools(false, seed)
                            .toolChoice(ToolChoiceFunction.builder()
                                    .name("get_weather")
                                    .build())
                            .build())) {
                stream.stream().forEach(event -> {
                    event.functionCallArgumentsDelta().ifPresent(d -> deltas.append(d.delta()));
                    event.completed().ifPresent(c -> completed[0] = c.response());
                });
            }
            ResponseFunctionToolCall call = onlyCall(completed[0]);
            assertEquals("get_weather", call.name());
            assertEquals(call.arguments(), deltas.toString());
            assertArgumentsValid(call.name(), call.arguments());
        }
    }

    // ---- Anthropic Messages API ----

    static Tool anthropicTool(String name, String inputSchema) {
        Tool.InputSchema.Builder s = Tool.InputSchema.builder();
        schema(inputSchema).properties().forEach(e -> {
            com.anthropic.core.JsonValue value =
                    com.anthropic.core.JsonValue.from(JSON.convertValue(e.getValue(), Object.class));
            switch (e.getKey()) {
                case "type" -> s.type(value);
                case "properties" -> s.properties(value);
                case "required" -> s.required(value);
                default -> s.putAdditionalProperty(e.getKey(), value);
            }
        });
        return Tool.builder().name(name).inputSchema(s.build()).build();
    }

    static MessageCreateParams.Builder message(long seed) {
        return MessageCreateParams.builder()
                .model("m")
                .maxTokens(64)
                .addUserMessage("What should I do tomorrow?")
                .putAdditionalBodyProperty("temperature", com.anthropic.core.JsonValue.from(1.0))
                .putAdditionalBodyProperty("seed", com.anthropic.core.JsonValue.from(seed))
                .addTool(anthropicTool("get_weather", WEATHER))
                .addTool(anthropicTool("set_alarm", ALARM));
    }

    static ToolUseBlock onlyToolUse(Message m) {
        assertEquals(StopReason.TOOL_USE, m.stopReason().orElseThrow());
        List<ToolUseBlock> uses = m.content().stream()
                .filter(ContentBlock::isToolUse)
                .map(ContentBlock::asToolUse)
                .toList();
        assertEquals(1, uses.size(), m.content().toString());
        return uses.getFirst();
    }

    static void assertInputValid(ToolUseBlock use) {
        assertArgumentsValid(use.name(), JSON.valueToTree(use._input()).toString());
    }

    @Test
    void toolChoiceAnyForcesAValidToolUse() {
        for (long seed = 0; seed < 2 * SEEDS; seed++) {
            assertInputValid(onlyToolUse(server.anthropic()
                    .messages()
                    .create(message(seed)
                            .toolChoice(ToolChoiceAny.builder().build())
                            .build())));
        }
    }

    @Test
    void toolChoiceToolUsesThatTool() {
        for (long seed = 0; seed < SEEDS; seed++) {
            ToolUseBlock use = onlyToolUse(server.anthropic()
                    .messages()
                    .create(message(seed)
                            .toolChoice(
                                    ToolChoiceTool.builder().name("set_alarm").build())
                            .build()));
            assertEquals("set_alarm", use.name());
            assertInputValid(use);
        }
    }

    @Test
    void aStreamedForcedToolUseIsValid() {
        for (long seed = 0; seed < SEEDS; seed++) {
            MessageAccumulator accumulator = MessageAccumulator.create();
            try (com.anthropic.core.http.StreamResponse<RawMessageStreamEvent> stream = server.anthropic()
                    .messages()
                    .createStreaming(message(seed)
                            .toolChoice(
                                    ToolChoiceTool.builder().name("get_weather").build())
                            .build())) {
                stream.stream().forEach(accumulator::accumulate);
            }
            ToolUseBlock use = onlyToolUse(accumulator.message());
            assertEquals("get_weather", use.name());
            assertInputValid(use);
        }
    }

    // ---- Unsupported schemas: a 400 in each API's own error shape, naming the keyword ----

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", textBlock = """
            {'type':'string','format':'iri'} => format
            {'type':'array','items':{'type':'integer'},'uniqueItems':true} => uniqueItems
            {'type':'object','properties':{'a':{'not':{'type':'null'}}}} => not
            """)
    void anUnsupportedKeywordIsA400InEachApisShape(String schemaText, String keyword) {
        Map<String, Object> schema = JSON.convertValue(schema(schemaText), Map.class);
        JsonPath format = error(
                "/v1/responses",
                Map.of(
                        "input",
                        "hi",
                        "text",
                        Map.of("format", Map.of("type", "json_schema", "name", "x", "schema", schema))));
        assertEquals("invalid_request_error", format.getString("error.type"), format.prettify());
        assertTrue(format.getString("error.param").startsWith("text.format"), format.prettify());
        assertMentions(format.getString("error.message"), keyword);

        Map<String, Object> tool = Map.of(
                "type",
                "function",
                "name",
                "f",
                "parameters",
                Map.of("type", "object", "properties", Map.of("x", schema)));
        JsonPath call =
                error("/v1/responses", Map.of("input", "hi", "tools", List.of(tool), "tool_choice", "required"));
        assertEquals("invalid_request_error", call.getString("error.type"), call.prettify());
        assertMentions(call.getString("error.message"), keyword);

        for (Map<String, Object> choice :
                List.of(Map.<String, Object>of("type", "any"), Map.<String, Object>of("type", "tool", "name", "f"))) {
            JsonPath use = error(
                    "/v1/messages",
                    Map.of(
                            "max_tokens",
                            5,
                            "messages",
                            List.of(Map.of("role", "user", "content", "hi")),
                            "tools",
                            List.of(Map.of(
                                    "name",
                                    "f",
                                    "input_schema",
                                    Map.of("type", "object", "properties", Map.of("x", schema)))),
                            "tool_choice",
                            choice));
            assertEquals("error", use.getString("type"), use.prettify());
            assertEquals("invalid_request_error", use.getString("error.type"), use.prettify());
            assertMentions(use.getString("error.message"), keyword);
            assertFalse(use.prettify().contains("\"param\""), use.prettify());
        }
    }

    private static JsonPath error(String path, Object body) {
        return given().port(server.app().port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(400)
                .extract()
                .jsonPath();
    }

    private static void assertMentions(String message, String keyword) {
        assertTrue(message.contains(keyword), keyword + " in " + message);
        assertFalse(message.contains("Exception"), message);
    }
}
