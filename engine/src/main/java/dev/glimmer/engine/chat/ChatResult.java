package dev.glimmer.engine.chat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The parsed output of one chat completion, for a non-streaming response.
 *
 * @param reasoning the thinking text (may be empty)
 * @param content   the answer text (may be empty)
 * @param toolCalls the complete tool calls, in order
 * @param ending    whether (and how) a tool call went wrong
 */
public record ChatResult(String reasoning, String content, List<ParsedToolCall> toolCalls, OutputEnding ending) {

    public ChatResult {
        toolCalls = List.copyOf(toolCalls);
    }

    /**
     * @param id        the call id sent to the client
     * @param name      the function name
     * @param arguments the arguments as JSON object text
     */
    public record ParsedToolCall(String id, String name, String arguments) {}

    /**
     * The OpenAI {@code finish_reason}: {@code length} when generation ran out of tokens,
     * else {@code tool_calls} when there are complete tool calls, else {@code stop}.
     */
    public String finishReason(boolean stoppedByLength) {
        if (stoppedByLength) {
            return "length";
        }
        return toolCalls.isEmpty() ? "stop" : "tool_calls";
    }

    /** Joins deltas, in order, into a result. */
    public static final class Builder {
        private final StringBuilder reasoning = new StringBuilder();
        private final StringBuilder content = new StringBuilder();
        private final Map<Integer, String> ids = new LinkedHashMap<>();
        private final Map<Integer, String> names = new LinkedHashMap<>();
        private final Map<Integer, StringBuilder> arguments = new LinkedHashMap<>();
        private final List<Integer> ended = new ArrayList<>();

        public Builder add(ChatDelta delta) {
            switch (delta) {
                case ChatDelta.Reasoning r -> reasoning.append(r.text());
                case ChatDelta.Content c -> content.append(c.text());
                case ChatDelta.ToolCallStart s -> {
                    ids.put(s.index(), s.id());
                    names.put(s.index(), s.name());
                    arguments.put(s.index(), new StringBuilder());
                }
                case ChatDelta.ToolCallArguments a -> arguments.get(a.index()).append(a.text());
                case ChatDelta.ToolCallEnd e -> ended.add(e.index());
            }
            return this;
        }

        public Builder addAll(List<ChatDelta> deltas) {
            deltas.forEach(this::add);
            return this;
        }

        public ChatResult build(OutputEnding ending) {
            List<ParsedToolCall> calls = new ArrayList<>();
            for (int index : ended) {
                calls.add(new ParsedToolCall(
                        ids.get(index), names.get(index), arguments.get(index).toString()));
            }
            return new ChatResult(reasoning.toString(), content.toString(), calls, ending);
        }
    }
}
