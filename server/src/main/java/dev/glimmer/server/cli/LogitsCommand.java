package dev.glimmer.server.cli;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.util.Locale;

/**
 * {@code ./glimmer logits}: the model's logits for a token list, as exact float32 values, so that
 * other tools can compare Glimmer with llama.cpp.
 */
@Command(name = "logits",
        description = "print the logits for a list of token ids as JSON (last position, or every position with --all)",
        footer = """
                Output: {"n_vocab":N,"tokens":[...],"logits":[[...]]}, one row per position printed (the last
                only, unless --all). Each value is the float32 logit in its shortest round-trip decimal form.
                The prompt is processed as one batch with causal attention, like llama.cpp's prompt evaluation.""")
final class LogitsCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(names = "--tokens", paramLabel = "IDS", required = true, split = ",",
            description = "comma-separated token ids, e.g. 1,2,3")
    int[] tokens;

    @Option(names = "--all", description = "print the logits of every position, not only the last")
    boolean all;

    @Option(names = "--cache-type", paramLabel = "T",
            description = "KV cache type, f32 or f16 (default f32, as llama.cpp's reference logits)")
    String cacheTypeName = "f32";

    @Override
    public int run(Terminal io) throws Exception {
        if (tokens.length == 0) {
            throw new UsageException("--tokens needs at least one token id");
        }
        KvCacheType cacheType = switch (cacheTypeName.toLowerCase(Locale.ROOT)) {
            case "f32" -> KvCacheType.F32;
            case "f16" -> KvCacheType.F16;
            default -> throw new UsageException("--cache-type must be f32 or f16, got '" + cacheTypeName + "'");
        };
        try (GlmModel model = GlmModel.open(modelFile.path(io));
             KvCache cache = model.newCache(Math.min(tokens.length, model.config().contextLength()), cacheType)) {
            if (tokens.length > cache.capacity()) {
                throw new UsageException(tokens.length + " tokens are more than the model's context length "
                        + cache.capacity());
            }
            GlmForward forward = new GlmForward(model, new CpuBackend(), Math.min(tokens.length, GlmForward.DEFAULT_BATCH));
            float[] logits = forward.forward(cache, tokens, 0, tokens.length, all);
            int vocab = model.vocabSize();
            PrintStream out = io.out();
            out.print("{\"n_vocab\":" + vocab + ",\"tokens\":[");
            for (int i = 0; i < tokens.length; i++) {
                out.print(i == 0 ? "" : ",");
                out.print(tokens[i]);
            }
            out.print("],\"logits\":[");
            int rows = all ? tokens.length : 1;
            StringBuilder row = new StringBuilder();
            for (int r = 0; r < rows; r++) {
                row.setLength(0);
                row.append(r == 0 ? "[" : ",[");
                for (int i = 0; i < vocab; i++) {
                    if (i > 0) {
                        row.append(',');
                    }
                    // Float.toString is the shortest decimal that reads back as the same float32.
                    row.append(Float.toString(logits[r * vocab + i]));
                }
                out.print(row.append(']'));
            }
            out.println("]}");
            out.flush();
        }
        return 0;
    }
}
