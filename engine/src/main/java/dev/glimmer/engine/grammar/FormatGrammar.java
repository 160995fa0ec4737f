package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.Expr.alt;
import static dev.glimmer.engine.grammar.Expr.byteRanges;
import static dev.glimmer.engine.grammar.Expr.empty;
import static dev.glimmer.engine.grammar.Expr.literal;
import static dev.glimmer.engine.grammar.Expr.optional;
import static dev.glimmer.engine.grammar.Expr.repeat;
import static dev.glimmer.engine.grammar.Expr.seq;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The characters of a string of a JSON schema {@code format}, as the standard that defines it writes
 * them. Each grammar is a practical subset: every text it allows is valid for the standard, but not
 * every valid text is allowed (docs/SERVING.md lists the limits). All of them are ASCII without
 * characters that JSON escapes or {@code <}, so they are written the same way as JSON strings and as
 * raw tool-call arguments, and their length in characters is their length in bytes.
 *
 * <ul>
 *   <li>{@code date}, {@code time}, {@code date-time}: RFC 3339 {@code full-date}, {@code full-time} and
 *       {@code date-time} (days valid for their month, 29 February in leap years only; an upper-case
 *       {@code T} and {@code Z}; offsets within ±17:59; no leap second; at most 9 fraction digits);</li>
 *   <li>{@code duration}: RFC 3339's (appendix A) {@code P…} durations, at most 8 digits per number;</li>
 *   <li>{@code uuid}: RFC 4122's hexadecimal form, 8-4-4-4-12 digits;</li>
 *   <li>{@code ipv4}: dotted decimal, no leading zeros; {@code ipv6}: RFC 4291 text forms with
 *       {@code ::} and an embedded IPv4 address, as RFC 3986's {@code IPv6address};</li>
 *   <li>{@code hostname}: RFC 1123 labels (letters, digits, inner hyphens), at most 4 of at most 62
 *       characters, so at most 251 in all;</li>
 *   <li>{@code email}: an RFC 5321 mailbox: a dot-atom local part (at most 4 atoms of at most 15
 *       characters) {@code @} one or two hostname labels and a common top-level domain ({@link #EMAIL_TLDS}),
 *       as validators that check the top-level domain accept;</li>
 *   <li>{@code uri}: an RFC 3986 URI with an authority: {@code scheme://host[:port]} with a hostname or a
 *       bracketed IPv6 address, then at most 8 path segments, a query and a fragment, at most 1,629
 *       characters (under the 2,083 that Pydantic's {@code HttpUrl} allows).</li>
 * </ul>
 */
final class FormatGrammar {
    /** The top-level domains an email address ends with: real ones, which validators that check them know. */
    static final List<String> EMAIL_TLDS = List.of("com", "org", "net", "edu", "gov", "io", "dev", "info");

    private static final Map<String, Supplier<Expr>> FORMATS = Map.ofEntries(
            Map.entry("date", FormatGrammar::date),
            Map.entry("time", FormatGrammar::time),
            Map.entry("date-time", () -> seq(date(), literal("T"), time())),
            Map.entry("duration", FormatGrammar::duration),
            Map.entry("uuid", FormatGrammar::uuid),
            Map.entry("ipv4", FormatGrammar::ipv4),
            Map.entry("ipv6", FormatGrammar::ipv6),
            Map.entry("hostname", FormatGrammar::hostname),
            Map.entry("email", FormatGrammar::email),
            Map.entry("uri", FormatGrammar::uri));

    private static final Expr DIGIT = byteRanges('0', '9');
    private static final Expr HEX = byteRanges('0', '9', 'a', 'f', 'A', 'F');
    private static final Expr ALNUM = byteRanges('0', '9', 'a', 'z', 'A', 'Z');

    private FormatGrammar() {}

    /** The formats there is a grammar for, sorted. */
    static List<String> names() {
        return FORMATS.keySet().stream().sorted().toList();
    }

    /** The characters of {@code format}'s strings, or null when there is no grammar for it. */
    static Expr of(String format) {
        Supplier<Expr> grammar = FORMATS.get(format);
        return grammar == null ? null : grammar.get();
    }

    private static Expr digits(String from, String to) {
        return byteRanges(from.charAt(0), to.charAt(0));
    }

    // RFC 3339.

    private static Expr date() {
        Expr anyYear = repeat(DIGIT, 4, 4);
        // Years divisible by 4: the last two digits are, or they are 00 and the first two are (divisible by 400).
        Expr multipleOf4 = alt(
                seq(literal("0"), byteRanges('0', '0', '4', '4', '8', '8')),
                seq(byteRanges('2', '2', '4', '4', '6', '6', '8', '8'), byteRanges('0', '0', '4', '4', '8', '8')),
                seq(byteRanges('1', '1', '3', '3', '5', '5', '7', '7', '9', '9'), byteRanges('2', '2', '6', '6')));
        Expr nonZeroMultipleOf4 = alt(
                seq(literal("0"), byteRanges('4', '4', '8', '8')),
                seq(byteRanges('2', '2', '4', '4', '6', '6', '8', '8'), byteRanges('0', '0', '4', '4', '8', '8')),
                seq(byteRanges('1', '1', '3', '3', '5', '5', '7', '7', '9', '9'), byteRanges('2', '2', '6', '6')));
        Expr leapYear = alt(seq(DIGIT, DIGIT, nonZeroMultipleOf4), seq(multipleOf4, literal("00")));
        Expr day28 =
                alt(seq(literal("0"), digits("1", "9")), seq(literal("1"), DIGIT), seq(literal("2"), digits("0", "8")));
        Expr day30 = alt(day28, literal("29"), literal("30"));
        Expr day31 = alt(day30, literal("31"));
        Expr monthDay = alt(
                seq(
                        alt(
                                literal("01"),
                                literal("03"),
                                literal("05"),
                                literal("07"),
                                literal("08"),
                                literal("10"),
                                literal("12")),
                        literal("-"),
                        day31),
                seq(alt(literal("04"), literal("06"), literal("09"), literal("11")), literal("-"), day30),
                seq(literal("02-"), day28));
        return alt(seq(anyYear, literal("-"), monthDay), seq(leapYear, literal("-02-29")));
    }

    private static Expr time() {
        Expr hour = alt(seq(digits("0", "1"), DIGIT), seq(literal("2"), digits("0", "3")));
        Expr sixty = seq(digits("0", "5"), DIGIT);
        Expr fraction = optional(seq(literal("."), repeat(DIGIT, 1, 9)));
        // Offsets within ±17:59, which every parser takes (Java's ZoneOffset ends at ±18:00).
        Expr offsetHour = alt(seq(literal("0"), DIGIT), seq(literal("1"), digits("0", "7")));
        Expr offset = alt(literal("Z"), seq(byteRanges('+', '+', '-', '-'), offsetHour, literal(":"), sixty));
        return seq(hour, literal(":"), sixty, literal(":"), sixty, fraction, offset);
    }

    /**
     * RFC 3339's {@code duration} (its appendix A, ISO 8601's): {@code P} and years, months, days in that order
     * without gaps, and/or {@code T} and hours, minutes, seconds likewise, or weeks alone; at most 8 digits each
     * (so that a number of weeks in days still fits an int, as Java's {@code Period} keeps it).
     */
    private static Expr duration() {
        Expr n = repeat(DIGIT, 1, 8);
        Expr second = seq(n, literal("S"));
        Expr minute = seq(n, literal("M"), optional(second));
        Expr hour = seq(n, literal("H"), optional(minute));
        Expr time = seq(literal("T"), alt(hour, minute, second));
        Expr day = seq(n, literal("D"));
        Expr month = seq(n, literal("M"), optional(day));
        Expr year = seq(n, literal("Y"), optional(month));
        Expr date = seq(alt(day, month, year), optional(time));
        return seq(literal("P"), alt(date, time, seq(n, literal("W"))));
    }

    // RFC 4122.

    private static Expr uuid() {
        return seq(
                repeat(HEX, 8, 8),
                literal("-"),
                repeat(HEX, 4, 4),
                literal("-"),
                repeat(HEX, 4, 4),
                literal("-"),
                repeat(HEX, 4, 4),
                literal("-"),
                repeat(HEX, 12, 12));
    }

    // IP addresses.

    private static Expr ipv4() {
        Expr octet = alt(
                DIGIT,
                seq(digits("1", "9"), DIGIT),
                seq(literal("1"), DIGIT, DIGIT),
                seq(literal("2"), digits("0", "4"), DIGIT),
                seq(literal("25"), digits("0", "5")));
        Expr dotted = seq(literal("."), octet);
        return seq(octet, dotted, dotted, dotted);
    }

    /** RFC 3986's {@code IPv6address}: eight groups, or fewer around one {@code ::}; the last two may be an IPv4 address. */
    private static Expr ipv6() {
        Expr h16 = repeat(HEX, 1, 4);
        Expr h16Colon = seq(h16, literal(":"));
        Expr ls32 = alt(seq(h16, literal(":"), h16), ipv4());
        List<Expr> forms = new ArrayList<>();
        forms.add(seq(repeat(h16Colon, 6, 6), ls32));
        // "::" stands for one zero group or more; before it at most k groups, after it what completes eight.
        for (int k = 0; k <= 7; k++) {
            Expr head = k == 0 ? empty() : optional(seq(repeat(h16Colon, 0, k - 1), h16));
            Expr tail = k <= 5 ? seq(repeat(h16Colon, 5 - k, 5 - k), ls32) : k == 6 ? h16 : empty();
            forms.add(seq(head, literal("::"), tail));
        }
        return alt(forms);
    }

    // Host names, email, URIs.

    /** A label of at most 62 characters: letters and digits, hyphens inside. */
    private static Expr label() {
        return seq(ALNUM, optional(seq(repeat(byteRanges('0', '9', 'a', 'z', 'A', 'Z', '-', '-'), 0, 60), ALNUM)));
    }

    private static Expr hostname() {
        return seq(label(), repeat(seq(literal("."), label()), 0, 3));
    }

    private static Expr email() {
        Expr atext = byteRanges(
                'a', 'z', 'A', 'Z', '0', '9', '!', '!', '#', '\'', '*', '+', '-', '-', '/', '/', '=', '=', '?', '?',
                '^', '`', '{', '~');
        Expr atom = repeat(atext, 1, 15);
        Expr local = seq(atom, repeat(seq(literal("."), atom), 0, 3));
        List<Expr> tlds = EMAIL_TLDS.stream().map(Expr::literal).toList();
        return seq(local, literal("@"), repeat(seq(label(), literal(".")), 1, 2), alt(tlds));
    }

    private static Expr uri() {
        Expr scheme = seq(
                byteRanges('a', 'z', 'A', 'Z'),
                repeat(byteRanges('a', 'z', 'A', 'Z', '0', '9', '+', '+', '-', '.'), 0, 15));
        Expr host = alt(hostname(), seq(literal("["), ipv6(), literal("]")));
        Expr port = seq(literal(":"), digits("1", "9"), repeat(DIGIT, 0, 3));
        // pchar: unreserved, percent-encoded, sub-delims, ":" and "@".
        Expr pchar = alt(
                byteRanges(
                        'a', 'z', 'A', 'Z', '0', '9', '-', '.', '_', '_', '~', '~', '!', '!', '$', '$', '&', ',', ';',
                        ';', '=', '=', ':', ':', '@', '@'),
                seq(literal("%"), HEX, HEX));
        Expr queryChar = alt(pchar, byteRanges('/', '/', '?', '?'));
        Expr path = repeat(seq(literal("/"), repeat(pchar, 0, 32)), 0, 8);
        return seq(
                scheme,
                literal("://"),
                host,
                optional(port),
                path,
                optional(seq(literal("?"), repeat(queryChar, 0, 128))),
                optional(seq(literal("#"), repeat(queryChar, 0, 64))));
    }

    /** The fewest and the most bytes a grammar without rules matches ({@code max} -1: no limit). */
    record Length(long min, long max) {
        static Length of(Expr e) {
            return switch (e) {
                case Expr.Literal l -> new Length(l.bytes.length, l.bytes.length);
                case Expr.ByteClass c -> new Length(1, 1);
                case Expr.Seq s -> {
                    long min = 0;
                    long max = 0;
                    for (Expr p : s.parts) {
                        Length l = of(p);
                        min += l.min;
                        max = max < 0 || l.max < 0 ? -1 : max + l.max;
                    }
                    yield new Length(min, max);
                }
                case Expr.Alt a -> {
                    long min = Long.MAX_VALUE;
                    long max = 0;
                    for (Expr c : a.choices) {
                        Length l = of(c);
                        min = Math.min(min, l.min);
                        max = max < 0 || l.max < 0 ? -1 : Math.max(max, l.max);
                    }
                    yield new Length(min, max);
                }
                case Expr.Repeat r -> {
                    Length body = of(r.body);
                    yield new Length(body.min * r.min, r.max < 0 || body.max < 0 ? -1 : body.max * r.max);
                }
                case Expr.Rule r -> throw new IllegalArgumentException("a format grammar has no rules");
                case Expr.IntegerRange r ->
                    throw new IllegalArgumentException("a format grammar has no integer ranges");
            };
        }
    }
}
