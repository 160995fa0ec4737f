package dev.glimmer.server.cli;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import java.io.PrintStream;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer logits}: the model's logits for a token list, as exact float32 values, so that
 * other tools can compare Glimmer with llama.cpp.
 */
@Command(
        name = "logits",
        description = "print the logits for a list of token ids as JSON (last position, or every position with --all)",
        footer = """
                Output: {"n_vocab":N,"tokens":[...],"logits":[[...]]}, one row per position printed (the last
                only, unless --all). Each value is the float32 logit in its shortest round-trip decimal form.
                The prompt is processed as one batch with causal attention, like llama.cpp's prompt evaluation
                (on a GPU --backend: through its prompt command list; with --all, one token at a time through its
                decode step, since the prompt list computes the last position's logits only).""")
final class LogitsCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--tokens",
            paramLabel = "IDS",
            required = true,
            split = ",",
            description = "comma-separated token ids, e.g. 1,2,3")
    int[] tokens;

    @Option(names = "--all", description = "print the logits of every position, not only the last")
    boolean all;

    @Option(
            names = "--cache-type",
            paramLabel = "T",
            description = "KV cache type on the CPU, f32 or f16 (default f32, as llama.cpp's reference logits)")
    String cacheTypeName = "f32";

    @Option(
            names = "--backend",
            paramLabel = "B",
            completionCandidates = GenerateCommand.ChoosableBackends.class,
            description = "${COMPLETION-CANDIDATES} (default cpu)")
    String backendName = "cpu";

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
        BackendKind requested = BackendKind.parse(backendName, BackendKind.CHOOSABLE);
        try (GlmModel model = GlmModel.open(modelFile.path(io))) {
            int capacity = Math.min(tokens.length, model.config().contextLength());
            if (tokens.length > capacity) {
                throw new UsageException(
                        tokens.length + " tokens are more than the model's context length " + capacity);
            }
            Backends.CpuOptions cpu = new Backends.CpuOptions(
                    CpuBackend.defaultThreads(), cacheType, Math.min(tokens.length, GlmForward.DEFAULT_BATCH));
            float[] logits;
            try (BackendChoice choice = Backends.choose(requested, model, cpu);
                    SequencePool pool = choice.pool(1, capacity);
                    SequencePool.Sequence sequence = pool.open()) {
                if (choice.kind() != requested) {
                    io.err().println("glimmer logits: running on " + choice.name() + ": " + choice.reason());
                }
                logits = all
                        ? pool.promptLogits(sequence, tokens, 0, tokens.length)
                        : pool.prompt(sequence, tokens, 0, tokens.length, SequencePool.Readout.LOGITS)
                                .logits();
            }
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
