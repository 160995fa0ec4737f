package dev.glimmer.server.routes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.chat.ChatDelta;
import dev.glimmer.engine.chat.ChatOutputParser;
import dev.glimmer.engine.chat.ToolSpec;
import dev.glimmer.server.http.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * GLM output, split by the real chat parser, becomes Responses items ({@link ResponseOutput}) and
 * Anthropic content blocks ({@link MessageOutput}) in the order the model wrote it, with the
 * streaming events that announce each step; text is fed in small pieces, as tokens arrive.
 */
class ChatOutputItemsTest {
    private static final List<ToolSpec> TOOLS = List.of(new ToolSpec(
            "weather",
            Json.object()
                    .put("type", "object")
                    .set("properties", Json.object().set("city", Json.object().put("type", "string"))),
            Json.object()));

    private static final String OUTPUT = "Let me look.</think>I will check.<tool_call>weather<arg_key>city</arg_key>"
            + "<arg_value>Paris</arg_value></tool_call>";

    /** Feeds {@code text} to {@code parser} three characters at a time, and its deltas to {@code output}. */
    private static void feed(String text, ChatOutputParser parser, Consumer<List<ChatDelta>> output) {
        for (int i = 0; i < text.length(); i += 3) {
            output.accept(parser.accept(text.substring(i, Math.min(text.length(), i + 3))));
        }
        output.accept(parser.finish());
    }

    private static ChatOutputParser parser() {
        AtomicInteger ids = new AtomicInteger();
        return new ChatOutputParser(true, TOOLS, () -> "call_" + ids.incrementAndGet());
    }

    @Test
    void responseItemsInOrderWithTheirEvents() {
        List<ObjectNode> events = new ArrayList<>();
        ResponseOutput output = new ResponseOutput(events::add);
        feed(OUTPUT, parser(), output::add);
        output.close("completed");

        JsonNode items = output.items();
        assertEquals(3, items.size());
        assertEquals("reasoning", items.get(0).path("type").asText());
        assertEquals(
                "Let me look.", items.get(0).path("content").get(0).path("text").asText());
        assertEquals("message", items.get(1).path("type").asText());
        assertEquals(
                "I will check.",
                items.get(1).path("content").get(0).path("text").asText());
        assertEquals("function_call", items.get(2).path("type").asText());
        assertEquals("call_1", items.get(2).path("call_id").asText());
        assertEquals("{\"city\":\"Paris\"}", items.get(2).path("arguments").asText());
        items.forEach(item -> assertEquals("completed", item.path("status").asText()));

        List<String> types = new ArrayList<>();
        for (ObjectNode e : events) {
            String type = e.path("type").asText();
            if (types.isEmpty() || !types.getLast().equals(type)) {
                types.add(type);
            }
        }
        assertEquals(
                List.of(
                        "response.output_item.added",
                        "response.content_part.added",
                        "response.reasoning_text.delta",
                        "response.reasoning_text.done",
                        "response.content_part.done",
                        "response.output_item.done",
                        "response.output_item.added",
                        "response.content_part.added",
                        "response.output_text.delta",
                        "response.output_text.done",
                        "response.content_part.done",
                        "response.output_item.done",
                        "response.output_item.added",
                        "response.function_call_arguments.delta",
                        "response.function_call_arguments.done",
                        "response.output_item.done"),
                types);
        // Each item's events carry its output_index; the done item equals the final one.
        assertEquals(2, events.getLast().path("output_index").asInt());
        assertEquals(items.get(2), events.getLast().path("item"));
    }

    @Test
    void anUnfinishedCallIsAnIncompleteItemAndItsTextFollows() {
        ResponseOutput output = new ResponseOutput(e -> {});
        feed("</think><tool_call>weather<arg_key>city</arg_key><arg_value>Par", parser(), output::add);
        output.close("incomplete");
        JsonNode items = output.items();
        assertEquals("function_call", items.get(0).path("type").asText());
        assertEquals("incomplete", items.get(0).path("status").asText());
        assertEquals("message", items.get(1).path("type").asText());
        assertTrue(items.get(1).path("content").get(0).path("text").asText().startsWith("<tool_call>weather"));
    }

    @Test
    void messageBlocksInOrderWithTheirEvents() {
        List<ObjectNode> events = new ArrayList<>();
        MessageOutput output = new MessageOutput(events::add);
        feed(OUTPUT, parser(), output::add);
        output.close();

        JsonNode blocks = output.blocks();
        assertEquals(3, blocks.size());
        assertEquals("Let me look.", blocks.get(0).path("thinking").asText());
        assertEquals("I will check.", blocks.get(1).path("text").asText());
        assertEquals("tool_use", blocks.get(2).path("type").asText());
        assertEquals("Paris", blocks.get(2).path("input").path("city").asText());
        assertTrue(output.toolUsed());

        StringBuilder json = new StringBuilder();
        for (ObjectNode e : events) {
            if (e.path("delta").path("type").asText().equals("input_json_delta")) {
                assertEquals(2, e.path("index").asInt());
                json.append(e.path("delta").path("partial_json").asText());
            }
        }
        assertEquals("{\"city\":\"Paris\"}", json.toString());
        assertEquals("content_block_stop", events.getLast().path("type").asText());
        assertEquals(2, events.getLast().path("index").asInt());
    }

    @Test
    void anUnfinishedCallIsStreamedButIsNoBlock() {
        List<ObjectNode> events = new ArrayList<>();
        MessageOutput output = new MessageOutput(events::add);
        feed("</think><tool_call>weather<arg_key>city</arg_key><arg_value>Par", parser(), output::add);
        output.close();
        assertEquals(1, output.blocks().size());
        assertEquals("text", output.blocks().get(0).path("type").asText());
        assertEquals(
                1,
                events.stream()
                        .filter(e -> e.path("type").asText().equals("content_block_start")
                                && e.path("content_block").path("type").asText().equals("tool_use"))
                        .count());
        assertFalse(output.toolUsed());
    }
}
