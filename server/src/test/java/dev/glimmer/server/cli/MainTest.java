package dev.glimmer.server.cli;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MainTest {

    record Result(int code, String out, String err) {
    }

    static Result run(String... argv) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = Main.run(argv, new Terminal(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void helpListsEveryCommand() {
        Result r = run("--help");
        assertEquals(0, r.code());
        for (Command c : Main.commands()) {
            assertTrue(r.out().contains("  " + c.name() + " "), "missing " + c.name() + " in\n" + r.out());
        }
    }

    @Test
    void everyCommandHasHelpNamingItsOptions() {
        for (Command c : Main.commands()) {
            Result r = run(c.name(), "--help");
            assertEquals(0, r.code(), c.name());
            assertTrue(r.out().startsWith("Usage: ./glimmer " + c.name()), r.out());
            for (Option o : c.options()) {
                assertTrue(r.out().contains(o.name()), c.name() + " help lacks " + o.name());
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
