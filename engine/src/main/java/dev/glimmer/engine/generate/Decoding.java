package dev.glimmer.engine.generate;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.grammar.TokenConstraint;
import dev.glimmer.engine.sampling.Sampler;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.sampling.TokenLogprobs;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The decode rules of one sequence after its prompt, one token at a time: pick the next token (sampled
 * from the logits, or the greedy token a GPU's argmax gave), turn it into the text that becomes visible
 * (holding back incomplete UTF-8 and possible stop strings) and say whether the sequence ends: an
 * end-of-generation token or a completed stop string ({@link FinishReason#STOP}), the token limit or a
 * full context ({@link FinishReason#LENGTH}). {@link Generator} runs it for one sequence; the server's
 * scheduler runs one per sequence, a step at a time, so that several sequences share each forward pass.
 */
public final class Decoding {

    /**
     * What one token gave.
     *
     * @param token    the token picked
     * @param text     the text that becomes visible with it (may include text held back for earlier tokens)
     * @param logprobs its log-probability and the top candidates, when asked for
     * @param finish   why the sequence ends with this token, or null when the token is to be fed next
     */
    public record Step(int token, String text, TokenLogprobs logprobs, FinishReason finish) {}

    private final Vocabulary vocabulary;
    private final int vocabSize;
    private final Sampler sampler;
    private final TextDecoder decoder;
    private final StopStrings stops;
    private final int maxTokens;
    private final boolean logprobs;
    private final int topLogprobs;
    private final int[] generated;
    /** Keeps the output inside a grammar (a JSON schema, a forced tool call); null for none. */
    private final TokenConstraint constraint;
    /** What each decode step must give back: fixed by the sampling, the log-probabilities and the grammar. */
    private final SequencePool.Readout readout;

    private int count;

    /**
     * @param prompt      the prompt, which the sampler's penalties count
     * @param room        positions the context has left after the prompt: the last token picked need not fit
     * @param logprobs    whether each step reports its token's log-probability
     * @param topLogprobs how many top candidates it reports with it
     * @param constraint  the grammar the output must keep to (masks impossible tokens); null for none
     */
    public Decoding(
            Vocabulary vocabulary,
            int vocabSize,
            SamplingParams sampling,
            int[] prompt,
            List<String> stop,
            int maxTokens,
            int room,
            boolean logprobs,
            int topLogprobs,
            TokenConstraint constraint) {
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
        this.sampler = new Sampler(sampling, vocabSize);
        for (int token : prompt) {
            sampler.accept(token);
        }
        this.decoder = vocabulary.newDecoder();
        this.stops = new StopStrings(stop);
        this.maxTokens = maxTokens;
        this.logprobs = logprobs;
        this.topLogprobs = topLogprobs;
        this.generated = new int[Math.max(1, Math.min(maxTokens, room + 1))];
        this.constraint = constraint;
        int[] banned = logprobs || constraint != null ? null : sampler.greedyBans();
        this.readout = banned == null ? SequencePool.Readout.LOGITS : SequencePool.Readout.greedyBanning(banned);
    }

    /**
     * What a decode step must give back for the next pick: only the greedy token when the sampler picks the first
     * maximum (maybe among all but some banned tokens) and nothing else reads the logits (no log-probabilities
     * asked for, no grammar masking them); the logits otherwise.
     */
    public SequencePool.Readout readout() {
        return readout;
    }

    /**
     * Picks the tokens after a speculative step ({@link SequencePool#speculate}): row i's pick, made exactly as
     * {@link #next} makes it, is the next token, and while it equals draft i and does not end the sequence, row i + 1's
     * pick follows. Every pick goes through {@link #next}, so the grammar, the logit bias, the penalties, the stop
     * strings and the limits apply to each accepted token.
     *
     * <p>Sampled rows: for a drafter that proposes one token d (greedy), speculative sampling's rejection rule takes d
     * with its probability p(d) under the sampler and otherwise draws from the other tokens in proportion to theirs:
     * that is drawing from p and comparing with d. Drawing as a plain step draws (the same random numbers, one per
     * pick, in the same order) makes the picks not only distributed as without drafts but, with a seed, the same
     * tokens: the output does not depend on whether or when a sequence drafts. Greedy picks are the same anyway.
     *
     * @param contextRoom positions the context has left after row 0 (each further row has one fewer)
     * @return the picks: the accepted drafts, then the pick that differs or ends the sequence (at least one)
     */
    public List<Step> verify(SequencePool.Speculation speculation, int contextRoom) {
        int[] drafts = speculation.drafts();
        List<Step> picks = new ArrayList<>(drafts.length + 1);
        for (int i = 0; ; i++) {
            SequencePool.Next row = speculation.rows()[i];
            Step step = next(row.logits(), row.greedyToken(), contextRoom - i);
            picks.add(step);
            if (step.finish() != null || i == drafts.length || step.token() != drafts[i]) {
                return picks;
            }
        }
    }

    /**
     * Picks the next token and applies the rules.
     *
     * @param logits      the logits after the last token fed, or null when {@code greedyToken} is given
     *                    (only when {@link #readout} took it: not a banned token)
     * @param contextRoom positions the context has left: with none, the picked token is the last
     */
    public Step next(float[] logits, int greedyToken, int contextRoom) {
        int token;
        if (logits == null) {
            token = greedyToken;
        } else {
            long[] allowed = constraint == null ? null : constraint.allowed(tokensLeft(contextRoom));
            token = sampler.sample(logits, allowed);
        }
        if (constraint != null) {
            constraint.accept(token);
        }
        sampler.accept(token);
        TokenLogprobs lp = logprobs ? TokenLogprobs.of(logits, vocabSize, token, topLogprobs) : null;
        generated[count++] = token;
        if (vocabulary.isEndOfGeneration(token)) {
            return new Step(token, stops.push(decoder.finish()) + stops.flush(), lp, FinishReason.STOP);
        }
        String visible = stops.push(decoder.next(token));
        if (stops.matched()) {
            return new Step(token, visible, lp, FinishReason.STOP);
        }
        boolean full = count == maxTokens || count == generated.length || contextRoom == 0;
        if (full) {
            // The last token: release whatever is held back (no stop string can complete any more).
            visible += stops.push(decoder.finish());
            visible += stops.matched() ? "" : stops.flush();
        }
        FinishReason finish = stops.matched() ? FinishReason.STOP : full ? FinishReason.LENGTH : null;
        return new Step(token, visible, lp, finish);
    }

    /**
     * How many tokens may still be picked, the next one included: the token limit, or the context (the next
     * token needs no room in the cache; each one after it does). A grammar plans its closing within this.
     */
    private int tokensLeft(int contextRoom) {
        return Math.max(1, Math.min(tokensLeft(), contextRoom + 1));
    }

    /** How many tokens the token limit still allows (the context may allow fewer). */
    public int tokensLeft() {
        return Math.min(maxTokens, generated.length) - count;
    }

    /** The stop string that ended the sequence, or null when none did. */
    public String matchedStop() {
        return stops.matchedStop();
    }

    /** Tokens picked so far. */
    public int count() {
        return count;
    }

    /** The tokens picked so far, in order. */
    public int[] tokens() {
        return Arrays.copyOf(generated, count);
    }
}
