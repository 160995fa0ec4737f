package dev.glimmer.engine.chat;

/** How the model's output ended, as far as tool calls are concerned; the first problem seen wins. */
public enum OutputEnding {
    /** Plain text and complete tool calls only. */
    NORMAL("the output was parsed completely"),
    /** The output stopped inside a {@code <tool_call>} block; that text is returned as content. */
    UNTERMINATED_TOOL_CALL("the output ended inside a tool call; its text is returned as content"),
    /** A {@code <tool_call>} named a tool the request did not offer; that text is returned as content. */
    UNKNOWN_TOOL("the model called a tool the request did not offer; the call is returned as content"),
    /** A {@code <tool_call>} block broke the format; that text is returned as content. */
    MALFORMED_TOOL_CALL("the model wrote a malformed tool call; its text is returned as content");

    private final String description;

    OutputEnding(String description) {
        this.description = description;
    }

    /** One line for logs. */
    public String description() {
        return description;
    }
}
