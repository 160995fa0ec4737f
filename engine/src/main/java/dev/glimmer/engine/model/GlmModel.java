package dev.glimmer.engine.model;

import dev.glimmer.engine.gguf.GgufFile;

import java.io.IOException;
import java.nio.file.Path;

/**
 * An opened GLM-4.7-Flash-architecture model: the mapped file, its config and its weight views.
 * Closing it unmaps the file (every view becomes invalid).
 */
public record GlmModel(GgufFile file, GlmConfig config, GlmWeights weights) implements AutoCloseable {

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

    @Override
    public void close() {
        file.close();
    }
}
