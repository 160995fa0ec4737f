package dev.glimmer.engine.tokenizer;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.IntStream;

/**
 * Cuts the special tokens out of a text before BPE runs, the way llama.cpp does: the special tokens
 * are taken longest first (by UTF-8 length); each one is searched in every piece of text that is
 * still plain, and every occurrence becomes that token, splitting the piece around it. The plain
 * pieces left are encoded separately (a word never spans a special token).
 *
 * <p>Which tokens count: {@link TokenType#USER_DEFINED} always; {@link TokenType#CONTROL} and
 * {@link TokenType#UNKNOWN} only when special-token parsing is on (otherwise their text is ordinary
 * text).
 */
final class SpecialTokenSplitter {

    /** A piece of the input: plain text {@code [start, end)} to encode, or one special token. */
    sealed interface Piece {}

    record Text(int start, int end) implements Piece {}

    record Special(int id) implements Piece {}

    private record Candidate(int id, String text, boolean controlLike) {}

    private final List<Candidate> candidates;

    SpecialTokenSplitter(String[] texts, TokenType[] types) {
        // Longest first, as llama.cpp sorts; ties (which llama.cpp leaves in no defined order) by id.
        candidates = IntStream.range(0, texts.length)
                .filter(id -> types[id] == TokenType.CONTROL
                        || types[id] == TokenType.USER_DEFINED
                        || types[id] == TokenType.UNKNOWN)
                .mapToObj(id -> new Candidate(id, texts[id], types[id].isControlLike()))
                .sorted(Comparator.comparingInt((Candidate c) -> -c.text().getBytes(StandardCharsets.UTF_8).length)
                        .thenComparingInt(Candidate::id))
                .toList();
    }

    List<Piece> split(String text, boolean parseSpecial) {
        List<Piece> pieces = new ArrayList<>();
        if (text.isEmpty()) {
            return pieces;
        }
        pieces.add(new Text(0, text.length()));
        for (Candidate c : candidates) {
            if (c.controlLike() && !parseSpecial) {
                continue;
            }
            if (!text.contains(c.text())) {
                continue; // the common case: one fast scan instead of one per piece
            }
            List<Piece> next = new ArrayList<>(pieces.size() + 2);
            for (Piece p : pieces) {
                if (p instanceof Text(int start, int end)) {
                    cut(text, start, end, c, next);
                } else {
                    next.add(p);
                }
            }
            pieces = next;
        }
        return pieces;
    }

    /** Appends {@code text[start, end)} to {@code out} with every occurrence of the candidate cut out. */
    private static void cut(String text, int start, int end, Candidate c, List<Piece> out) {
        int from = start;
        int length = c.text().length();
        while (from < end) {
            int match = text.indexOf(c.text(), from, end);
            if (match < 0) {
                break;
            }
            if (match > from) {
                out.add(new Text(from, match));
            }
            out.add(new Special(c.id()));
            from = match + length;
        }
        if (from < end) {
            out.add(new Text(from, end));
        }
    }
}
