package dev.glimmer.server.cli;

import java.io.PrintStream;

/**
 * Where a command writes: {@code out} for results (JSON for scripts), {@code err} for progress
 * and messages. Tests pass their own streams.
 */
public record Terminal(PrintStream out, PrintStream err) {}
