package dev.glimmer.server.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./glimmer detokenize}: the text a list of token ids stands for. */
@Command(name = "detokenize", description = "print the text of comma-separated token ids", footer = """
        The text is written to stdout exactly, with no newline added.
        Example: ./glimmer detokenize --model model.gguf --ids 361,599""")
final class DetokenizeCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--ids",
            paramLabel = "I",
            required = true,
            split = ",",
            description = "token ids separated by commas, e.g. 361,599")
    int[] ids;

    @Option(
            names = "--no-special",
            description = "leave out control tokens such as <|user|> instead of printing their text")
    boolean noSpecial;

    @Override
    public int run(Terminal io) throws Exception {
        io.out().print(modelFile.tokenizer(io).decode(ids, !noSpecial));
        io.out().flush();
        return 0;
    }
}
