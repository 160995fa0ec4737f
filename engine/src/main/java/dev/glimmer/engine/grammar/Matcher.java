package dev.glimmer.engine.grammar;

import dev.glimmer.engine.InvalidInputException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.ToLongFunction;

/**
 * Runs a grammar ({@link Expr}) over bytes, as llama.cpp runs a GBNF grammar: a position in the
 * grammar is a stack of frames (the innermost part being matched on top, what follows it below),
 * and because of alternatives the matcher holds a set of such stacks, a {@link State}.
 *
 * <p>States are interned: the same set of stacks is one object, which remembers where each byte
 * leads ({@link State#next}), how many tokens at least finish the output ({@link #fewestTokensToEnd}) and
 * the token mask computed for it. A JSON string's characters or a repeated array item lead back to
 * the same state, so a long output visits few distinct states and most work is done once.
 *
 * <p>Not thread-safe: one matcher per request, used by one thread at a time.
 */
public final class Matcher {
    /** Interned states stop being remembered beyond this many (a pathological grammar); memory stays bounded. */
    private static final int MAX_INTERNED = 50_000;

    static final long UNREACHABLE = Long.MAX_VALUE / 4;

    private final Map<State, State> interned = new HashMap<>();
    private final Set<String> oneTokenTexts;
    private final Map<Expr, Long> minLength;
    private final State start;
    /** The state with no stack and not accepting: every byte was refused. */
    final State dead = new State(Set.of(), false);

    /** A matcher that counts every byte as a token (see {@link #Matcher(Expr, Set)}). */
    public Matcher(Expr grammar) {
        this(grammar, Set.of());
    }

    /**
     * @param oneTokenTexts literals that the vocabulary writes as one token (GLM's tool-call tags):
     *                      they count as one token, not one per byte, in {@link #fewestTokensToEnd}
     */
    public Matcher(Expr grammar, Set<String> oneTokenTexts) {
        this.oneTokenTexts = Set.copyOf(oneTokenTexts);
        this.minLength = MinLength.of(grammar, this::literalTokens);
        if (minLength.get(grammar) >= UNREACHABLE) {
            throw new InvalidInputException(
                    "no output satisfies the requested format (a schema that only refers" + " to itself?)");
        }
        Expansion out = new Expansion();
        out.push(grammar, null);
        this.start = out.state();
    }

    /** Where matching begins: nothing read yet. */
    public State start() {
        return start;
    }

    /** The state after {@code b} in {@code s}; {@link #dead} when the grammar refuses it. */
    public State next(State s, int b) {
        State cached = s.next[b];
        if (cached != null) {
            return cached;
        }
        Expansion out = new Expansion();
        for (Stack stack : s.stacks) {
            switch (stack.top) {
                case InLiteral(Expr.Literal lit, int pos) -> {
                    if ((lit.bytes[pos] & 0xFF) == b) {
                        if (pos + 1 < lit.bytes.length) {
                            out.expand(new Stack(new InLiteral(lit, pos + 1), stack.rest));
                        } else {
                            out.expand(stack.rest);
                        }
                    }
                }
                case OneByte(Expr.ByteClass cls) -> {
                    if (cls.contains(b)) {
                        out.expand(stack.rest);
                    }
                }
                case InInteger i -> {
                    InInteger after = i.read(b);
                    if (after != null) {
                        out.expand(new Stack(after, stack.rest));
                    }
                }
                default -> throw new IllegalStateException("a resting stack has a terminal on top");
            }
        }
        State result = out.state();
        s.next[b] = result;
        return result;
    }

    /** The state after all of {@code bytes}; {@link #dead} as soon as one is refused. */
    public State next(State s, byte[] bytes) {
        for (byte b : bytes) {
            if (s == dead) {
                return dead;
            }
            s = next(s, b & 0xFF);
        }
        return s;
    }

    /**
     * The fewest tokens that lead from {@code s} to an accepting state ({@link #UNREACHABLE} for
     * {@link #dead}), counting a token per byte (a byte-level vocabulary has every byte as a token)
     * except for the one-token texts.
     */
    public long fewestTokensToEnd(State s) {
        if (s.fewestTokensToEnd < 0) {
            long best = s.accepting ? 0 : UNREACHABLE;
            for (Stack stack : s.stacks) {
                long sum = 0;
                for (Stack f = stack; f != null && sum < best; f = f.rest) {
                    sum = plus(sum, remaining(f.top));
                }
                best = Math.min(best, sum);
            }
            s.fewestTokensToEnd = Math.min(best, UNREACHABLE);
        }
        return s.fewestTokensToEnd;
    }

