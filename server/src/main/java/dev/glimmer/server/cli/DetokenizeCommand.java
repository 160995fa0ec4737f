package dev.glimmer.server.cli;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** {@code ./glimmer detokenize}: the text a list of token ids stands for. */
@Command(name = "detokenize", description = "print the text of comma-separated token ids", footer = """
        The text is written to stdout exactly, with no newline added.
        Example: ./glimmer detokenize --model model.gguf --ids 361,599""")
final class DetokenizeCommand implements Subcommand {

    @Option(names = "--model", paramLabel = "F", required = true, converter = ExistingFile.class,
            description = "the GGUF file whose tokenizer to use")
    Path model;

    @Option(names = "--ids", paramLabel = "I", required = true, split = ",",
            description = "token ids separated by commas, e.g. 361,599")
    int[] ids;

    @Option(names = "--no-special", description = "leave out control tokens such as <|user|> instead of printing their text")
    boolean noSpecial;

    @Override
    public int run(Terminal io) throws Exception {
        Tokenizer tokenizer;
        try (GgufFile file = GgufFile.open(model)) {
            tokenizer = Tokenizer.fromMetadata(file.metadata());
        }
        io.out().print(tokenizer.decode(ids, !noSpecial));
        io.out().flush();
        return 0;
    }
}
