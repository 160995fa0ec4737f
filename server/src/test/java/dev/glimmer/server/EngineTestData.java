package dev.glimmer.server;

import java.nio.file.Path;

/**
 * The engine module's test data, shared by the server's tests rather than copied: llama.cpp's
 * oracle models and references, and the chat goldens. Tests run in the module directory.
 */
public final class EngineTestData {
    public static final Path RESOURCES = Path.of("../engine/src/test/resources");
    public static final Path ORACLE = RESOURCES.resolve("oracle");

    /** An oracle model, e.g. {@code tiny-f32}. */
    public static Path model(String name) {
        return ORACLE.resolve(name + ".gguf");
    }

    private EngineTestData() {}
}
