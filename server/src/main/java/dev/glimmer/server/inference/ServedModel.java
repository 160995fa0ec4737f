package dev.glimmer.server.inference;

import dev.glimmer.engine.gguf.GgufFile;

/** The loaded model and everything that serves it; closing it unmaps the file. */
public final class ServedModel implements AutoCloseable {
    private final GgufFile file;
    private final ModelFacts facts;

    public ServedModel(GgufFile file, ModelFacts facts) {
        this.file = file;
        this.facts = facts;
    }

    public ModelFacts facts() {
        return facts;
    }

    @Override
    public void close() {
        file.close();
    }
}
