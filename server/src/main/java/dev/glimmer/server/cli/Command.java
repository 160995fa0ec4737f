package dev.glimmer.server.cli;

import java.util.List;

/**
 * One sub-command of {@code ./glimmer}. A command declares its options; {@link Main} parses them,
 * prints {@code --help} from the declaration and maps exceptions to exit codes.
 */
public interface Command {

    /** The word after {@code ./glimmer}, e.g. {@code info}. */
    String name();

    /** One line for the command list. */
    String summary();

    /** The options this command accepts; {@code --help} is always added. */
    List<Option> options();

    /** Extra text printed after the options in {@code --help} (examples, notes); may be empty. */
    default String details() {
        return "";
    }

    /**
     * Runs the command.
     *
     * @return the process exit code (0 on success)
     * @throws UsageException for bad arguments (exit code 2)
     */
    int run(Args args, Terminal io) throws Exception;
}
