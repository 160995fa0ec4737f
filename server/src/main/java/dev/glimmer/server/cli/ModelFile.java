package dev.glimmer.server.cli;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Path;

/** The {@code --model F} of the commands that read a model file ({@code @Mixin ModelFile model}). */
final class ModelFile {

    @Option(names = "--model", paramLabel = "F", required = true, converter = ExistingFile.class,
            description = "the GGUF model file")
    Path path;

    /** The model's tokenizer, from the file's metadata (the file is closed again). */
    Tokenizer tokenizer() throws IOException {
        try (GgufFile file = GgufFile.open(path)) {
            return Tokenizer.fromMetadata(file.metadata());
        }
    }
}
