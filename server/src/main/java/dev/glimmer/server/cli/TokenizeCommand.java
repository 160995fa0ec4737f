package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./glimmer tokenize}: the model's token ids for a text, as one line of JSON. */
@Command(name = "tokenize", description = "print the token ids of a text as JSON: {\"ids\":[...]}", footer = """
        Control tokens written in the text (e.g. [gMASK], <|user|>, <think>) become those tokens
        unless --no-special is given. No BOS token is added unless the model asks for one.
        Example: ./glimmer tokenize --model model.gguf --text 'Hello world'""")
final class TokenizeCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(names = "--text", paramLabel = "T", required = true, description = "the text to tokenize")
    String text;

    @Option(names = "--no-special", description = "treat control-token text such as <|user|> as plain text")
    boolean noSpecial;

    @Override
    public int run(Terminal io) throws Exception {
        int[] ids = modelFile.tokenizer(io).encode(text, !noSpecial);
        ObjectMapper json = new ObjectMapper();
        ObjectNode result = json.createObjectNode();
        var array = result.putArray("ids");
        for (int id : ids) {
            array.add(id);
        }
        io.out().println(json.writeValueAsString(result));
        return 0;
    }
}
