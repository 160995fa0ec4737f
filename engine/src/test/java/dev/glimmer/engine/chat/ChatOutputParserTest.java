package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** How the model's output text becomes reasoning, content and tool calls. */
class ChatOutputParserTest {

    static final ObjectMapper JSON = new ObjectMapper();

    /** get_weather(city: string, days: integer), write_file(path: string, content: string), get_time(), configure(...). */
    static List<ToolSpec> tools() {
        return ChatRequestParser.parse("""
                {"messages": [{"role": "user", "content": "x"}], "tools": [
                  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
                  {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": ["string", "null"]}}}}},
                  {"type": "function", "function": {"name": "get_time"}},
                  {"type": "function", "function": {"name": "configure", "parameters": {"type": "object",
                    "properties": {"label": {"type": "string"}, "ratio": {"type": "number"}, "enabled": {"type": "boolean"},
                      "limits": {"type": "object"}, "tags": {"type": "array"}, "count": {"type": "integer"}}}}}
                ]}""").tools();
    }

    static ChatOutputParser parser(boolean startInReasoning) {
        AtomicInteger counter = new AtomicInteger();
        return new ChatOutputParser(startInReasoning, tools(), () -> "call_" + counter.getAndIncrement());
    }

    static ChatResult parse(boolean startInReasoning, String output) {
        return parser(startInReasoning).parse(output);
    }

    static ChatResult.ParsedToolCall call(String id, String name, String arguments) {
        return new ChatResult.ParsedToolCall(id, name, arguments);
    }

    @Test
    void textBeforeTheEndOfThinkingIsReasoningAndTheRestIsContent() {
        ChatResult r = parse(true, "The user greets me.</think>Hello! How can I help?");
        assertEquals("The user greets me.", r.reasoning());
        assertEquals("Hello! How can I help?", r.content());
        assertEquals(List.of(), r.toolCalls());
        assertEquals(OutputEnding.NORMAL, r.ending());
        assertEquals("stop", r.finishReason(false));
    }

    @Test
    void withThinkingOffEverythingIsContent() {
        ChatResult r = parse(false, "Rome. </think> is just text here.");
        assertEquals("", r.reasoning());
        assertEquals("Rome. </think> is just text here.", r.content());
    }

    @Test
    void outputThatStopsWhileThinkingIsAllReasoning() {
        ChatResult r = parse(true, "Let me consider </thi");
        assertEquals("Let me consider </thi", r.reasoning());
        assertEquals("", r.content());
        assertEquals("length", r.finishReason(true));
    }

    @Test
    void aToolCallBecomesAnOpenAiToolCallWithArgumentsTypedBySchema() {
        ChatResult r = parse(
                true,
                "Need the weather.</think>Let me check.<tool_call>get_weather<arg_key>city</arg_key>"
                        + "<arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>");
        assertEquals("Need the weather.", r.reasoning());
        assertEquals("Let me check.", r.content());
        assertEquals(List.of(call("call_0", "get_weather", "{\"city\":\"Paris\",\"days\":3}")), r.toolCalls());
        assertEquals("tool_calls", r.finishReason(false));
    }

