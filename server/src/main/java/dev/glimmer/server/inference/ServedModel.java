package dev.glimmer.server.inference;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.chat.ChatFormat;
import dev.glimmer.engine.chat.ChatTemplates;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.grammar.TokenTrie;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.MemoryBudget;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.metrics.ServerMetrics;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The loaded model and everything that serves it: tokenizer, chat format, the backend and its
 * {@link SequencePool}, the session manager and the scheduler that owns the forward pass. Closing it
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
    private final SessionManager sessions;
    private final Scheduler scheduler;
    private final int ctx;

    private ServedModel(
            GlmModel model,
            ServedModelFacts facts,
            Tokenizer tokenizer,
            ChatFormat chatFormat,
            Scheduler scheduler,
            int ctx) {
        this.model = model;
        this.facts = facts;
        this.tokenizer = tokenizer;
        this.chatFormat = chatFormat;
        this.sessions = scheduler.sessions();
        this.scheduler = scheduler;
        this.ctx = ctx;
    }

    /** Opens {@code path}, chooses its backend ({@code --backend}) and starts its scheduler. */
    public static ServedModel load(Path path, boolean demo, ServerConfig config, ServerMetrics metrics)
            throws IOException {
        return load(path, demo, config, metrics, Backends::choose);
    }

    /** {@link #load(Path, boolean, ServerConfig, ServerMetrics)} with the backend from {@code chooser}. */
    public static ServedModel load(
            Path path, boolean demo, ServerConfig config, ServerMetrics metrics, BackendChooser chooser)
            throws IOException {
        return load(path, demo, config, metrics, chooser, Drafting.Use.WHILE_PAYING);
    }

    /**
     * {@link #load(Path, boolean, ServerConfig, ServerMetrics, BackendChooser)} with drafting as {@code draftUse} says
     * (tests: {@link Drafting.Use#ALWAYS}, so that every lone step is speculative whatever it costs).
     */
    public static ServedModel load(
            Path path,
            boolean demo,
            ServerConfig config,
            ServerMetrics metrics,
            BackendChooser chooser,
            Drafting.Use draftUse)
            throws IOException {
        GlmModel model = GlmModel.open(path);
        BackendChoice choice = null;
        SequencePool pool = null;
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
            int threads = config.threads() > 0 ? config.threads() : CpuBackend.defaultThreads();
            int drafts = drafts(config.drafts(), model);
            // a prompt chunk is one batch of the CPU's forward pass, a decode step one of every running sequence
            choice = chooser.choose(
                    config.backend(),
                    model,
                    new Backends.CpuOptions(
                            threads, CACHE_TYPE, Math.max(config.promptChunk(), config.parallel()), drafts));
            String reason = choice.reason();
            try {
                pool = choice.pool(slots(choice, model, ctx, config, drafts > 0), ctx);
            } catch (RuntimeException e) {
                if (choice.kind() == BackendKind.CPU) {
                    throw e;
                }
                // as after a failed self-test: the CPU, and the reason in the log and /v1/models
                reason = choice.name() + " not used: "
                        + (e instanceof PoolDoesNotFitException
                                ? e.getMessage()
                                : "its KV pool could not be made: " + e.getMessage());
                LOG.log(Level.WARNING, reason, e instanceof PoolDoesNotFitException ? null : e);
                choice.close();
                choice = chooser.choose(
                        BackendKind.CPU,
                        model,
                        new Backends.CpuOptions(
                                threads, CACHE_TYPE, Math.max(config.promptChunk(), config.parallel()), drafts));
                pool = choice.pool(slots(choice, model, ctx, config, drafts > 0), ctx);
            }
            String backend = choice.name();
            LOG.info("serving on " + backend + ": " + reason);
            if (choice.kind() == BackendKind.CPU) {
                model.file().populate(); // the first requests then take no page faults
            }
            if (drafts > pool.maxDrafts()) {
                String why = pool.maxDrafts() == 0
                        ? "the " + backend + " backend does not draft (docs/SPECULATIVE.md)"
                        : "the " + backend + " backend drafts at most " + pool.maxDrafts() + " token a step";
                if (config.drafts().mode() == ServerConfig.DraftMode.MTP) {
                    throw new InvalidInputException("--draft mtp: " + why + "; serve with --draft none");
                }
                LOG.info(why);
                drafts = pool.maxDrafts();
            }
            if (drafts > 0) {
                LOG.info("drafting " + drafts + " token" + (drafts == 1 ? "" : "s")
                        + " per step with the model's NextN block while it pays (--draft none turns it off)");
            }
            long cacheBytes = pool.bytesPerSequence();
            Scheduler scheduler =
                    start(choice, pool, Vocabulary.of(tokenizer, true), model, metrics, config, drafts, draftUse);
            SessionManager sessions = scheduler.sessions();
            LOG.info("KV budget " + (sessions.budgetBytes() >> 20) + " MB"
                    + (choice.kind() == BackendKind.CPU ? "" : " of " + backend + " memory") + ": "
                    + sessions.budgetBytes() / cacheBytes + " cached conversations of "
                    + ctx + " tokens");
            ServedModelFacts facts = ServedModelFacts.of(model.file(), ctx, demo, backend, reason);
            metrics.modelLoaded(facts.id(), ctx, sessions.budgetBytes() / cacheBytes);
            return new ServedModel(model, facts, tokenizer, format, scheduler, ctx);
        } catch (RuntimeException | IOException e) {
            if (pool != null) {
                pool.close();
            }
            if (choice != null) {
                choice.close();
            }
            model.close();
            throw e;
        }
    }

    /**
     * Tokens a decode step drafts as {@code --draft} asks: {@code --draft-tokens} with {@code mtp}, or with
     * {@code auto} where the model has the NextN block; 0 otherwise.
     *
     * @throws InvalidInputException for {@code --draft mtp} with a model that has no NextN block
     */
    private static int drafts(ServerConfig.Drafts drafts, GlmModel model) {
        boolean hasBlock = model.weights().nextn() != null;
        return switch (drafts.mode()) {
            case NONE -> 0;
            case AUTO -> hasBlock ? drafts.tokens() : 0;
            case MTP -> {
                if (!hasBlock) {
                    throw new InvalidInputException(
                            "--draft mtp: " + model.file().path().getFileName()
                                    + " has no NextN (MTP) block (nextn_predict_layers and blk.N.nextn.* tensors);"
                                    + " serve it with --draft none");
                }
                yield drafts.tokens();
            }
        };
    }

    /**
     * The sequences the pool holds, one per cached conversation: as many as {@code --kv-budget} holds, at least
     * {@code parallel}; with no budget, {@link MemoryBudget#poolSlots} (a follow-up turn can find its conversation
     * while others run), fewer, down to {@code parallel}, where a GPU offers less ({@link MemoryBudget#forServing}).
     * With {@code drafting} a GPU pool's lists carry the NextN block (its weights, its KV rows), counted too.
     *
     * @throws PoolDoesNotFitException when the device says it cannot hold the pool, with what to change
     */
    private static int slots(BackendChoice choice, GlmModel model, int ctx, ServerConfig config, boolean drafting) {
        long budgetBytes = config.kvBudgetMb() << 20;
        int parallel = config.parallel();
        // what --kv-budget holds, at least parallel; 0 without a budget
        int budgeted = budgetBytes == 0
                ? 0
                : Math.toIntExact(Math.min(
                        Math.max(parallel, budgetBytes / choice.pools().bytesPerSequence(ctx)), Integer.MAX_VALUE));
        Optional<SequencePools.DeviceMemory> memory = choice.deviceMemory();
        if (memory.isEmpty()) {
            return budgeted > 0 ? budgeted : MemoryBudget.poolSlots(parallel);
        }
        SequencePools.DeviceMemory device = capped(memory.get(), choice, config.gpuMemoryGb());
        long available = device.available();
        boolean weightsThere = device.weightsThere();
        // a drafting pool's lists hold the NextN block too: its weights and its KV rows
        DecodeModel decodeModel = DecodeModels.of(model.file(), model.config(), drafting);
        MemoryBudget budget;
        if (budgeted > 0) {
            budget = MemoryBudget.of(decodeModel, ctx, budgeted);
        } else {
            budget = MemoryBudget.forServing(decodeModel, ctx, parallel, available, weightsThere);
        }
        if (!budget.fits(available, weightsThere)) {
            throw new PoolDoesNotFitException(budget.doesNotFit(device.device(), available, weightsThere));
        }
        return budget.slots();
    }

    /**
     * The device memory the pool may take under {@code --gpu-memory} ({@code capGb}, 0 = no cap): the cap less what
     * this process holds there already where the weights are uploaded, when that is less than the device offers.
     */
    private static SequencePools.DeviceMemory capped(
            SequencePools.DeviceMemory memory, BackendChoice choice, long capGb) {
        long held = memory.weightsThere() ? choice.gpuMemoryUsed().orElse(0) : 0;
        long allowed = capGb * 1_000_000_000L - held;
        if (capGb == 0 || allowed >= memory.available()) {
            return memory;
        }
        return new SequencePools.DeviceMemory(
                "--gpu-memory " + capGb + " (" + held / 1_000_000 + " MB already taken)",
                Math.max(0, allowed),
                memory.weightsThere());
    }

    /**
     * The scheduler over {@code pool}, with a session manager that keeps to the pool's slots; its thread frees the
     * caches, the pool, the backend and the model itself once it has stopped, so that nothing is freed under a running
     * step.
     */
    private static Scheduler start(
            BackendChoice choice,
            SequencePool pool,
            Vocabulary vocabulary,
            GlmModel model,
            ServerMetrics metrics,
            ServerConfig config,
            int drafts,
            Drafting.Use draftUse) {
        ServerConfig.CacheTiers t = config.cacheTiers();
        KvTiers tiers = t.ramMb() == 0 && t.diskMb() == 0
                ? null
                : new KvTiers(
                        KvTiers.modelId(model.file()),
                        pool.kvLayout(),
                        pool.bytesPerPosition(),
                        t.ramMb() << 20,
                        Optional.of(t.dir()),
                        t.diskMb() << 20);
        if (tiers != null) {
            LOG.info("conversations evicted from the KV budget go to " + t.ramMb() + " MB of RAM"
                    + (t.diskMb() > 0 ? ", then up to " + t.diskMb() + " MB in " + t.dir() : ""));
        }
        SessionManager sessions =
                new SessionManager(pool, pool.slots() * pool.bytesPerSequence(), config.parallel(), tiers);
        return new Scheduler(
                pool,
                choice.kind() != BackendKind.CPU,
                vocabulary,
                model.vocabSize(),
                sessions,
                metrics,
                config.parallel(),
                config.promptChunk(),
                config.queue(),
                drafts,
                draftUse,
                () -> {
                    sessions.close();
                    try {
                        pool.close();
                    } finally {
                        choice.close();
                        model.close();
                    }
                });
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

    public Scheduler scheduler() {
        return scheduler;
    }

    public SessionManager sessions() {
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
