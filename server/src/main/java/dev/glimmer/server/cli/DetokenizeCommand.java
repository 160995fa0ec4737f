package dev.glimmer.server.cli;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;

import java.util.List;

/** {@code ./glimmer detokenize}: the text a list of token ids stands for. */
final class DetokenizeCommand implements Command {

    @Override
    public String name() {
        return "detokenize";
    }

    @Override
    public String summary() {
        return "print the text of comma-separated token ids";
    }

    @Override
    public List<Option> options() {
        return List.of(
                Option.required("--model", "F", "the GGUF file whose tokenizer to use"),
                Option.required("--ids", "I", "token ids separated by commas, e.g. 361,599"),
                Option.flag("--no-special", "leave out control tokens such as <|user|> instead of printing their text"));
    }

    @Override
    public String details() {
        return """
                The text is written to stdout exactly, with no newline added.
                Example: ./glimmer detokenize --model model.gguf --ids 361,599
                """;
    }

    @Override
    public int run(Args args, Terminal io) throws Exception {
        int[] ids = args.intList("--ids");
        Tokenizer tokenizer;
        try (GgufFile file = GgufFile.open(args.existingFile("--model"))) {
            tokenizer = Tokenizer.fromMetadata(file.metadata());
        }
        io.out().print(tokenizer.decode(ids, !args.has("--no-special")));
        io.out().flush();
        return 0;
    }
}