    @Test
    void stringParametersStayStringsAndOthersAreReadAsJson() throws Exception {
        ChatResult r = parse(
                false,
                "<tool_call>configure"
                        + "<arg_key>label</arg_key><arg_value>42 \"quoted\"\nline\\2</arg_value>"
                        + "<arg_key>ratio</arg_key><arg_value>2.50</arg_value>"
                        + "<arg_key>enabled</arg_key><arg_value>true</arg_value>"
                        + "<arg_key>limits</arg_key><arg_value>{\"max\": 10, \"names\": [\"a\", \"ü\"]}</arg_value>"
                        + "<arg_key>tags</arg_key><arg_value>[1, \"two\", null]</arg_value>"
                        + "<arg_key>count</arg_key><arg_value>many</arg_value>"
                        + "<arg_key>extra</arg_key><arg_value> {\"not\": \"in schema\"} </arg_value>"
                        + "</tool_call>");
        ObjectNode arguments =
                (ObjectNode) JSON.readTree(r.toolCalls().getFirst().arguments());
        assertEquals("42 \"quoted\"\nline\\2", arguments.get("label").textValue());
        assertEquals(2.5, arguments.get("ratio").doubleValue());
        assertTrue(arguments.get("enabled").booleanValue());
        assertEquals(JSON.readTree("{\"max\": 10, \"names\": [\"a\", \"ü\"]}"), arguments.get("limits"));
        assertEquals(JSON.readTree("[1, \"two\", null]"), arguments.get("tags"));
        assertEquals("many", arguments.get("count").textValue(), "an unparsable value stays a string");
        assertEquals(JSON.readTree("{\"not\": \"in schema\"}"), arguments.get("extra"));
        assertEquals(
                List.of("label", "ratio", "enabled", "limits", "tags", "count", "extra"),
                List.copyOf(arguments.properties().stream().map(e -> e.getKey()).toList()));
    }

