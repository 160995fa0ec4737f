package dev.glimmer.engine.generate;

/**
 * How long a generation took.
 *
 * @param promptTokens     tokens processed as the prompt
 * @param promptMillis     time to process them (up to the first logits)
 * @param generatedTokens  tokens generated
 * @param generationMillis time from the first logits to the end
 */
public record Timings(int promptTokens, double promptMillis, int generatedTokens, double generationMillis) {

    public double promptTokensPerSecond() {
        return promptMillis > 0 ? promptTokens * 1000.0 / promptMillis : 0;
    }

    public double tokensPerSecond() {
        return generationMillis > 0 ? generatedTokens * 1000.0 / generationMillis : 0;
    }
}
