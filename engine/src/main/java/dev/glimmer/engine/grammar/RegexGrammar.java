package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.Expr.alt;
import static dev.glimmer.engine.grammar.Expr.empty;
import static dev.glimmer.engine.grammar.Expr.repeat;
import static dev.glimmer.engine.grammar.Expr.seq;

import java.util.ArrayList;
import java.util.List;

/**
 * Compiles a JSON schema {@code pattern} into a grammar of the string's characters. The subset:
 * literal characters, escapes ({@code \d \w \s \D \W \S} and escaped punctuation, {@code \n \t \r}),
 * {@code .}, character classes ({@code [a-z_]}, {@code [^"]}, ASCII members only), groups
 * ({@code (...)}, {@code (?:...)}), alternation {@code |}, the quantifiers {@code * + ?} and
 * {@code {n} {n,} {n,m}} (at most {@value #MAX_COUNT}), and {@code ^} / {@code $} at the ends. As in
 * JSON Schema a pattern is not anchored: without {@code ^} (or {@code $}) any text may come before
 * (or after) the match. Anything else (backreferences, lookaround, {@code \b}, Unicode classes) is
 * refused with an {@link UnsupportedSchemaException}.
 */
final class RegexGrammar {
    static final int MAX_COUNT = 1000;

    private final String pattern;
    private final StringForm form;
    private final String where;
    private int pos;

    private RegexGrammar(String pattern, StringForm form, String where) {
        this.pattern = pattern;
        this.form = form;
        this.where = where;
    }

    /** The characters of a string matching {@code pattern} (without the quotes). */
    static Expr compile(String pattern, StringForm form, String where) {
        RegexGrammar r = new RegexGrammar(pattern, form, where);
        String body = pattern;
        boolean anchoredStart = body.startsWith("^");
        boolean anchoredEnd = body.endsWith("$") && !body.endsWith("\\$");
        int from = anchoredStart ? 1 : 0;
        int to = anchoredEnd ? body.length() - 1 : body.length();
        r.pos = from;
        Expr inner = r.alternation(to);
        if (r.pos != to) {
            throw r.unsupported("unexpected '" + pattern.charAt(r.pos) + "'");
        }
        Expr anything = repeat(form.anyChar(), 0, -1);
        List<Expr> parts = new ArrayList<>();
        if (!anchoredStart) {
            parts.add(anything);
        }
        parts.add(inner);
        if (!anchoredEnd) {
            parts.add(anything);
        }
        return seq(parts);
    }

    private Expr alternation(int end) {
        List<Expr> choices = new ArrayList<>();
        choices.add(concatenation(end));
        while (pos < end && pattern.charAt(pos) == '|') {
            pos++;
            choices.add(concatenation(end));
        }
        return alt(choices);
    }

    private Expr concatenation(int end) {
        List<Expr> parts = new ArrayList<>();
        while (pos < end && pattern.charAt(pos) != '|' && pattern.charAt(pos) != ')') {
            parts.add(quantified(end));
        }
        return parts.isEmpty() ? empty() : seq(parts);
    }

    private Expr quantified(int end) {
        Expr atom = atom(end);
        if (pos >= end) {
            return atom;
        }
        int min;
        int max;
        char c = pattern.charAt(pos);
        switch (c) {
            case '*' -> {
                min = 0;
                max = -1;
                pos++;
            }
            case '+' -> {
                min = 1;
                max = -1;
                pos++;
            }
            case '?' -> {
                min = 0;
                max = 1;
                pos++;
            }
            case '{' -> {
                int close = pattern.indexOf('}', pos);
                if (close < 0 || close >= end) {
                    throw unsupported("'{' without '}'");
                }
                String[] bounds = pattern.substring(pos + 1, close).split(",", -1);
                try {
                    min = Integer.parseInt(bounds[0].strip());
                    max = bounds.length == 1 ? min : bounds[1].isBlank() ? -1 : Integer.parseInt(bounds[1].strip());
                } catch (NumberFormatException e) {
                    throw unsupported("the quantifier " + pattern.substring(pos, close + 1));
                }
                if (bounds.length > 2 || min < 0 || max > MAX_COUNT || min > MAX_COUNT || max >= 0 && max < min) {
                    throw unsupported("the quantifier " + pattern.substring(pos, close + 1) + " (counts from 0 to "
                            + MAX_COUNT + ")");
                }
                pos = close + 1;
            }
            default -> {
                return atom;
            }
        }
        if (pos < end && (pattern.charAt(pos) == '?' || pattern.charAt(pos) == '+')) {
            pos++; // lazy or possessive: the same set of strings
        }
        if (max == 0) {
            return empty();
        }
        return min == 0 && max == 1 ? Expr.optional(atom) : repeat(atom, min, max);
    }

