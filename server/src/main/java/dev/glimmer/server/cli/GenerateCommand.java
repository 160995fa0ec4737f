package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.chat.ChatFormat;
import dev.glimmer.engine.chat.ChatMessage;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.engine.chat.ChatTemplates;
import dev.glimmer.engine.chat.Role;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.GenerationRequest;
import dev.glimmer.engine.generate.GenerationResult;
import dev.glimmer.engine.generate.Generator;
import dev.glimmer.engine.generate.Timings;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.tokenizer.Tokenizer;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./glimmer generate}: one completion of a prompt, streamed to the terminal (or as JSON). */
@Command(
        name = "generate",
        description = "generate a completion of a prompt (--prompt as is, or --chat as one user message)",
        footer = """
                Text is streamed to stdout as it is generated; prompt size, speed and the finish reason go to
                stderr. With --json, stdout gets {"text","tokens","finish_reason","prompt_tokens","timings","drafts"}.
                --draft mtp (a file with the NextN block; the CPU only): each step drafts --draft-tokens tokens and
                verifies them with the token in one pass, while the drafts accepted pay for the step's cost
                (it tries now and then); the output is the same, the drafts and their acceptance go to stderr.
                Generation stops at an end-of-generation token, after --max-tokens, or when the context is full.
                --backend runs the model where the server would (cuda, metal and auto after the GPU self-test;
                emulated: the GPU command lists on the CPU kernel emulator, slow, needs clang-19); a GPU keeps its
                KV cache in the type its kernels use, whatever --cache-type says.
                Example: ./glimmer generate --model model.gguf --chat 'Tell me a story' --temperature 0""")
