package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.engine.chat.ChatRequestParser;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import java.util.List;

/**
 * A {@code POST /v1/chat/completions} body after checking: the conversation as the chat layer
 * parsed it (messages, tools, thinking switch) and the generation options.
 *
 * @param chat    the conversation, ready to render
 * @param options sampling, limits and streaming
 */
public record ChatCompletionRequest(ChatRequest chat, GenerationOptions options) {

    /**
     * @param thinkingByDefault whether the model thinks when the request does not say
     *                          ({@link dev.glimmer.server.inference.ServedModel#thinksByDefault})
     */
    public static ChatCompletionRequest parse(
            JsonNode body, ServerConfig.SamplingDefaults defaults, boolean thinkingByDefault) {
        Fields f = new Fields(body);
        // Any model name is this server's one model (clients must send one and rarely know its id).
        f.string("model");
        GenerationOptions options = GenerationOptionsParser.parse(f, defaults, true);
        // The chat layer reads "none" as thinking off; GLM-4.7-Flash has one depth, so the others mean on.
        f.string("reasoning_effort").ifPresent(effort -> {
            if (!List.of("none", "minimal", "low", "medium", "high").contains(effort)) {
                throw ApiException.badRequest(
                        "reasoning_effort must be none, minimal, low, medium or high, got '" + effort + "'",
                        "reasoning_effort");
            }
        });
        ChatRequest chat;
        try {
            chat = ChatRequestParser.parse(body, thinkingByDefault);
        } catch (InvalidInputException e) {
            throw ApiException.badRequest(e.getMessage(), paramOf(e.getMessage()));
        }
        chat = applyToolChoice(f, chat);
        return new ChatCompletionRequest(chat, options.withGrammar(ReplyGrammars.of(f, chat)));
    }

    /**
     * {@code tool_choice}: {@code auto} (the default) offers the tools; {@code none} leaves them out of
     * the prompt, so the model answers in text; forcing a call ({@code required} or a named function)
     * keeps them, and {@link ReplyGrammars} constrains the reply to the call.
     */
    private static ChatRequest applyToolChoice(Fields f, ChatRequest chat) {
        var choice = f.node("tool_choice");
        if (choice.isEmpty()) {
            return chat;
        }
        JsonNode c = choice.get();
        if (c.isTextual() && c.textValue().equals("auto")) {
            return chat;
        }
        if (c.isTextual() && c.textValue().equals("none")) {
            return new ChatRequest(chat.messages(), List.of(), chat.enableThinking(), chat.clearThinking());
        }
        if (c.isTextual() && c.textValue().equals("required") || c.isObject()) {
            return chat;
        }
        throw ApiException.badRequest(
                "tool_choice must be \"none\", \"auto\", \"required\" or an object, got "
                        + (c.isTextual() ? "'" + c.textValue() + "'" : Fields.typeName(c)),
                "tool_choice");
    }

    /** The field a chat-layer message names first ("messages[2].role: ..." names messages). */
    private static String paramOf(String message) {
        int end = 0;
        while (end < message.length()
                && (Character.isLetterOrDigit(message.charAt(end)) || message.charAt(end) == '_')) {
            end++;
        }
        return end > 0 ? message.substring(0, end) : null;
    }
}
