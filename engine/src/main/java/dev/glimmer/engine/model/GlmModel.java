package dev.glimmer.engine.model;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import java.io.IOException;
import java.nio.file.Path;

/**
 * An opened GLM-4.7-Flash-architecture model: the mapped file, its config and its weight views.
 * Closing it unmaps the file (every view becomes invalid).
 */
public record GlmModel(GgufFile file, GlmConfig config, GlmWeights weights) implements AutoCloseable {

    /** Context size when none is asked for (llama-server's default is larger; this keeps the cache small). */
    public static final int DEFAULT_CONTEXT = 8192;

    /** Opens {@code path}; refuses files that are not such models with a one-line message. */
    public static GlmModel open(Path path) throws IOException {
        GgufFile file = GgufFile.open(path);
        try {
            return of(file);
        } catch (RuntimeException e) {
            file.close();
            throw e;
        }
    }

    /** The model in an already opened file (the caller keeps ownership of the file). */
    public static GlmModel of(GgufFile file) {
        GlmConfig config = GlmConfig.from(file);
        return new GlmModel(file, config, GlmWeights.from(file, config));
    }

    /** Entries of the logits vector: the rows of the output matrix. */
    public int vocabSize() {
        return weights.output().rows();
    }

    /** The default context size: {@link #DEFAULT_CONTEXT}, or less when the model was trained for less. */
    public int defaultContext() {
        return Math.min(DEFAULT_CONTEXT, config.contextLength());
    }

    /**
     * A new, empty KV cache for one sequence of at most {@code contextSize} positions.
     *
     * @throws InvalidInputException when the size is not positive or exceeds the model's context length
     */
    public KvCache newCache(int contextSize, KvCacheType type) {
        return newCache(contextSize, type, false);
    }

    /**
     * A new, empty KV cache, with one more layer for the NextN block's rows when {@code withNextN} (the model must
     * have the block).
     */
    public KvCache newCache(int contextSize, KvCacheType type, boolean withNextN) {
        if (withNextN && weights.nextn() == null) {
            throw new IllegalArgumentException("the model has no NextN block");
        }
        if (contextSize <= 0 || contextSize > config.contextLength()) {
            throw new InvalidInputException("context size " + contextSize + " is outside 1.." + config.contextLength()
                    + " (the model's context length)");
        }
        return new KvCache(cacheLayers(withNextN), config.kvRowWidth(), contextSize, type);
    }

    /** Layers of KV rows a sequence's cache holds: the trunk's, and the NextN block's when it drafts. */
    public int cacheLayers(boolean withNextN) {
        return config.layers() + (withNextN ? 1 : 0);
    }

    @Override
    public void close() {
        file.close();
    }
}