final class GenerateCommand implements Subcommand {
    static final int DEFAULT_MAX_TOKENS = 256;

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--prompt",
            paramLabel = "T",
            description = "the prompt text, control tokens such as <|user|> parsed")
    String prompt;

    @Option(names = "--chat", paramLabel = "T", description = "a user message, rendered with the model's chat format")
    String chat;

    @Option(
            names = "--max-tokens",
            paramLabel = "N",
            description = "the most tokens to generate (default " + DEFAULT_MAX_TOKENS + ")")
    int maxTokens = DEFAULT_MAX_TOKENS;

    @Option(
            names = "--temperature",
            paramLabel = "X",
            description = "sampling temperature, 0 for greedy (default " + SamplingParams.DEFAULT_TEMPERATURE + ")")
    double temperature = SamplingParams.DEFAULT_TEMPERATURE;

    @Option(names = "--seed", paramLabel = "S", description = "random seed, for repeatable sampling")
    Long seed;

    @Option(
            names = "--ctx",
            paramLabel = "N",
            description = "context size in tokens (default 8192, at most the model's)")
    Integer contextSize;

    @Option(
            names = "--cache-type",
            paramLabel = "T",
            description = "KV cache type on the CPU, f16 or f32 (default f16)")
    String cacheTypeName = KvCacheType.DEFAULT.name();

    @Option(
            names = "--backend",
            paramLabel = "B",
            completionCandidates = ChoosableBackends.class,
            description = "${COMPLETION-CANDIDATES} (default cpu)")
    String backendName = "cpu";

    /** The backends generate and logits run on, for their --help. */
    static final class ChoosableBackends implements Iterable<String> {
        @Override
        public java.util.Iterator<String> iterator() {
            return BackendKind.CHOOSABLE.stream()
                    .sorted()
                    .map(BackendKind::cliName)
                    .iterator();
        }
    }

    @Option(names = "--json", description = "print one JSON object at the end instead of streaming text")
    boolean json;

    @Mixin
    DraftOptions draftOptions;

    @Override
    public int run(Terminal io) throws Exception {
        if ((prompt == null) == (chat == null)) {
            throw new UsageException("give exactly one of --prompt T and --chat T");
        }
        if (maxTokens <= 0) {
            throw new UsageException("--max-tokens must be positive, got " + maxTokens);
        }
        SamplingParams sampling = SamplingParams.defaults().withTemperature((float) temperature);
        if (seed != null) {
            sampling = sampling.withSeed(seed);
        }
        KvCacheType cacheType = switch (cacheTypeName.toLowerCase(Locale.ROOT)) {
            case "f16" -> KvCacheType.F16;
            case "f32" -> KvCacheType.F32;
            default -> throw new UsageException("--cache-type must be f16 or f32, got '" + cacheTypeName + "'");
        };
        BackendKind requested = BackendKind.parse(backendName, BackendKind.CHOOSABLE);
        try (GlmModel model = GlmModel.open(modelFile.path(io))) {
            Tokenizer tokenizer = Tokenizer.fromMetadata(model.file().metadata());
            String text = prompt != null ? prompt : chatPrompt(model, chat, io);
            int[] promptTokens = tokenizer.encode(text, true);
            if (promptTokens.length == 0) {
                throw new UsageException("the prompt is empty");
            }
            int drafts = draftOptions.drafts(model);
            Backends.CpuOptions cpu =
                    new Backends.CpuOptions(CpuBackend.defaultThreads(), cacheType, GlmForward.DEFAULT_BATCH, drafts);
            try (BackendChoice choice = Backends.choose(requested, model, cpu);
                    SequencePool pool = choice.pool(1, contextSize != null ? contextSize : model.defaultContext());
                    SequencePool.Sequence sequence = pool.open()) {
                if (choice.kind() != requested) {
                    io.err().println("glimmer generate: running on " + choice.name() + ": " + choice.reason());
                }
                DraftOptions.requireDrafting(pool, drafts, choice.name());
                Generator generator = new Generator(
                        pool,
                        sequence,
                        Vocabulary.of(tokenizer, true),
                        model.vocabSize(),
                        GlmForward.DEFAULT_BATCH,
                        drafts,
                        SequencePool.DraftFilter.NONE,
                        Drafting.Use.WHILE_PAYING);
                GenerationResult result = generator.generate(
                        new GenerationRequest(promptTokens, sampling, maxTokens, List.of(), false),
                        event -> {
                            if (!json) {
                                io.out().print(event.text());
                                io.out().flush();
                            }
                        },
                        () -> false);
                Timings t = result.timings();
                if (json) {
                    io.out().println(toJson(result));
                } else {
                    io.out().println();
                    io.err()
                            .printf(
                                    Locale.ROOT,
                                    "%d prompt tokens in %.0f ms (%.1f tok/s); %d tokens at %.1f tok/s; finish: %s%s%n",
                                    t.promptTokens(),
                                    t.promptMillis(),
                                    t.promptTokensPerSecond(),
                                    t.generatedTokens(),
                                    t.tokensPerSecond(),
                                    result.finish().apiName(),
                                    drafts == 0
                                            ? ""
                                            : String.format(
                                                    Locale.ROOT,
                                                    "; drafts: %d, accepted %d (%.0f %%)",
                                                    result.drafts().drafted(),
                                                    result.drafts().accepted(),
                                                    100 * result.drafts().acceptance()));
                }
            }
        }
        return 0;
    }

    /** The user message as the model's chat format renders it, ending with the assistant's turn. */
    private static String chatPrompt(GlmModel model, String message, Terminal io) {
        ChatFormat format = ChatTemplates.recognise(
                model.file().metadata().optString(ChatTemplates.GGUF_KEY).orElse(null));
        format.warning().ifPresent(w -> io.err().println("glimmer generate: " + w));
        ChatMessage user = new ChatMessage(Role.USER, message, null, List.of(), null, null);
        return format.template().render(new ChatRequest(List.of(user), List.of(), true, true));
    }

    private static String toJson(GenerationResult result) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        ObjectNode out = mapper.createObjectNode();
        out.put("text", result.text());
        var tokens = out.putArray("tokens");
        for (int token : result.tokens()) {
            tokens.add(token);
        }
        out.put("finish_reason", result.finish().apiName());
        Timings t = result.timings();
        out.put("prompt_tokens", t.promptTokens());
        ObjectNode timings = out.putObject("timings");
        timings.put("prompt_ms", t.promptMillis());
        timings.put("prompt_tokens_per_second", t.promptTokensPerSecond());
        timings.put("generated_tokens", t.generatedTokens());
        timings.put("generation_ms", t.generationMillis());
        timings.put("tokens_per_second", t.tokensPerSecond());
        ObjectNode drafts = out.putObject("drafts");
        drafts.put("drafted", result.drafts().drafted());
        drafts.put("accepted", result.drafts().accepted());
        return mapper.writeValueAsString(out);
    }
}