    private long remaining(Frame frame) {
        return switch (frame) {
            case InLiteral(Expr.Literal lit, int pos) -> pos == 0 ? literalTokens(lit) : lit.bytes.length - pos;
            case OneByte o -> 1;
            case InInteger i -> i.fewestDigitsToEnd();
            case InSeq(Expr.Seq seq, int next) -> {
                long sum = 0;
                for (int k = next; k < seq.parts.length; k++) {
                    sum = plus(sum, minLength.get(seq.parts[k]));
                }
                yield sum;
            }
            case InRepeat(Expr.Repeat rep, int count) -> times(Math.max(0, rep.min - count), minLength.get(rep.body));
        };
    }

    /** The bytes after which {@code s} is {@code s} again, as 4 words of 256 bits (computed once per state). */
    long[] loopBytes(State s) {
        if (s.loopBytes == null) {
            long[] loop = new long[4];
            for (int b = 0; b < 256; b++) {
                if (next(s, b) == s) {
                    loop[b >>> 6] |= 1L << b;
                }
            }
            s.loopBytes = loop;
        }
        return s.loopBytes;
    }

    /** The tokens a literal takes at most: one for a text the vocabulary has as one token, else one per byte. */
    private long literalTokens(Expr.Literal lit) {
        if (!oneTokenTexts.isEmpty() && oneTokenTexts.contains(new String(lit.bytes, StandardCharsets.UTF_8))) {
            return 1;
        }
        return lit.bytes.length;
    }

    /** Lengths saturate at {@link #UNREACHABLE}. */
    static long plus(long a, long b) {
        return Math.min(a + b, UNREACHABLE);
    }

    static long times(long n, long length) {
        return n == 0 ? 0 : length >= UNREACHABLE / n ? UNREACHABLE : n * length;
    }

    /** How many distinct states this matcher has met (for tests and statistics). */
    public int stateCount() {
        return interned.size();
    }

    /**
     * A set of grammar positions. {@link #accepting} when the grammar may end here.
     */
    public static final class State {
        final Set<Stack> stacks;
        final boolean accepting;
        final State[] next = new State[256];
        private final int hash;
        long fewestTokensToEnd = -1;
        /** The bytes that lead back to this state (256 bits), once asked for ({@link Matcher#loopBytes}). */
        long[] loopBytes;
        /** The token mask of this state with no token budget, once computed ({@link TokenConstraint}). */
        long[] mask;
        /** The largest {@link #fewestTokensToEnd} among the states {@link #mask}'s tokens lead to. */
        long maskLongestEnd;

        State(Set<Stack> stacks, boolean accepting) {
            this.stacks = stacks;
            this.accepting = accepting;
            this.hash = stacks.hashCode() * 31 + Boolean.hashCode(accepting);
        }

        public boolean accepting() {
            return accepting;
        }

