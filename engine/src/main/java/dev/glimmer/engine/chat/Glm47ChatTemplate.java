package dev.glimmer.engine.chat;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;

/**
 * Renders a {@link ChatRequest} into the GLM-4.7-Flash prompt text, byte for byte what the model's
 * Jinja template ({@code glm-4.7-flash.jinja} next to this class) gives under Hugging Face's
 * renderer. It is plain Java that follows the template's structure; the comments quote the
 * template. The golden tests compare it with Jinja2's output on many conversations.
 */
public final class Glm47ChatTemplate {

    /** The template's {@code # Tools} system block up to the list of tools. */
    private static final String TOOLS_HEADER = """
            <|system|>
            # Tools

            You may call one or more functions to assist with the user query.

            You are provided with function signatures within <tools></tools> XML tags:
            <tools>
            """;

    /** The rest of the {@code # Tools} block after the list of tools. */
    private static final String TOOLS_FOOTER = "</tools>\n\n"
            + "For each function call, output the function name and arguments within the following XML format:\n"
            + "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
            + "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>";

    private static final String THINK = "<think>";
    private static final String END_THINK = "</think>";

    /** The prompt for {@code request}, ending with the generation prompt {@code <|assistant|><think>} (or {@code </think>}). */
    public String render(ChatRequest request) {
        return render(request, true);
    }

    /**
     * The prompt for {@code request}; without the generation prompt when {@code addGenerationPrompt} is
     * false (the template's {@code add_generation_prompt}: the conversation alone, e.g. to count its tokens).
     */
    public String render(ChatRequest request, boolean addGenerationPrompt) {
        StringBuilder out = new StringBuilder("[gMASK]<sop>");
        if (!request.tools().isEmpty()) {
            out.append(TOOLS_HEADER);
            for (ToolSpec tool : request.tools()) {
                out.append(PythonJson.dumps(tool.definition())).append('\n');
            }
            out.append(TOOLS_FOOTER);
        }
        List<ChatMessage> messages = request.messages();
        int lastUserIndex = -1;
        for (int i = 0; i < messages.size(); i++) {
            if (messages.get(i).role() == Role.USER) {
                lastUserIndex = i;
            }
        }
        for (int i = 0; i < messages.size(); i++) {
            ChatMessage m = messages.get(i);
            switch (m.role()) {
                case USER -> out.append("<|user|>").append(m.content());
                case SYSTEM -> out.append("<|system|>").append(m.content());
                case ASSISTANT -> {
                    // {% if ((clear_thinking is defined and not clear_thinking) or loop.index0 > ns.last_user_index)
                    // ... %}
                    boolean keepThinking = !request.clearThinking() || i > lastUserIndex;
                    appendAssistant(out, m, keepThinking);
                }
                case TOOL -> {
                    // Consecutive tool results share one <|observation|>.
                    if (i == 0 || messages.get(i - 1).role() != Role.TOOL) {
                        out.append("<|observation|>");
                    }
                    out.append("<tool_response>").append(m.content()).append("</tool_response>");
                }
            }
        }
        if (addGenerationPrompt) {
            // {%- if add_generation_prompt -%}
            out.append("<|assistant|>").append(request.enableThinking() ? THINK : END_THINK);
        }
        return out.toString();
    }

    private static void appendAssistant(StringBuilder out, ChatMessage m, boolean keepThinking) {
        out.append("<|assistant|>");
        String content = m.content();
        String reasoning = "";
        if (m.reasoningContent() != null) {
            reasoning = m.reasoningContent();
        } else if (content.contains(END_THINK)) {
            // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
            String beforeEnd = PythonText.stripTrailingNewlines(content.substring(0, content.indexOf(END_THINK)));
            int think = beforeEnd.lastIndexOf(THINK);
            reasoning = PythonText.stripLeadingNewlines(
                    think < 0 ? beforeEnd : beforeEnd.substring(think + THINK.length()));
            // content.split('</think>')[-1].lstrip('\n')
            content = PythonText.stripLeadingNewlines(
                    content.substring(content.lastIndexOf(END_THINK) + END_THINK.length()));
        }
        if (keepThinking && !reasoning.isEmpty()) {
            out.append(THINK).append(PythonText.strip(reasoning)).append(END_THINK);
        } else {
            out.append(END_THINK);
        }
        out.append(PythonText.strip(content));
        for (AssistantToolCall call : m.toolCalls()) {
            out.append("<tool_call>").append(call.name());
            for (Map.Entry<String, JsonNode> argument : call.arguments().properties()) {
                JsonNode value = argument.getValue();
                // String arguments are written raw, everything else as JSON.
                out.append("<arg_key>")
                        .append(argument.getKey())
                        .append("</arg_key><arg_value>")
                        .append(value.isTextual() ? value.textValue() : PythonJson.dumps(value))
                        .append("</arg_value>");
            }
            out.append("</tool_call>");
        }
    }
}
