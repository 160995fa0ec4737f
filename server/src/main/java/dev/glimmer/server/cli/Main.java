package dev.glimmer.server.cli;

import dev.glimmer.engine.InvalidInputException;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.NoSuchFileException;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Entry point of {@code ./glimmer}: picks the command, parses its options, runs it and turns
 * failures into one-line messages with exit code 2 (bad usage or input) or 1 (internal failure).
 */
public final class Main {

    /** Every command, in the order {@code --help} lists them. */
    static List<Command> commands() {
        return List.of(
                new ServeCommand(),
                new LogitsCommand(),
                new GenerateCommand(),
                new TokenizeCommand(),
                new DetokenizeCommand(),
                new ChatPromptCommand(),
                new InfoCommand(),
                new SynthCommand(),
                new PlanCommand(),
                new SelftestCommand(),
                new BenchCommand(),
                new BenchServeCommand());
    }

    public static void main(String[] argv) {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.err), true,
                StandardCharsets.UTF_8);
        int code = run(argv, new Terminal(out, err));
        out.flush();
        err.flush();
        System.exit(code);
    }

    /** Runs one invocation; returns the exit code. Never throws. */
    public static int run(String[] argv, Terminal io) {
        if (argv.length == 0 || isHelp(argv[0])) {
            io.out().print(overview());
            return argv.length == 0 ? 2 : 0;
        }
        Command command = commands().stream().filter(c -> c.name().equals(argv[0])).findFirst().orElse(null);
        if (command == null) {
            io.err().println("glimmer: unknown command '" + argv[0] + "' (see ./glimmer --help)");
            return 2;
        }
        String[] rest = Arrays.copyOfRange(argv, 1, argv.length);
        if (Arrays.stream(rest).anyMatch(Main::isHelp)) {
            io.out().print(help(command));
            return 0;
        }
        try {
            return command.run(Args.parse(command, rest), io);
        } catch (UsageException | InvalidInputException e) {
            io.err().println("glimmer " + command.name() + ": " + e.getMessage());
            return 2;
        } catch (NoSuchFileException e) {
            io.err().println("glimmer " + command.name() + ": no such file: " + e.getFile());
            return 2;
        } catch (AccessDeniedException e) {
            io.err().println("glimmer " + command.name() + ": permission denied: " + e.getFile());
            return 2;
        } catch (FileNotFoundException e) {
            io.err().println("glimmer " + command.name() + ": " + e.getMessage());
            return 2;
        } catch (IOException | UncheckedIOException e) {
            io.err().println("glimmer " + command.name() + ": I/O error: " + e.getMessage());
            debugTrace(e, io);
            return 1;
        } catch (Exception | OutOfMemoryError | StackOverflowError e) {
            io.err().println("glimmer " + command.name() + ": internal error: " + e
                    + " (set GLIMMER_DEBUG=1 for the stack trace)");
            debugTrace(e, io);
            return 1;
        }
    }

    private static void debugTrace(Throwable e, Terminal io) {
        if (System.getenv("GLIMMER_DEBUG") != null) {
            e.printStackTrace(io.err());
        }
    }

    private static boolean isHelp(String word) {
        return word.equals("--help") || word.equals("-h") || word.equals("help");
    }

    static String overview() {
        int width = commands().stream().mapToInt(c -> c.name().length()).max().orElse(8);
        String list = commands().stream()
                .map(c -> "  " + pad(c.name(), width) + "  " + c.summary())
                .collect(Collectors.joining("\n"));
        return """
                Glimmer: run GLM-4.7-Flash on your own machine behind an OpenAI-compatible API.

                Usage: ./glimmer <command> [options]

                Commands:
                %s
                  %s  install what the tests need, then run the whole test suite (mvn verify)

                Run ./glimmer <command> --help for a command's options.
                Exit codes: 0 success, 1 internal failure, 2 bad usage or bad input.
                """.formatted(list, pad("test", width));
    }

    static String help(Command command) {
        StringBuilder sb = new StringBuilder();
        sb.append("Usage: ./glimmer ").append(command.name()).append(" [options]\n\n");
        sb.append(command.summary()).append("\n\nOptions:\n");
        List<Option> options = command.options();
        int width = Math.max(6, options.stream().mapToInt(o -> o.synopsis().length()).max().orElse(6));
        for (Option option : options) {
            sb.append("  ").append(pad(option.synopsis(), width)).append("  ").append(option.description());
            if (option.required()) {
                sb.append(" (required)");
            }
            sb.append('\n');
        }
        sb.append("  ").append(pad("--help", width)).append("  show this help\n");
        String details = command.details();
        if (!details.isBlank()) {
            sb.append('\n').append(details.strip()).append('\n');
        }
        return sb.toString();
    }

    private static String pad(String s, int width) {
        return s + " ".repeat(Math.max(0, width - s.length()));
    }

    private Main() {
    }
}