        /** True when no byte can follow (the output is complete, or it has gone wrong). */
        public boolean closed() {
            return stacks.isEmpty();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof State s && hash == s.hash && accepting == s.accepting && stacks.equals(s.stacks);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    /** Collects the stacks one step leads to, each expanded until a byte-reading frame is on top. */
    private final class Expansion {
        private final Set<Stack> stacks = new LinkedHashSet<>();
        /** Sequence and repeat frames already expanded in this step: a part that may match nothing cannot loop. */
        private final Set<Stack> expanded = new HashSet<>();
        /** Rules already started in this step, with what follows them: a rule that starts with itself cannot loop. */
        private final Set<RuleStart> started = new HashSet<>();

        private boolean accepting;

        State state() {
            if (stacks.isEmpty() && !accepting) {
                return dead;
            }
            State s = new State(Set.copyOf(stacks), accepting);
            State known = interned.get(s);
            if (known != null) {
                return known;
            }
            if (interned.size() >= MAX_INTERNED) {
                interned.clear();
            }
            interned.put(s, s);
            return s;
        }

        /** Continues after the frames of {@code stack} (null: the end of the grammar). */
        void expand(Stack stack) {
            if (stack == null) {
                accepting = true;
                return;
            }
            switch (stack.top) {
                case InLiteral l -> stacks.add(stack);
                case OneByte o -> stacks.add(stack);
                case InInteger i -> {
                    if (i.canGrow()) {
                        stacks.add(stack);
                    }
                    if (i.complete()) {
                        expand(stack.rest);
                    }
                }
                case InSeq(Expr.Seq seq, int next) -> {
                    if (!expanded.add(stack)) {
                        return;
                    }
                    if (next == seq.parts.length) {
                        expand(stack.rest);
                    } else {
                        // The last part replaces the sequence's frame, so loops do not pile up finished frames.
                        Stack after = next + 1 == seq.parts.length
                                ? stack.rest
                                : new Stack(new InSeq(seq, next + 1), stack.rest);
                        push(seq.parts[next], after);
                    }
                }
                case InRepeat(Expr.Repeat rep, int count) -> {
                    if (!expanded.add(stack)) {
                        return;
                    }
                    if (rep.max < 0 || count < rep.max) {
                        // Past the minimum of an unbounded repeat the count no longer matters: the state repeats.
                        int again = rep.max < 0 ? Math.min(count + 1, rep.min) : count + 1;
                        Stack after = again == rep.max ? stack.rest : new Stack(new InRepeat(rep, again), stack.rest);
                        push(rep.body, after);
                    }
                    if (count >= rep.min) {
                        expand(stack.rest);
                    }
                }
            }
        }

        /** Starts matching {@code e} with {@code below} to follow it. */
        void push(Expr e, Stack below) {
            switch (e) {
                case Expr.Literal l -> {
                    if (l.bytes.length == 0) {
                        expand(below);
                    } else {
                        stacks.add(new Stack(new InLiteral(l, 0), below));
                    }
                }
                case Expr.ByteClass c -> stacks.add(new Stack(new OneByte(c), below));
                case Expr.Seq s -> expand(new Stack(new InSeq(s, 0), below));
                case Expr.Alt a -> {
                    for (Expr choice : a.choices) {
                        push(choice, below);
                    }
                }
                case Expr.Repeat r -> expand(new Stack(new InRepeat(r, 0), below));
                case Expr.Rule r -> {
                    if (started.add(new RuleStart(r, below))) {
                        push(Objects.requireNonNull(r.body, () -> "rule " + r.name + " is not defined"), below);
                    }
                }
                case Expr.IntegerRange r -> expand(new Stack(InInteger.start(r), below));
            }
        }
    }

    private record RuleStart(Expr.Rule rule, Stack below) {}

    /** A persistent stack of frames: pushing shares the frames below. */
    static final class Stack {
        final Frame top;
        final Stack rest;
        private final int hash;

        Stack(Frame top, Stack rest) {
            this.top = top;
            this.rest = rest;
            this.hash = top.hashCode() * 31 + (rest == null ? 0 : rest.hash);
        }

        @Override
        public boolean equals(Object o) {
            if (this == o) {
                return true;
            }
            return o instanceof Stack s && hash == s.hash && top.equals(s.top) && Objects.equals(rest, s.rest);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    /** One level of a stack: where in a part of the grammar matching stands. */
    sealed interface Frame {}

    /** {@code pos} bytes of a literal read. */
    record InLiteral(Expr.Literal lit, int pos) implements Frame {}

    /** One byte of the class to read. */
    record OneByte(Expr.ByteClass cls) implements Frame {}

    /** The parts of a sequence from {@code next} on are still to come. */
    record InSeq(Expr.Seq seq, int next) implements Frame {}

    /** {@code count} repetitions done (capped at the minimum when there is no maximum). */
    record InRepeat(Expr.Repeat rep, int count) implements Frame {}

    /**
     * Digits of a ranged integer read so far: {@code negative} after a minus sign, {@code magnitude}
     * the value of {@code digits} digits.
     */
    record InInteger(Expr.IntegerRange range, boolean negative, long magnitude, int digits) implements Frame {
        /** More digits than a long holds never lead into a long range. */
        private static final int MAX_DIGITS = 18;

        private static final int[] SIGN_AND_DIGITS = {'-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'};

        static InInteger start(Expr.IntegerRange range) {
            return new InInteger(range, false, 0, 0);
        }

        /** The frame after byte {@code b}, or null when no integer of the range starts so. */
        InInteger read(int b) {
            InInteger after;
            if (b == '-') {
                if (negative || digits > 0) {
                    return null;
                }
                after = new InInteger(range, true, 0, 0);
            } else if (b >= '0' && b <= '9') {
                if (digits == MAX_DIGITS || digits > 0 && magnitude == 0 || negative && digits == 0 && b == '0') {
                    return null; // no leading zeros, no "-0"
                }
                after = new InInteger(range, negative, magnitude * 10 + (b - '0'), digits + 1);
            } else {
                return null;
            }
            return after.fewestDigitsToEnd() < UNREACHABLE ? after : null;
        }

        /** Whether the digits so far are an integer of the range. */
        boolean complete() {
            return digits > 0 && inRange(value());
        }

        /** Whether some digit (or the sign) can still follow on the way to an integer of the range. */
        boolean canGrow() {
            for (int b : SIGN_AND_DIGITS) {
                if (read(b) != null) {
                    return true;
                }
            }
            return false;
        }

        /** The fewest bytes still to write for an integer of the range; {@link #UNREACHABLE} if none. */
        long fewestDigitsToEnd() {
            if (digits == 0) {
                // The integer of the range closest to zero on each side decides: its digits (and sign) are the fewest.
                long best = UNREACHABLE;
                if (!negative && range.max >= 0) {
                    best = Long.toString(Math.max(range.min, 0)).length();
                }
                if (range.min < 0) {
                    String closest = Long.toString(Math.min(range.max, -1));
                    best = Math.min(best, closest.length() - (negative ? 1 : 0));
                }
                return best;
            }
            if (magnitude == 0) {
                return inRange(0) ? 0 : UNREACHABLE; // "0" takes no more digits
            }
            // Appending k digits gives magnitudes [m·10^k, m·10^k + 10^k - 1].
            long low = magnitude;
            long width = 1;
            for (int k = 0; digits + k <= MAX_DIGITS; k++) {
                long high = low + width - 1;
                long from = negative ? -high : low;
                long to = negative ? -low : high;
                if (from <= range.max && to >= range.min) {
                    return k;
                }
                if (!negative && low > range.max || negative && -low < range.min) {
                    return UNREACHABLE; // only further away from here on
                }
                if (low > Long.MAX_VALUE / 10) {
                    return UNREACHABLE;
                }
                low *= 10;
                width *= 10;
            }
            return UNREACHABLE;
        }

        private long value() {
            return negative ? -magnitude : magnitude;
        }

        private boolean inRange(long v) {
            return v >= range.min && v <= range.max;
        }
    }

    /** The fewest tokens each part of a grammar takes: a fixed point, since rules may be recursive. */
    private static final class MinLength {
        static Map<Expr, Long> of(Expr root, ToLongFunction<Expr.Literal> literalTokens) {
            List<Expr> nodes = new ArrayList<>();
            Map<Expr, Long> length = new IdentityHashMap<>();
            collect(root, length, nodes);
            boolean changed = true;
            while (changed) {
                changed = false;
                for (Expr e : nodes) {
                    long now = Math.min(compute(e, length, literalTokens), UNREACHABLE);
                    if (now < length.get(e)) {
                        length.put(e, now);
                        changed = true;
                    }
                }
            }
            return length;
        }

        private static void collect(Expr root, Map<Expr, Long> length, List<Expr> nodes) {
            List<Expr> todo = new ArrayList<>(List.of(root));
            while (!todo.isEmpty()) {
                Expr e = todo.removeLast();
                if (length.containsKey(e)) {
                    continue;
                }
                length.put(e, UNREACHABLE);
                nodes.add(e);
                switch (e) {
                    case Expr.Seq s -> todo.addAll(List.of(s.parts));
                    case Expr.Alt a -> todo.addAll(List.of(a.choices));
                    case Expr.Repeat r -> todo.add(r.body);
                    case Expr.Rule r ->
                        todo.add(Objects.requireNonNull(r.body, () -> "rule " + r.name + " is not defined"));
                    default -> {}
                }
            }
        }

        private static long compute(Expr e, Map<Expr, Long> length, ToLongFunction<Expr.Literal> literalTokens) {
            return switch (e) {
                case Expr.Literal l -> literalTokens.applyAsLong(l);
                case Expr.ByteClass c -> 1;
                case Expr.IntegerRange r -> InInteger.start(r).fewestDigitsToEnd();
                case Expr.Seq s -> {
                    long sum = 0;
                    for (Expr p : s.parts) {
                        sum = plus(sum, length.get(p));
                    }
                    yield sum;
                }
                case Expr.Alt a -> {
                    long best = UNREACHABLE;
                    for (Expr c : a.choices) {
                        best = Math.min(best, length.get(c));
                    }
                    yield best;
                }
                case Expr.Repeat r -> times(r.min, length.get(r.body));
                case Expr.Rule r -> length.get(r.body);
            };
        }
    }
}
