package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import org.junit.jupiter.api.Test;

class ChatRequestParserTest {

    private static String error(String body) {
        return assertThrows(InvalidInputException.class, () -> ChatRequestParser.parse(body))
                .getMessage();
    }

    @Test
    void readsMessagesToolsAndThinkingSwitches() {
        ChatRequest r = ChatRequestParser.parse("""
                {"messages": [
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                   {"role": "assistant", "reasoning": "why", "content": null,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\\"x\\": 1}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
                 "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                 "reasoning_effort": "none", "chat_template_kwargs": {"clear_thinking": false}}""");
        assertEquals("ab", r.messages().get(0).content());
        assertEquals("why", r.messages().get(1).reasoningContent());
        assertEquals("", r.messages().get(1).content());
        assertEquals(
                1, r.messages().get(1).toolCalls().get(0).arguments().get("x").intValue());
        assertEquals("c1", r.messages().get(2).toolCallId());
        assertEquals("f", r.tools().get(0).name());
        assertFalse(r.enableThinking());
        assertFalse(r.clearThinking());
        assertTrue(ChatRequestParser.parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")
                .enableThinking());
    }

    /** Whether a one-message request with {@code fields} added thinks, on a model that does or not by default. */
    private static boolean thinks(String fields, boolean byDefault) throws Exception {
        String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + fields + "}";
        return ChatRequestParser.parse(new com.fasterxml.jackson.databind.ObjectMapper().readTree(body), byDefault)
                .enableThinking();
    }

    /** A model that does not think by default (the server's demo model) thinks when the request asks, either way. */
    @Test
    void theRequestOverridesTheDefaultThinking() throws Exception {
        assertFalse(thinks("", false));
        assertTrue(thinks("", true));
        assertTrue(thinks(",\"chat_template_kwargs\":{\"enable_thinking\":true}", false));
        assertTrue(thinks(",\"reasoning_effort\":\"high\"", false));
        assertFalse(thinks(",\"reasoning_effort\":\"none\"", true));
        assertFalse(
                thinks(",\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"enable_thinking\":false}", true));
        assertFalse(thinks(",\"reasoning_effort\":\"none\",\"chat_template_kwargs\":{\"enable_thinking\":true}", true));
    }

    @Test
    void developerMessagesAreSystemMessages() {
        ChatRequest developer = ChatRequestParser.parse("""
                {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]}""");
        ChatRequest system = ChatRequestParser.parse("""
                {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}""");
        assertEquals(Role.SYSTEM, developer.messages().get(0).role());
        Glm47ChatTemplate template = new Glm47ChatTemplate();
        assertEquals("[gMASK]<sop><|system|>Be brief.<|user|>hi<|assistant|><think>", template.render(developer));
        assertEquals(template.render(system), template.render(developer));
    }

    @Test
    void theGenerationPromptCanBeLeftOut() {
        ChatRequest r = ChatRequestParser.parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        Glm47ChatTemplate template = new Glm47ChatTemplate();
        assertEquals("[gMASK]<sop><|user|>hi<|assistant|><think>", template.render(r, true));
        assertEquals("[gMASK]<sop><|user|>hi", template.render(r, false));
    }

    @Test
    void errorsNameTheMessageAndTheField() {
        assertEquals("messages[2].role: unknown role 'bot' (system, user, assistant, tool)", error("""
                {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                              {"role": "bot", "content": "c"}]}"""));
        assertEquals(
                "messages[0].role: missing (system, user, assistant, tool)",
                error("{\"messages\":[{\"content\":\"a\"}]}"));
        assertEquals("messages: missing (the conversation, an array of messages)", error("{}"));
        assertEquals("messages: must contain at least one message", error("{\"messages\":[]}"));
        assertEquals("messages: must be an array, got an object", error("{\"messages\":{}}"));
        assertEquals("messages[0]: must be an object with a role, got a string", error("{\"messages\":[\"hi\"]}"));
        assertEquals(
                "messages[0].content: must be a string or an array of text parts, got a number",
                error("{\"messages\":[{\"role\":\"user\",\"content\":5}]}"));
        assertEquals(
                "messages[0].content[1].type: unsupported content part type 'image_url' (this model reads only \"text\" parts)",
                error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                        + "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}"));
        assertEquals(
                "messages[0].reasoning_content: must be a string, got an array",
                error("{\"messages\":[{\"role\":\"assistant\",\"reasoning_content\":[]}]}"));
        assertEquals(
                "messages[0].tool_calls: only assistant messages carry tool calls, this one is user",
                error("{\"messages\":[{\"role\":\"user\",\"tool_calls\":[{}]}]}"));
        assertEquals(
                "messages[0].tool_calls[0].function.arguments: must hold a JSON object, got an array",
                error(
                        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}"));
        assertTrue(error(
                        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{x\"}}]}]}")
                .startsWith("messages[0].tool_calls[0].function.arguments: not valid JSON: "));
        assertEquals(
                "messages[0].tool_calls[0].function.name: missing or empty",
                error("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":{}}}]}]}"));
        assertEquals(
                "tools[0].function: missing (with name and parameters)",
                error("{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\"}]}"));
        assertEquals(
                "chat_template_kwargs.enable_thinking: must be true or false, got a string",
                error("{\"messages\":[{\"role\":\"user\"}],\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}"));
        assertTrue(error("{\"messages\": [").startsWith("the request is not valid JSON: "));
        assertEquals("the request must be a JSON object, got an array", error("[1]"));
    }

    @Test
    void everyErrorIsOneLine() {
        String message = error("{\"messages\": [}");
        assertFalse(message.contains("\n"), message);
    }
}
