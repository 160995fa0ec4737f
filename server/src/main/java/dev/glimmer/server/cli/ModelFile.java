package dev.glimmer.server.cli;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.server.inference.DemoModel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The {@code --model F} of the commands that read a model file ({@code @Mixin ModelFile model}). Without it they
 * use the demo model, as {@code serve} does, so that every command can be tried before a download.
 */
final class ModelFile {

    @Option(
            names = "--model",
            paramLabel = "F",
            converter = ExistingFile.class,
            description = "the GGUF model file (default: the demo model, random weights)")
    Path given;

    /** The file given with --model, else the demo model's (written first when it is not there yet; said on stderr). */
    Path path(Terminal io) throws IOException {
        if (given != null) {
            return given;
        }
        Path demo = DemoModel.file(System.getenv());
        io.err()
                .println("glimmer: no --model given: using the demo model (random weights, so its text is gibberish) "
                        + demo + (Files.isRegularFile(demo) ? "" : ", writing it first"));
        return DemoModel.ensure(System.getenv(), progress -> {});
    }

    /** The model's tokenizer, from the file's metadata (the file is closed again). */
    Tokenizer tokenizer(Terminal io) throws IOException {
        try (GgufFile file = GgufFile.open(path(io))) {
            return Tokenizer.fromMetadata(file.metadata());
        }
    }
}
