package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.engine.chat.ChatRequestParser;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;

import java.util.List;
import java.util.Optional;

/**
 * A {@code POST /v1/chat/completions} body after checking: the conversation as the chat layer
 * parsed it (messages, tools, thinking switch) and the generation options.
 *
 * @param model   the model id the client named, if any
 * @param chat    the conversation, ready to render
 * @param options sampling, limits and streaming
 */
public record ChatCompletionRequest(Optional<String> model, ChatRequest chat, GenerationOptions options) {

    public static ChatCompletionRequest parse(JsonNode body, ServerConfig.SamplingDefaults defaults) {
        Fields f = new Fields(body);
        Optional<String> model = f.string("model");
        GenerationOptions options = GenerationOptionsParser.parse(f, defaults, true);
        // The chat layer reads "none" as thinking off; GLM-4.7-Flash has one depth, so the others mean on.
        f.string("reasoning_effort").ifPresent(effort -> {
            if (!List.of("none", "minimal", "low", "medium", "high").contains(effort)) {
                throw ApiException.badRequest("reasoning_effort must be none, minimal, low, medium or high, got '"
                        + effort + "'", "reasoning_effort");
            }
        });
        ChatRequest chat;
        try {
            chat = ChatRequestParser.parse(body);
        } catch (InvalidInputException e) {
            throw ApiException.badRequest(e.getMessage(), paramOf(e.getMessage()));
        }
        return new ChatCompletionRequest(model, chat, options);
    }

    /** The field a chat-layer message names first ("messages[2].role: ..." names messages). */
    private static String paramOf(String message) {
        int end = 0;
        while (end < message.length() && (Character.isLetterOrDigit(message.charAt(end)) || message.charAt(end) == '_')) {
            end++;
        }
        return end > 0 ? message.substring(0, end) : null;
    }
}
