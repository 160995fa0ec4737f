package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import picocli.CommandLine.Model.OptionSpec;

class MainTest {

    record Result(int code, String out, String err) {}

    static Result run(String... argv) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = Main.run(
                argv,
                new Terminal(
                        new PrintStream(out, true, StandardCharsets.UTF_8),
                        new PrintStream(err, true, StandardCharsets.UTF_8)));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void helpListsEveryCommand() {
        Result r = run("--help");
        assertEquals(0, r.code());
        for (Subcommand c : Main.commands()) {
            assertTrue(r.out().contains("  " + Main.name(c) + " "), "missing " + Main.name(c) + " in\n" + r.out());
        }
    }

    @Test
    void everyCommandHasHelpNamingItsOptions() {
        for (Subcommand c : Main.commands()) {
            Result r = run(Main.name(c), "--help");
            assertEquals(0, r.code(), Main.name(c));
            assertTrue(r.out().startsWith("Usage: ./glimmer " + Main.name(c)), r.out());
            for (OptionSpec o : Main.commandLine(c).getCommandSpec().options()) {
                assertTrue(r.out().contains(o.longestName()), Main.name(c) + " help lacks " + o.longestName());
            }
        }
    }

    @Test
    void unknownCommandIsAUsageError() {
        Result r = run("frobnicate");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("unknown command 'frobnicate'"), r.err());
    }

    @Test
    void unknownOptionIsAOneLineUsageError() {
        Result r = run("serve", "--no-such-option");
        assertEquals(2, r.code());
        assertEquals(1, r.err().strip().lines().count(), r.err());
        assertTrue(r.err().contains("unknown option --no-such-option"), r.err());
    }
}
