package dev.glimmer.server.cli;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.model.GlmModel;
import java.util.Locale;
import picocli.CommandLine.Option;

/**
 * The {@code --draft} and {@code --draft-tokens} of the commands that decode ({@code @Mixin DraftOptions}):
 * speculative decoding with the model's NextN (MTP) block, docs/SPECULATIVE.md.
 */
final class DraftOptions {

    @Option(
            names = "--draft",
            paramLabel = "D",
            description = "mtp: draft tokens with the model's NextN (MTP) block and verify them in one pass (the same"
                    + " output); none: plain decode steps (default)")
    String draft = "none";

    @Option(
            names = "--draft-tokens",
            paramLabel = "N",
            description = "tokens drafted per step with --draft mtp, 1 or 2 (default 1)")
    int draftTokens = 1;

    /**
     * Tokens each decode step drafts for {@code model}: 0 with {@code --draft none}.
     *
     * @throws UsageException for another value, or {@code --draft mtp} with a model that has no NextN block
     */
    int drafts(GlmModel model) {
        if (draftTokens < 1 || draftTokens > 2) {
            throw new UsageException("--draft-tokens must be 1 or 2, got " + draftTokens);
        }
        return switch (draft.toLowerCase(Locale.ROOT)) {
            case "none" -> 0;
            case "mtp" -> {
                if (model.weights().nextn() == null) {
                    throw new UsageException(
                            "--draft mtp: " + model.file().path().getFileName()
                                    + " has no NextN (MTP) block (nextn_predict_layers and blk.N.nextn.* tensors);"
                                    + " ./glimmer synth --mtp writes random models with one");
                }
                yield draftTokens;
            }
            default -> throw new UsageException("--draft must be mtp or none, got '" + draft + "'");
        };
    }

    /** Refuses a pool that cannot draft {@code drafts} tokens per step (the GPU command lists draft one). */
    static void requireDrafting(SequencePool pool, int drafts, String backendName) {
        if (drafts > pool.maxDrafts()) {
            throw new UsageException("--draft-tokens " + drafts + ": the " + backendName + " backend drafts at most "
                    + pool.maxDrafts() + " token" + (pool.maxDrafts() == 1 ? "" : "s") + " a step");
        }
    }
}
