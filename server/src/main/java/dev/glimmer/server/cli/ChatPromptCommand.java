package dev.glimmer.server.cli;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.chat.ChatFormat;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.engine.chat.ChatRequestParser;
import dev.glimmer.engine.chat.ChatTemplates;
import dev.glimmer.engine.gguf.GgufFile;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer chat-prompt}: prints the prompt text the model would see for an OpenAI chat
 * request body, exactly (no newline added). The server's {@code POST /apply-template} gives the same.
 */
@Command(
        name = "chat-prompt",
        description = "print the prompt text for an OpenAI chat request (as POST /apply-template does)",
        footer = """
                Example:
                  echo '{"messages":[{"role":"user","content":"Hi"}]}' > r.json
                  ./glimmer chat-prompt --model model.gguf --request r.json
                The prompt goes to stdout as is; a warning goes to stderr when the model's template
                is not the GLM-4.7-Flash one (the GLM-4.7-Flash format is used anyway).""")
final class ChatPromptCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--request",
            paramLabel = "R.json",
            required = true,
            converter = ExistingFile.class,
            description = "an OpenAI chat request body (messages, tools, chat_template_kwargs, ...)")
    Path requestPath;

    @Override
    public int run(Terminal io) throws Exception {
        String body;
        try {
            body = StandardCharsets.UTF_8
                    .newDecoder()
                    .decode(ByteBuffer.wrap(Files.readAllBytes(requestPath)))
                    .toString();
        } catch (CharacterCodingException e) {
            throw new InvalidInputException(requestPath + ": not UTF-8 text");
        }
        ChatRequest request = ChatRequestParser.parse(body);
        String modelTemplate;
        try (GgufFile model = GgufFile.open(modelFile.path(io))) {
            modelTemplate = model.metadata().optString(ChatTemplates.GGUF_KEY).orElse(null);
        }
        ChatFormat format = ChatTemplates.recognise(modelTemplate);
        format.warning().ifPresent(w -> io.err().println("glimmer chat-prompt: warning: " + w));
        io.out().print(format.template().render(request));
        io.out().flush();
        return 0;
    }
}
