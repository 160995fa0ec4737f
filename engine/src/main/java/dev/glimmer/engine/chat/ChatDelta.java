package dev.glimmer.engine.chat;

/**
 * One piece of parsed model output, in the order the text arrived. A streaming response sends
 * each as it comes; {@link ChatResult.Builder} joins them into the non-streaming result.
 */
public sealed interface ChatDelta {

    /** Thinking text ({@code reasoning_content}). */
    record Reasoning(String text) implements ChatDelta {}

    /** Answer text ({@code content}). */
    record Content(String text) implements ChatDelta {}

    /** A tool call begins: its position among this response's calls, its id and the function name. */
    record ToolCallStart(int index, String id, String name) implements ChatDelta {}

    /** The next piece of a call's arguments JSON text; the pieces of one call concatenate to a JSON object. */
    record ToolCallArguments(int index, String text) implements ChatDelta {}

    /**
     * The call's {@code </tool_call>} arrived and its arguments are complete. A call that never
     * ends (the output stopped inside it or broke the format) is not a tool call of the result: its
     * text follows as {@link Content}.
     */
    record ToolCallEnd(int index) implements ChatDelta {}
}
