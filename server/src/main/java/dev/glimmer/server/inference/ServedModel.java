package dev.glimmer.server.inference;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.chat.ChatFormat;
import dev.glimmer.engine.chat.ChatTemplates;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.metrics.ServerMetrics;

import java.io.IOException;
import java.nio.file.Path;
import java.util.logging.Logger;

/**
 * The loaded model and everything that serves it: tokenizer, chat format, the session manager
 * and the scheduler that owns the forward pass. Closing it stops the scheduler, frees the caches
 * and unmaps the file.
 */
public final class ServedModel implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(ServedModel.class.getName());
    /** The KV cache precision: the engine's default (F16, as llama.cpp), the one ./glimmer generate uses. */
    private static final KvCacheType CACHE_TYPE = KvCacheType.DEFAULT;

    private final GlmModel model;
    private final ServedModelFacts facts;
    private final Tokenizer tokenizer;
    private final ChatFormat chatFormat;
    private final SessionManager sessions;
    private final Scheduler scheduler;
    private final int ctx;

    private ServedModel(GlmModel model, ServedModelFacts facts, Tokenizer tokenizer, ChatFormat chatFormat,
                        SessionManager sessions, Scheduler scheduler, int ctx) {
        this.model = model;
        this.facts = facts;
        this.tokenizer = tokenizer;
        this.chatFormat = chatFormat;
        this.sessions = sessions;
        this.scheduler = scheduler;
        this.ctx = ctx;
    }

    /** Opens {@code path} and starts its scheduler. */
    public static ServedModel load(Path path, boolean demo, ServerConfig config, ServerMetrics metrics) throws IOException {
        if (config.backend().equals("metal") || config.backend().equals("cuda")) {
            // The GPU decoders run one sequence without prefix reuse; the server needs both batching and reuse.
            throw new InvalidInputException("serve runs on the CPU in this version (the " + config.backend()
                    + " decoder has no batched or prefix-reusing path yet); use --backend cpu (or auto)");
        }
        if (config.threads() != 0) {
            LOG.warning("--threads " + config.threads() + " has no effect yet: the CPU backend computes on one thread");
        }
        GlmModel model = GlmModel.open(path);
        try {
            Tokenizer tokenizer = Tokenizer.fromMetadata(model.file().metadata());
            ChatFormat format = ChatTemplates.recognise(
                    model.file().metadata().optString(ChatTemplates.GGUF_KEY).orElse(null));
            format.warning().ifPresent(LOG::warning);
            int ctx = Math.min(config.ctx(), model.config().contextLength());
            if (ctx < config.ctx()) {
                LOG.info("context " + config.ctx() + " is more than the model's " + ctx + "; serving " + ctx);
            }
            long cacheBytes = (long) model.config().layers() * ctx * model.config().kvRowWidth() * CACHE_TYPE.bytes;
            long budget = config.kvBudgetMb() > 0 ? config.kvBudgetMb() << 20 : (config.parallel() + 2) * cacheBytes;
            SessionManager sessions = new SessionManager(() -> model.newCache(ctx, CACHE_TYPE), cacheBytes, budget,
                    config.parallel());
            GlmForward forward = new GlmForward(model, new CpuBackend(),
                    Math.max(config.promptChunk(), config.parallel()));
            Scheduler scheduler = new Scheduler(forward, Vocabulary.of(tokenizer, true), model.vocabSize(), sessions,
                    metrics, config.parallel(), config.promptChunk(), config.queue());
            LOG.info("KV budget " + (sessions.budgetBytes() >> 20) + " MB: " + sessions.budgetBytes() / cacheBytes
                    + " cached conversations of " + ctx + " tokens");
            return new ServedModel(model, ServedModelFacts.of(model.file(), ctx, demo), tokenizer, format, sessions,
                    scheduler, ctx);
        } catch (RuntimeException | IOException e) {
            model.close();
            throw e;
        }
    }

    public ServedModelFacts facts() {
        return facts;
    }

    public Tokenizer tokenizer() {
        return tokenizer;
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

    /** The context served, in tokens. */
    public int ctx() {
        return ctx;
    }

    public int vocabSize() {
        return model.vocabSize();
    }

    @Override
    public void close() {
        scheduler.close();
        sessions.close();
        model.close();
    }
}
