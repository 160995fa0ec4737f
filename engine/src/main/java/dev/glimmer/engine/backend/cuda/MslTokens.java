package dev.glimmer.engine.backend.cuda;

import java.util.ArrayList;
import java.util.List;

/**
 * The tokens of MSL (C++) source text, as far as {@link CudaSourceRewriter} needs them: identifiers,
 * numbers, string and character literals, comments, runs of white space, and punctuation (one
 * character each, but {@code ->} and {@code ::}). Concatenating the tokens' texts gives the source back.
 */
final class MslTokens {

    enum Kind {
        IDENTIFIER,
        NUMBER,
        LITERAL,
        COMMENT,
        SPACE,
        PUNCTUATION
    }

    record Token(Kind kind, String text) {
        /** Past the last token. */
        static final Token END = new Token(Kind.SPACE, "");

        /** Whether this is the code token {@code s} (not white space or a comment that reads so). */
        boolean is(String s) {
            return kind != Kind.SPACE && kind != Kind.COMMENT && text.equals(s);
        }
    }

    private MslTokens() {}

    static List<Token> lex(String s) {
        List<Token> tokens = new ArrayList<>();
        int i = 0;
        while (i < s.length()) {
            char c = s.charAt(i);
            int end;
            Kind kind;
            if (Character.isWhitespace(c)) {
                kind = Kind.SPACE;
                end = i + 1;
                while (end < s.length() && Character.isWhitespace(s.charAt(end))) {
                    end++;
                }
            } else if (s.startsWith("//", i)) {
                kind = Kind.COMMENT;
                end = s.indexOf('\n', i);
                end = end < 0 ? s.length() : end;
            } else if (s.startsWith("/*", i)) {
                kind = Kind.COMMENT;
                end = s.indexOf("*/", i + 2);
                end = end < 0 ? s.length() : end + 2;
            } else if (Character.isLetter(c) || c == '_') {
                kind = Kind.IDENTIFIER;
                end = i + 1;
                while (end < s.length() && (Character.isLetterOrDigit(s.charAt(end)) || s.charAt(end) == '_')) {
                    end++;
                }
            } else if (Character.isDigit(c) || c == '.' && i + 1 < s.length() && Character.isDigit(s.charAt(i + 1))) {
                kind = Kind.NUMBER;
                end = i + 1;
                while (end < s.length()) {
                    char d = s.charAt(end);
                    boolean exponentSign = (d == '+' || d == '-') && "eEpP".indexOf(s.charAt(end - 1)) >= 0;
                    if (!(Character.isLetterOrDigit(d) || d == '_' || d == '.' || exponentSign)) {
                        break;
                    }
                    end++;
                }
            } else if (c == '"' || c == '\'') {
                kind = Kind.LITERAL;
                end = i + 1;
                while (end < s.length() && s.charAt(end) != c && s.charAt(end) != '\n') {
                    end += s.charAt(end) == '\\' ? 2 : 1;
                }
                end = Math.min(end + 1, s.length());
            } else {
                kind = Kind.PUNCTUATION;
                end = s.startsWith("->", i) || s.startsWith("::", i) ? i + 2 : i + 1;
            }
            tokens.add(new Token(kind, s.substring(i, end)));
            i = end;
        }
        return tokens;
    }
}