    @Test
    void callsWithoutArgumentsAndSeveralCallsInARow() {
        ChatResult r = parse(
                false,
                "<tool_call>get_time</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                        + "<arg_value>Oslo</arg_value>\n</tool_call>");
        assertEquals(
                List.of(call("call_0", "get_time", "{}"), call("call_1", "get_weather", "{\"city\":\"Oslo\"}")),
                r.toolCalls());
        assertEquals("", r.content(), "whitespace between the parts of calls is layout");
    }

    @Test
    void aCallToAToolTheRequestDidNotOfferIsReturnedAsContent() {
        String text = "<tool_call>delete_everything<arg_key>really</arg_key><arg_value>yes</arg_value></tool_call>";
        ChatResult r = parse(false, text);
        assertEquals(text, r.content());
        assertEquals(List.of(), r.toolCalls());
        assertEquals(OutputEnding.UNKNOWN_TOOL, r.ending());
        assertEquals("stop", r.finishReason(false));
    }

    @Test
    void aCallCutOffByTheEndOfGenerationIsReturnedAsContent() {
        String text = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par";
        ChatOutputParser parser = parser(false);
        List<ChatDelta> streamed = parser.accept(text);
        assertEquals(
                List.of(
                        new ChatDelta.ToolCallStart(0, "call_0", "get_weather"),
                        new ChatDelta.ToolCallArguments(0, "{\"city\":\"Par")),
                streamed,
                "streamed while it came");
        assertEquals(List.of(new ChatDelta.Content(text)), parser.finish());
        ChatResult r = parser.result();
        assertEquals(text, r.content());
        assertEquals(List.of(), r.toolCalls());
        assertEquals(OutputEnding.UNTERMINATED_TOOL_CALL, r.ending());
        assertEquals("length", r.finishReason(true));
    }

    @Test
    void aMalformedCallIsReturnedAsContentAndLaterCallsStillWork() {
        String broken = "<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>";
        ChatResult r = parse(false, broken + " then <tool_call>get_time</tool_call>");
        assertEquals(broken + " then ", r.content());
        assertEquals(List.of(call("call_1", "get_time", "{}")), r.toolCalls(), "the broken call used index 0");
        assertEquals(OutputEnding.MALFORMED_TOOL_CALL, r.ending());
    }

    @Test
    void textThatOnlyLooksLikeATagIsContent() {
        String text = "Write <tool_calls> or <tool_call > or <think> or </tool_call> and end with <tool_";
        ChatResult r = parse(false, text);
        assertEquals(text, r.content());
        assertEquals(OutputEnding.NORMAL, r.ending());
        ChatResult afterThinking = parse(true, "a </thinker> b</think>c");
        assertEquals("a </thinker> b", afterThinking.reasoning());
        assertEquals("c", afterThinking.content());
    }

    @Test
    void withoutToolsEveryToolCallIsContent() {
        String text = "<tool_call>get_time</tool_call>";
        ChatResult r = new ChatOutputParser(false, List.of()).parse(text);
        assertEquals(text, r.content());
        assertEquals(OutputEnding.UNKNOWN_TOOL, r.ending());
    }

    @Test
    void streamingHoldsBackOnlyWhatCouldStartATag() {
        ChatOutputParser p = parser(true);
        assertEquals(List.of(new ChatDelta.Reasoning("Thinking")), p.accept("Thinking</th"));
        assertEquals(List.of(new ChatDelta.Content("Hi <x")), p.accept("ink>Hi <x"));
        assertEquals(List.of(new ChatDelta.Content(" ")), p.accept(" <tool"));
        assertEquals(List.of(new ChatDelta.Content("<tools>")), p.accept("s>"));
        assertEquals(List.of(), p.accept("<tool_call>get_wea"));
        assertEquals(List.of(), p.accept("ther<arg_"), "the name is complete only when a tag follows it");
        assertEquals(
                List.of(
                        new ChatDelta.ToolCallStart(0, "call_0", "get_weather"),
                        new ChatDelta.ToolCallArguments(0, "{\"city\":\"Ly")),
                p.accept("key>city</arg_key><arg_value>Ly"));
        assertEquals(
                List.of(new ChatDelta.ToolCallArguments(0, "on\"}"), new ChatDelta.ToolCallEnd(0)),
                p.accept("on</arg_value></tool_call>"));
    }

    @Test
    void aLongStringArgumentStreamsAsJsonStringPieces() {
        ChatOutputParser p = parser(false);
        assertEquals(
                List.of(
                        new ChatDelta.ToolCallStart(0, "call_0", "write_file"),
                        new ChatDelta.ToolCallArguments(0, "{\"path\":\"a.txt\",\"content\":\"line one\\n")),
                p.accept("<tool_call>write_file<arg_key>path</arg_key><arg_value>a.txt</arg_value>"
                        + "<arg_key>content</arg_key><arg_value>line one\n"));
        assertEquals(List.of(new ChatDelta.ToolCallArguments(0, "\\\"two\\\" ")), p.accept("\"two\" </arg"));
        assertEquals(List.of(new ChatDelta.ToolCallArguments(0, "</argh")), p.accept("h"));
        assertEquals(
                List.of(new ChatDelta.ToolCallArguments(0, "\"}"), new ChatDelta.ToolCallEnd(0)),
                p.accept("</arg_value></tool_call>"));
        p.finish();
        assertEquals(
                "{\"path\":\"a.txt\",\"content\":\"line one\\n\\\"two\\\" </argh\"}",
                p.result().toolCalls().getFirst().arguments());
    }

    @Test
    void theParserForARequestStartsInReasoningExactlyWhenThePromptEndsWithThink() {
        ChatRequest on = ChatRequestParser.parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
        assertTrue(new Glm47ChatTemplate().render(on).endsWith("<|assistant|><think>"));
        ChatResult thinking = ChatOutputParser.forRequest(on).parse("a</think>b");
        assertEquals("a", thinking.reasoning());
        assertEquals("b", thinking.content());

        ChatRequest off = ChatRequestParser.parse(
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"none\"}");
        assertTrue(new Glm47ChatTemplate().render(off).endsWith("<|assistant|></think>"));
        ChatResult plain = ChatOutputParser.forRequest(off).parse("a</think>b");
        assertEquals("", plain.reasoning());
        assertEquals("a</think>b", plain.content());
    }

    @Test
    void generatedCallIdsAreUniqueWithinAResponse() {
        ChatResult r = new ChatOutputParser(false, tools())
                .parse("<tool_call>get_time</tool_call><tool_call>get_time</tool_call>");
        assertTrue(r.toolCalls().get(0).id().startsWith("call_"));
        assertNotEquals(r.toolCalls().get(0).id(), r.toolCalls().get(1).id());
    }
}
