package dev.glimmer.engine.chat;

import java.util.List;

/**
 * One message of a chat request, checked and normalised by {@link ChatRequestParser}.
 *
 * @param role             who speaks
 * @param content          the visible text; text parts are joined and null or absent content is ""
 * @param reasoningContent an assistant turn's thinking ({@code reasoning_content} or {@code reasoning});
 *                         null when the message has none, in which case the template looks for
 *                         {@code <think>…</think>} inside the content
 * @param toolCalls        the calls an assistant turn made (empty for other roles)
 * @param toolCallId       for a tool result: the id of the call it answers; may be null
 * @param name             the optional {@code name} field; may be null
 */
public record ChatMessage(
        Role role,
        String content,
        String reasoningContent,
        List<AssistantToolCall> toolCalls,
        String toolCallId,
        String name) {

    public ChatMessage {
        toolCalls = List.copyOf(toolCalls);
    }
}
