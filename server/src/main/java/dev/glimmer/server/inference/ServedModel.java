package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendChoice;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.Backends;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.chat.ChatFormat;
import dev.glimmer.engine.chat.ChatTemplates;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.grammar.TokenTrie;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.metrics.ServerMetrics;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The loaded model and everything that serves it: tokenizer, chat format, the backend's
 * {@link StepRunner}, the session manager and the scheduler that owns the forward pass. Closing it
 * stops the scheduler, frees the caches and the backend (a GPU's weights) and unmaps the file.
 */
public final class ServedModel implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(ServedModel.class.getName());
    /** The KV cache precision: the engine's default (F16, as llama.cpp), the one ./glimmer generate uses. */
    private static final KvCacheType CACHE_TYPE = KvCacheType.DEFAULT;
    /** How long {@link #close()} waits for a running step to return. */
    public static final Duration STOP_WAIT = Duration.ofSeconds(30);

    private final GlmModel model;
    private final ServedModelFacts facts;
    private final Tokenizer tokenizer;
    private TokenTrie tokenTrie;
    private final ChatFormat chatFormat;
    private final StepRunner<?> steps;
    private final SessionManager<?> sessions;
    private final Scheduler<?> scheduler;
    private final int ctx;

    private ServedModel(GlmModel model, ServedModelFacts facts, Tokenizer tokenizer, ChatFormat chatFormat,
                        StepRunner<?> steps, Scheduler<?> scheduler, int ctx) {
        this.model = model;
        this.facts = facts;
        this.tokenizer = tokenizer;
        this.chatFormat = chatFormat;
        this.steps = steps;
        this.sessions = scheduler.sessions();
        this.scheduler = scheduler;
        this.ctx = ctx;
    }

    /** Opens {@code path}, chooses its backend ({@code --backend}) and starts its scheduler. */
    public static ServedModel load(Path path, boolean demo, ServerConfig config, ServerMetrics metrics) throws IOException {
        return load(path, demo, config, metrics, Backends::choose);
    }

    /** {@link #load(Path, boolean, ServerConfig, ServerMetrics)} with the backend from {@code chooser}. */
    public static ServedModel load(Path path, boolean demo, ServerConfig config, ServerMetrics metrics,
                                   BackendChooser chooser) throws IOException {
        GlmModel model = GlmModel.open(path);
        StepRunner<?> steps = null;
        try {
            Tokenizer tokenizer = Tokenizer.fromMetadata(model.file().metadata());
            ChatFormat format = ChatTemplates.recognise(
                    model.file().metadata().optString(ChatTemplates.GGUF_KEY).orElse(null));
            format.warning().ifPresent(LOG::warning);
            int ownCtx = model.config().contextLength();
            int ctx = Math.min(config.ctx() == 0 ? ServerConfig.DEFAULT_CTX : config.ctx(), ownCtx);
            if (config.ctx() > ownCtx) {
                LOG.info("--ctx " + config.ctx() + " is more than the model's own context; serving " + ctx);
            }
            BackendChoice choice = chooser.choose(config.backend(), model);
            String reason = choice.reason();
            try {
                steps = runner(choice, model, config, ctx);
            } catch (RuntimeException e) {
                if (choice.kind() == BackendKind.CPU) {
                    throw e;
                }
                // as after a failed self-test: the CPU, and the reason in the log and /v1/models
                reason = choice.name() + " not used: " + (e instanceof PoolDoesNotFitException ? e.getMessage()
                        : "its KV pool could not be made: " + e.getMessage());
                LOG.log(Level.WARNING, reason, e instanceof PoolDoesNotFitException ? null : e);
                steps = cpuRunner(model, config, ctx);
            }
            String backend = steps.backend().cliName();
            LOG.info("serving on " + backend + ": " + reason);
            long cacheBytes = steps.cacheBytes();
            long budget = steps.budgetBytes(config.kvBudgetMb() << 20, config.parallel());
            Scheduler<?> scheduler = start(steps, budget, Vocabulary.of(tokenizer, true), model, metrics, config);
            SessionManager<?> sessions = scheduler.sessions();
            LOG.info("KV budget " + (sessions.budgetBytes() >> 20) + " MB" + (steps.backend() == BackendKind.CPU ? "" : " of "
                    + backend + " memory") + ": " + sessions.budgetBytes() / cacheBytes + " cached conversations of "
                    + ctx + " tokens");
            ServedModelFacts facts = ServedModelFacts.of(model.file(), ctx, demo, backend, reason);
            metrics.modelLoaded(facts.id(), ctx, sessions.budgetBytes() / cacheBytes);
            return new ServedModel(model, facts, tokenizer, format, steps, scheduler, ctx);
        } catch (RuntimeException | IOException e) {
            if (steps != null) {
                steps.close();
            }
            model.close();
            throw e;
        }
    }

    /**
     * The CPU's batched forward pass when the choice is the CPU (the server batches the sequences; a CPU
     * choice holds nothing to close), else the chosen backend's decoders, one per conversation.
     */
    /** The session manager of {@code steps}' caches and the scheduler that runs them, started. */
    /**
     * The scheduler over {@code steps}, with a session manager of {@code budget} bytes; its thread frees the caches,
     * the backend and the model itself once it has stopped, so that nothing is freed under a running step.
     */
    private static <C extends SequenceCache> Scheduler<C> start(StepRunner<C> steps, long budget, Vocabulary vocabulary,
                                                                GlmModel model, ServerMetrics metrics, ServerConfig config) {
        SessionManager<C> sessions = new SessionManager<>(steps::newCache, steps.cacheBytes(), budget, config.parallel());
        return new Scheduler<>(steps, vocabulary, model.vocabSize(), sessions, metrics, config.parallel(),
                config.promptChunk(), config.queue(), () -> {
                    sessions.close();
                    steps.close();
                    model.close();
                });
    }

    /** The runner of {@code choice}; a GPU choice is closed when its pool cannot be made. */
    private static StepRunner<?> runner(BackendChoice choice, GlmModel model, ServerConfig config, int ctx) {
        if (choice.kind() == BackendKind.CPU) {
            return cpuRunner(model, config, ctx);
        }
        try {
            return new DecoderStepRunner(choice, DecodeModels.of(model.file(), model.config()), ctx,
                    config.kvBudgetMb() << 20, config.parallel());
        } catch (RuntimeException e) {
            choice.close();
            throw e;
        }
    }

    private static StepRunner<?> cpuRunner(GlmModel model, ServerConfig config, int ctx) {
        int threads = config.threads() > 0 ? config.threads() : CpuBackend.defaultThreads();
        return new CpuStepRunner(model, threads, ctx, CACHE_TYPE, Math.max(config.promptChunk(), config.parallel()));
    }

    public ServedModelFacts facts() {
        return facts;
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }

    /** The vocabulary arranged for token masks (constrained decoding), built on first use. */
    public synchronized TokenTrie tokenTrie() {
        if (tokenTrie == null) {
            tokenTrie = TokenTrie.of(tokenizer);
        }
        return tokenTrie;
    }

    public ChatFormat chatFormat() {
        return chatFormat;
    }

    public Scheduler<?> scheduler() {
        return scheduler;
    }

    public SessionManager<?> sessions() {
        return sessions;
    }

    /** The tokens an answer may take when its request sets no limit: the context, or a short answer for the demo model. */
    public int defaultMaxTokens() {
        return facts.demo() ? DemoModel.MAX_TOKENS : ctx;
    }

    /**
     * Whether the model thinks when a request does not say: GLM does, but the demo model's random weights
     * never close a thought, so its answers would have reasoning and no content.
     */
    public boolean thinksByDefault() {
        return !facts.demo();
    }

    /** The context served, in tokens. */
    public int ctx() {
        return ctx;
    }

    /** The model's own context length (what it was trained for): the most {@code --ctx} can serve. */
    public int ownCtx() {
        return model.config().contextLength();
    }

    public int vocabSize() {
        return model.vocabSize();
    }

    /**
     * Stops generating (running requests get their final chunk) and frees the caches, the backend and the
     * weights once no step runs any more ({@link Scheduler#close}); waits up to {@code wait} for that.
     */
    public void close(Duration wait) {
        if (!scheduler.close(wait)) {
            LOG.warning("a forward step is still running after " + wait.toMillis() + " ms; the model's memory is"
                    + " freed when it returns, never under it");
        }
    }

    @Override
    public void close() {
        close(STOP_WAIT);
    }
}
