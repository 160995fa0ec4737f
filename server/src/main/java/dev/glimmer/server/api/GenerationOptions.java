package dev.glimmer.server.api;

import dev.glimmer.engine.grammar.OutputGrammar;
import dev.glimmer.engine.sampling.SamplingParams;
import java.util.List;
import java.util.Optional;

/**
 * What a chat or text completion request asks of the generation, after checking.
 *
 * @param sampling      the sampler's parameters
 * @param maxTokens     the most tokens to generate; empty-context limit when -1
 * @param stop          stop strings (not returned in the output)
 * @param logprobs      whether to report log-probabilities of the chosen tokens
 * @param topLogprobs   how many alternatives per token to report (0-20)
 * @param stream        answer with server-sent events
 * @param includeUsage  send the usage chunk at the end of a stream
 * @param user          the client's end-user id (accepted; nothing depends on it)
 * @param grammar       what the output must look like (a JSON schema, a forced tool call), if anything
 * @param choices       how many choices to generate for each prompt ({@code n}), each sampled on its own
 */
public record GenerationOptions(
        SamplingParams sampling,
        int maxTokens,
        List<String> stop,
        boolean logprobs,
        int topLogprobs,
        boolean stream,
        boolean includeUsage,
        String user,
        Optional<OutputGrammar> grammar,
        int choices) {
    public GenerationOptions {
        stop = List.copyOf(stop);
    }

    public GenerationOptions withSampling(SamplingParams s) {
        return new GenerationOptions(
                s, maxTokens, stop, logprobs, topLogprobs, stream, includeUsage, user, grammar, choices);
    }

    public GenerationOptions withGrammar(Optional<OutputGrammar> g) {
        return new GenerationOptions(
                sampling, maxTokens, stop, logprobs, topLogprobs, stream, includeUsage, user, g, choices);
    }

    /**
     * The options of choice {@code index} of {@link #choices}: with a seed, choice i samples with seed + i, so
     * that the choices differ and the same request gives the same choices again.
     */
    public GenerationOptions forChoice(int index) {
        return sampling.seed().isPresent() && index > 0
                ? withSampling(sampling.withSeed(sampling.seed().getAsLong() + index))
                : this;
    }
}