    private Expr atom(int end) {
        char c = pattern.charAt(pos);
        switch (c) {
            case '(' -> {
                pos++;
                if (pattern.startsWith("?:", pos)) {
                    pos += 2;
                } else if (pattern.startsWith("?", pos)) {
                    throw unsupported("lookaround and named groups ('(?')");
                }
                Expr inner = alternation(end);
                if (pos >= end || pattern.charAt(pos) != ')') {
                    throw unsupported("'(' without ')'");
                }
                pos++;
                return inner;
            }
            case '[' -> {
                return characterClass(end);
            }
            case '.' -> {
                pos++;
                boolean[] all = new boolean[128];
                for (int i = 0; i < 128; i++) {
                    all[i] = i != '\n';
                }
                return form.oneOf(all, true);
            }
            case '\\' -> {
                pos++;
                if (pos >= end) {
                    throw unsupported("a trailing backslash");
                }
                char e = pattern.charAt(pos++);
                boolean[] cls = shorthand(e);
                if (cls != null) {
                    boolean negated = Character.isUpperCase(e);
                    return form.oneOf(negated ? not(cls) : cls, negated);
                }
                return form.character(escaped(e));
            }
            case '^', '$' -> throw unsupported("'" + c + "' other than at the start or end of the pattern");
            case '*', '+', '?', '{' -> throw unsupported("a quantifier '" + c + "' with nothing before it");
            default -> {
                int cp = pattern.codePointAt(pos);
                pos += Character.charCount(cp);
                return form.character(cp);
            }
        }
    }

    private Expr characterClass(int end) {
        pos++; // '['
        boolean negated = pos < end && pattern.charAt(pos) == '^';
        if (negated) {
            pos++;
        }
        boolean[] members = new boolean[128];
        boolean first = true;
        while (pos < end && (pattern.charAt(pos) != ']' || first)) {
            first = false;
            int lo = classChar(members);
            if (lo < 0) {
                continue; // a shorthand such as \d, already added
            }
            if (pos + 1 < end && pattern.charAt(pos) == '-' && pattern.charAt(pos + 1) != ']') {
                pos++;
                int hi = classChar(members);
                if (hi < lo) {
                    throw unsupported("the range " + (char) lo + "-" + (char) hi);
                }
                for (int ch = lo; ch <= hi; ch++) {
                    members[ch] = true;
                }
            } else {
                members[lo] = true;
            }
        }
        if (pos >= end) {
            throw unsupported("'[' without ']'");
        }
        pos++; // ']'
        Expr e = form.oneOf(negated ? not(members) : members, negated);
        if (e == null) {
            throw unsupported("a character class that matches nothing");
        }
        return e;
    }

    /** One member of a class: its code (ASCII), or -1 after adding a shorthand class to {@code members}. */
    private int classChar(boolean[] members) {
        char c = pattern.charAt(pos++);
        if (c == '\\') {
            char e = pattern.charAt(pos++);
            boolean[] cls = shorthand(e);
            if (cls != null) {
                if (Character.isUpperCase(e)) {
                    throw unsupported("\\" + e + " inside a character class");
                }
                for (int i = 0; i < 128; i++) {
                    members[i] |= cls[i];
                }
                return -1;
            }
            return escaped(e);
        }
        if (c >= 128) {
            throw unsupported("the non-ASCII character '" + c + "' in a character class");
        }
        return c;
    }

    /** The class of {@code \d \w \s} (and of their negations' letters, uppercase), or null. */
    private static boolean[] shorthand(char e) {
        boolean[] m = new boolean[128];
        switch (Character.toLowerCase(e)) {
            case 'd' -> range(m, '0', '9');
            case 'w' -> {
                range(m, '0', '9');
                range(m, 'a', 'z');
                range(m, 'A', 'Z');
                m['_'] = true;
            }
            case 's' -> {
                for (char s : " \t\n\r\f\u000B".toCharArray()) {
                    m[s] = true;
                }
            }
            default -> {
                return null;
            }
        }
        return m;
    }

    private int escaped(char e) {
        return switch (e) {
            case 'n' -> '\n';
            case 't' -> '\t';
            case 'r' -> '\r';
            case 'f' -> '\f';
            case 'v' -> 0x0B;
            default -> {
                if (Character.isLetterOrDigit(e)) {
                    throw unsupported("the escape \\" + e);
                }
                yield e;
            }
        };
    }

    private static void range(boolean[] m, char from, char to) {
        for (char c = from; c <= to; c++) {
            m[c] = true;
        }
    }

    private static boolean[] not(boolean[] m) {
        boolean[] n = new boolean[128];
        for (int i = 0; i < 128; i++) {
            n[i] = !m[i];
        }
        return n;
    }

    private UnsupportedSchemaException unsupported(String what) {
        return new UnsupportedSchemaException(
                "pattern",
                where,
                "the pattern '" + pattern + "' uses " + what + ", which the supported regex subset does not have");
    }
}
