package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;

import java.util.List;

/** {@code ./glimmer tokenize}: the model's token ids for a text, as one line of JSON. */
final class TokenizeCommand implements Command {

    @Override
    public String name() {
        return "tokenize";
    }

    @Override
    public String summary() {
        return "print the token ids of a text as JSON: {\"ids\":[...]}";
    }

    @Override
    public List<Option> options() {
        return List.of(
                Option.required("--model", "F", "the GGUF file whose tokenizer to use"),
                Option.required("--text", "T", "the text to tokenize"),
                Option.flag("--no-special", "treat control-token text such as <|user|> as plain text"));
    }

    @Override
    public String details() {
        return """
                Control tokens written in the text (e.g. [gMASK], <|user|>, <think>) become those tokens
                unless --no-special is given. No BOS token is added unless the model asks for one.
                Example: ./glimmer tokenize --model model.gguf --text 'Hello world'
                """;
    }

    @Override
    public int run(Args args, Terminal io) throws Exception {
        Tokenizer tokenizer;
        try (GgufFile file = GgufFile.open(args.existingFile("--model"))) {
            tokenizer = Tokenizer.fromMetadata(file.metadata());
        }
        int[] ids = tokenizer.encode(args.string("--text"), !args.has("--no-special"));
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
