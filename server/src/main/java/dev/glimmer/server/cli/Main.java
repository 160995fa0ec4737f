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
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.MissingParameterException;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.OverwrittenOptionException;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * Entry point of {@code ./glimmer}: picks the command, lets picocli fill its options, runs it and
 * turns failures into one-line messages with exit code 2 (bad usage or input) or 1 (internal failure).
 */
public final class Main {

    /** Every command, in the order {@code --help} lists them: a new command is one more line here. */
    static List<Subcommand> commands() {
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
                new BenchServeCommand(),
                new VersionCommand());
    }

    public static void main(String[] argv) {
        PrintStream out = new PrintStream(
                new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        PrintStream err =
                new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.err), true, StandardCharsets.UTF_8);
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
        String name = argv[0].equals("--version") || argv[0].equals("-V") ? "version" : argv[0];
        Optional<Subcommand> command =
                commands().stream().filter(c -> name(c).equals(name)).findFirst();
        if (command.isEmpty()) {
            io.err().println("glimmer: unknown command '" + argv[0] + "' (see ./glimmer --help)");
            return 2;
        }
        return run(command.get(), Arrays.copyOfRange(argv, 1, argv.length), io);
    }

    /** Runs {@code command} with the words after its name; returns the exit code. Never throws. */
    static int run(Subcommand command, String[] args, Terminal io) {
        String name = name(command);
        try {
            CommandLine cli = commandLine(command);
            if (cli.parseArgs(args).isUsageHelpRequested()) {
                io.out().print(cli.getUsageMessage());
                return 0;
            }
            return command.run(io);
        } catch (ParameterException e) {
            io.err().println("glimmer " + name + ": " + usageError(e, name));
            return 2;
        } catch (UsageException | InvalidInputException e) {
            io.err().println("glimmer " + name + ": " + e.getMessage());
            return 2;
        } catch (NoSuchFileException e) {
            io.err().println("glimmer " + name + ": no such file: " + e.getFile());
            return 2;
        } catch (AccessDeniedException e) {
            io.err().println("glimmer " + name + ": permission denied: " + e.getFile());
            return 2;
        } catch (FileNotFoundException e) {
            io.err().println("glimmer " + name + ": " + e.getMessage());
            return 2;
        } catch (IOException | UncheckedIOException e) {
            io.err().println("glimmer " + name + ": I/O error: " + e.getMessage());
            debugTrace(e, io);
            return 1;
        } catch (Exception | OutOfMemoryError | StackOverflowError e) {
            io.err()
                    .println("glimmer " + name + ": internal error: " + e
                            + " (set GLIMMER_DEBUG=1 for the stack trace)");
            debugTrace(e, io);
            return 1;
        }
    }

    /** The parser of {@code command}'s options, with {@code --help} and the help layout every command shares. */
    static CommandLine commandLine(Subcommand command) {
        CommandLine cli = new CommandLine(command);
        // A value may start with a dash (--text -hello, --ids -5): after an option that takes one, it is that value.
        cli.setAllowOptionsAsOptionParameters(true);
        CommandSpec spec = cli.getCommandSpec();
        command.addOptions(spec);
        spec.addOption(OptionSpec.builder("-h", "--help")
                .usageHelp(true)
                .description("show this help")
                .build());
        spec.name("./glimmer " + spec.name());
        // Options in the order the command declares them; the footer holds the command's notes and examples.
        spec.usageMessage()
                .sortOptions(false)
                .sortSynopsis(false)
                .width(110)
                .synopsisHeading("Usage: ")
                .descriptionHeading("%n")
                .optionListHeading("%nOptions:%n")
                .footerHeading("%n");
        // Numbers are read leniently about spaces ("1, 2"); their errors are worded by usageError.
        cli.registerConverter(Integer.class, text -> number(text, Integer::valueOf, "an integer"));
        cli.registerConverter(int.class, text -> number(text, Integer::valueOf, "an integer"));
        cli.registerConverter(Long.class, text -> number(text, Long::valueOf, "an integer"));
        cli.registerConverter(long.class, text -> number(text, Long::valueOf, "an integer"));
        ITypeConverter<Double> decimal = text -> {
            double value = number(text, Double::valueOf, "a number");
            if (!Double.isFinite(value)) {
                throw new NotANumber("a number");
            }
            return value;
        };
        cli.registerConverter(Double.class, decimal);
        cli.registerConverter(double.class, decimal);
        return cli;
    }

    /** {@code text} parsed; a {@link NotANumber} saying what it should be, otherwise. */
    private static <T> T number(String text, Function<String, T> parse, String what) {
        try {
            return parse.apply(text.strip());
        } catch (NumberFormatException e) {
            throw new NotANumber(what);
        }
    }

    /** A number option's value that is not one; the message is what it should be ("an integer"). */
    private static final class NotANumber extends TypeConversionException {
        NotANumber(String what) {
            super(what);
        }
    }

    /** picocli's refusal as one line in Glimmer's words. */
    private static String usageError(ParameterException e, String name) {
        String seeHelp = " (see ./glimmer " + name + " --help)";
        return switch (e) {
            case UnmatchedArgumentException u ->
                u.getUnmatched().getFirst().startsWith("-")
                        ? "unknown option " + u.getUnmatched().getFirst() + " for " + name + seeHelp
                        : "unexpected argument '" + u.getUnmatched().getFirst() + "'" + seeHelp;
            case MissingParameterException m ->
                name + " needs " + synopsis(m.getMissing().getFirst()) + seeHelp;
            case OverwrittenOptionException o -> nameOf(o.getOverwritten()) + " given twice";
            default ->
                switch (e.getCause()) {
                    case UsageException u -> u.getMessage();
                    case NotANumber n ->
                        nameOf(e.getArgSpec()) + " must be " + n.getMessage() + ", got '"
                                + e.getValue().strip() + "'";
                    case null, default -> e.getMessage();
                };
        };
    }

    /** An option as messages name it, e.g. {@code --model} (its first name). */
    private static String nameOf(ArgSpec arg) {
        return arg instanceof OptionSpec o ? o.names()[0] : arg.paramLabel();
    }

    /** An option with its value's name, e.g. {@code --model F}. */
    private static String synopsis(ArgSpec arg) {
        return arg instanceof OptionSpec o ? o.names()[0] + " " + o.paramLabel() : arg.paramLabel();
    }

    private static void debugTrace(Throwable e, Terminal io) {
        if (System.getenv("GLIMMER_DEBUG") != null) {
            e.printStackTrace(io.err());
        }
    }

    private static boolean isHelp(String word) {
        return word.equals("--help") || word.equals("-h") || word.equals("help");
    }

    static String name(Subcommand command) {
        return command.getClass().getAnnotation(CommandLine.Command.class).name();
    }

    private static String summary(Subcommand command) {
        return command.getClass().getAnnotation(CommandLine.Command.class).description()[0];
    }

    static String overview() {
        int width = commands().stream().mapToInt(c -> name(c).length()).max().orElse(8);
        String list = commands().stream()
                .map(c -> "  " + pad(name(c), width) + "  " + summary(c))
                .collect(Collectors.joining("\n"));
        return """
                Glimmer: run GLM-4.7-Flash on your own machine behind an OpenAI-compatible API.

                Usage: ./glimmer <command> [options]

                Commands:
                %s
                  %s  install what the tests need, then run the whole test suite (mvn verify)

                Run ./glimmer <command> --help for a command's options; ./glimmer --version for the version.
                Exit codes: 0 success, 1 internal failure, 2 bad usage or bad input.
                """.formatted(list, pad("test", width));
    }

    private static String pad(String s, int width) {
        return s + " ".repeat(Math.max(0, width - s.length()));
    }

    private Main() {}
}
