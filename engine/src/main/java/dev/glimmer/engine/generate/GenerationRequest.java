package dev.glimmer.engine.generate;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.sampling.SamplingParams;
import java.util.List;

/**
 * What to generate.
 *
 * @param prompt    the prompt's token ids (processed after whatever the KV cache already holds)
 * @param sampling  how to pick tokens
 * @param maxTokens the most tokens to generate
 * @param stop      stop strings: generation ends where one appears, and it is not returned
 * @param logprobs  whether each token comes with its log-probability ({@link TokenEvent#logprob}); that needs every
 *                  step's logits, where a greedy generation otherwise reads only its tokens back from a GPU
 */
public record GenerationRequest(
        int[] prompt, SamplingParams sampling, int maxTokens, List<String> stop, boolean logprobs) {

    public GenerationRequest {
        if (prompt.length == 0) {
            throw new InvalidInputException("the prompt is empty: at least one token is needed");
        }
        if (maxTokens <= 0) {
            throw new InvalidInputException("max tokens must be positive, got " + maxTokens);
        }
        stop = List.copyOf(stop);
        if (stop.stream().anyMatch(String::isEmpty)) {
            throw new InvalidInputException("stop strings must not be empty");
        }
    }
}
