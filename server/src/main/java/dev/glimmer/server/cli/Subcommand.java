package dev.glimmer.server.cli;

import picocli.CommandLine.Model.CommandSpec;

/**
 * One sub-command of {@code ./glimmer}: a class annotated with picocli's {@code @Command} (its name,
 * one line of description, a footer of notes and examples) whose {@code @Option} fields picocli fills.
 * {@link Main} parses, prints {@code --help} and maps exceptions to exit codes.
 */
interface Subcommand {

    /** Adds options declared in code rather than by annotated fields (serve: one per configuration key). */
    default void addOptions(CommandSpec spec) {}

    /**
     * Runs the command with its options filled in.
     *
     * @return the process exit code (0 on success)
     * @throws UsageException for bad arguments (exit code 2)
     */
    int run(Terminal io) throws Exception;
}
