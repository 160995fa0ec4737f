package dev.glimmer.server.cli;

import java.util.List;

/** {@code ./glimmer serve}: the OpenAI-compatible server. */
final class ServeCommand implements Command {

    @Override
    public String name() {
        return "serve";
    }

    @Override
    public String summary() {
        return "run the OpenAI-compatible server (a demo model with random weights when no --model is given)";
    }

    @Override
    public List<Option> options() {
        return List.of(
                Option.value("--model", "F", "the GGUF file to serve"),
                Option.value("--host", "H", "address to bind (default 127.0.0.1)"),
                Option.value("--port", "P", "port to listen on (default 8080)"),
                Option.value("--backend", "B", "auto, cpu, metal or cuda (default auto)"),
                Option.value("--ctx", "N", "context length in tokens (default 8192)"),
                Option.value("--threads", "N", "worker threads (default: physical cores)"),
                Option.value("--api-key", "K", "require this key as 'Authorization: Bearer K'"));
    }

    @Override
    public int run(Args args, Terminal io) {
        io.err().println("glimmer serve: the HTTP server is not built yet in this version of Glimmer;"
                + " the engine commands (info, synth, tokenize, ...) work. See README.md.");
        return 1;
    }
}
