package dev.glimmer.engine.grammar;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * A grammar over bytes: what constrained output may look like, built from literals, byte classes,
 * sequences, alternatives, bounded repetitions and named rules (for recursion, e.g. a JSON schema's
 * {@code $ref}). {@link Matcher} runs it one byte at a time.
 *
 * <p>Nodes compare by identity: a grammar is a graph of them, shared where the same part comes
 * twice, and a matcher's state points into it.
 */
public abstract sealed class Expr {

    private Expr() {}

    /** Exactly these bytes. */
    public static final class Literal extends Expr {
        final byte[] bytes;

        Literal(byte[] bytes) {
            this.bytes = bytes;
        }
    }

    /** One byte of a set. */
    public static final class ByteClass extends Expr {
        private final long[] bits = new long[4];

        ByteClass(boolean[] members) {
            for (int b = 0; b < 256; b++) {
                if (members[b]) {
                    bits[b >>> 6] |= 1L << b;
                }
            }
        }

        boolean contains(int b) {
            return (bits[b >>> 6] & 1L << b) != 0;
        }
    }

    /** The parts one after another. */
    public static final class Seq extends Expr {
        final Expr[] parts;

        Seq(List<Expr> parts) {
            this.parts = parts.toArray(Expr[]::new);
        }
    }

    /** Any one of the choices. */
    public static final class Alt extends Expr {
        final Expr[] choices;

        Alt(List<Expr> choices) {
            this.choices = choices.toArray(Expr[]::new);
        }
    }

    /** {@code body} between {@code min} and {@code max} times ({@code max} -1: no limit). */
    public static final class Repeat extends Expr {
        final Expr body;
        final int min;
        final int max;

        Repeat(Expr body, int min, int max) {
            this.body = body;
            this.min = min;
            this.max = max;
        }
    }

    /** A named rule whose body is set once it is known, so that rules may refer to themselves. */
    public static final class Rule extends Expr {
        final String name;
        Expr body;

        Rule(String name) {
            this.name = name;
        }

        void define(Expr body) {
            if (this.body != null) {
                throw new IllegalStateException("rule " + name + " is already defined");
            }
            this.body = body;
        }
    }

    /**
     * A JSON integer ({@code -?(0|[1-9][0-9]*)}) between {@code min} and {@code max}: a range is a
     * regular language, but as a grammar it is large; this node checks the digits as they come.
     */
    public static final class IntegerRange extends Expr {
        final long min;
        final long max;

        IntegerRange(long min, long max) {
            this.min = min;
            this.max = max;
        }
    }

    // Builders.

    public static Expr literal(String text) {
        return new Literal(text.getBytes(StandardCharsets.UTF_8));
    }

    public static Expr seq(Expr... parts) {
        return parts.length == 1 ? parts[0] : new Seq(List.of(parts));
    }

    public static Expr seq(List<Expr> parts) {
        return parts.size() == 1 ? parts.getFirst() : new Seq(parts);
    }

    public static Expr alt(Expr... choices) {
        return choices.length == 1 ? choices[0] : new Alt(List.of(choices));
    }

    public static Expr alt(List<Expr> choices) {
        return choices.size() == 1 ? choices.getFirst() : new Alt(choices);
    }

    /** Nothing at all (the empty sequence). */
    public static Expr empty() {
        return new Seq(List.of());
    }

    public static Expr optional(Expr e) {
        return alt(e, empty());
    }

    public static Expr repeat(Expr body, int min, int max) {
        if (max >= 0 && max < min) {
            throw new IllegalArgumentException("repeat max " + max + " < min " + min);
        }
        return max == 1 && min == 1 ? body : new Repeat(body, min, max);
    }

    /** One byte from {@code from} to {@code to} (inclusive) or of the other given ranges (pairs). */
    public static Expr byteRanges(int... fromTo) {
        boolean[] members = new boolean[256];
        for (int i = 0; i < fromTo.length; i += 2) {
            for (int b = fromTo[i]; b <= fromTo[i + 1]; b++) {
                members[b] = true;
            }
        }
        return new ByteClass(members);
    }

    public static Expr byteClass(boolean[] members) {
        return new ByteClass(members.clone());
    }

    public static Rule rule(String name) {
        return new Rule(name);
    }

    public static Expr integerRange(long min, long max) {
        return new IntegerRange(min, max);
    }
}
