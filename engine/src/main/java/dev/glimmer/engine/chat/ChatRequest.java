package dev.glimmer.engine.chat;

import java.util.List;

/**
 * The parts of an OpenAI chat request that decide the prompt and how the output is parsed. Made
 * by {@link ChatRequestParser#parse}.
 *
 * @param messages       the conversation, at least one message
 * @param tools          the tools offered to the model (empty when none)
 * @param enableThinking false when the request turns thinking off
 *                       ({@code chat_template_kwargs.enable_thinking=false} or {@code reasoning_effort: "none"})
 * @param clearThinking  the template's {@code clear_thinking}: true (the default) keeps the thinking
 *                       only of assistant turns after the last user message; false keeps all of it
 */
public record ChatRequest(
        List<ChatMessage> messages, List<ToolSpec> tools, boolean enableThinking, boolean clearThinking) {

    public ChatRequest {
        messages = List.copyOf(messages);
        tools = List.copyOf(tools);
    }

    /**
     * Whether the conversation ends with an assistant message: the reply then continues that message (a
     * prefill, as Anthropic's API and vLLM's {@code continue_final_message} do) instead of answering it, and
     * the prompt ends with the message's text rather than a new assistant turn.
     */
    public boolean continuesFinalMessage() {
        return !messages.isEmpty() && messages.getLast().role() == Role.ASSISTANT;
    }

    /**
     * Whether the generated text starts inside the reasoning (the prompt ends with {@code <think>}); a
     * continued message is past its reasoning.
     */
    public boolean startsInReasoning() {
        return enableThinking && !continuesFinalMessage();
    }
}
