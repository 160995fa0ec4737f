package dev.glimmer.server.routes;

import dev.glimmer.engine.chat.ChatOutputParser;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.server.api.ChatCompletionRequest;
import dev.glimmer.server.inference.InferenceJob;
import dev.glimmer.server.inference.ServedModel;
import java.util.ArrayList;
import java.util.List;

/**
 * A chat request turned into a running generation: the prompt the chat template renders, the job
 * queued for it and the parser that splits its output into reasoning, content and tool calls. The
 * chat completions, Responses and Anthropic Messages routes all start their generations here, so
 * that the three APIs behave alike (the Responses and Messages routes translate their bodies into
 * a {@link ChatCompletionRequest} first).
 *
 * @param job    the queued generation
 * @param parser the parser for its output
 */
record ChatGeneration(InferenceJob job, ChatOutputParser parser) {

    /**
     * The prompt's token ids for {@code chat}: the conversation and the generation prompt that opens the
     * assistant's turn, or, when the conversation ends with an assistant message, the conversation alone, so
     * that the reply continues that message.
     */
    static int[] prompt(ServedModel model, ChatRequest chat) {
        return model.tokenizer()
                .encode(model.chatFormat().template().render(chat, !chat.continuesFinalMessage()), true);
    }

    /**
     * Queues {@code request}'s generation.
     *
     * @param promptParam the request field the conversation came from, for error messages
     */
    static ChatGeneration start(ServedModel model, ChatCompletionRequest request, String promptParam) {
        // The Responses and Messages APIs have one answer per request: their translations never ask for n.
        if (request.options().choices() != 1) {
            throw new IllegalStateException(
                    "start makes one generation, not " + request.options().choices());
        }
        return startChoices(model, request, promptParam).getFirst();
    }

    /**
     * Queues one generation per choice of {@code request} ({@code n}), each sampled on its own; when one
     * cannot be queued, those already queued are cancelled.
     */
    static List<ChatGeneration> startChoices(ServedModel model, ChatCompletionRequest request, String promptParam) {
        int[] prompt = prompt(model, request.chat());
        List<ChatGeneration> generations = new ArrayList<>();
        try {
            for (int i = 0; i < request.options().choices(); i++) {
                InferenceJob job = Jobs.submit(model, prompt, request.options().forChoice(i), promptParam);
                generations.add(new ChatGeneration(job, ChatOutputParser.forRequest(request.chat())));
            }
        } catch (RuntimeException e) {
            generations.forEach(g -> g.job().cancel());
            throw e;
        }
        return generations;
    }
}
