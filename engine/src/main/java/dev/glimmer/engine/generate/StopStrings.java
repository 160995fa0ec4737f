package dev.glimmer.engine.generate;

import java.util.List;

/**
 * Finds stop strings in streamed text, even when they are split across tokens: text that could be
 * the start of a stop string is held back until it is clear that it is not.
 */
public final class StopStrings {
    private final List<String> stops;
    private final StringBuilder pending = new StringBuilder();
    /** The stop string found, or null while none is. */
    private String matched;

    public StopStrings(List<String> stops) {
        this.stops = stops;
    }

    /** Adds {@code text}; returns what can be shown now. After a match, returns the text before the stop string. */
    public String push(String text) {
        pending.append(text);
        int first = -1;
        String found = null;
        for (String stop : stops) {
            int at = pending.indexOf(stop);
            if (at >= 0 && (first < 0 || at < first)) {
                first = at;
                found = stop;
            }
        }
        if (first >= 0) {
            matched = found;
            String visible = pending.substring(0, first);
            pending.setLength(0);
            return visible;
        }
        int keep = longestStopPrefixSuffix();
        String visible = pending.substring(0, pending.length() - keep);
        pending.delete(0, pending.length() - keep);
        return visible;
    }

    public boolean matched() {
        return matched != null;
    }

    /** The stop string that ended the text (the first in the text when several did), or null when none did. */
    public String matchedStop() {
        return matched;
    }

    /** The held-back text, at the end of the generation when no stop string completed. */
    public String flush() {
        String rest = pending.toString();
        pending.setLength(0);
        return rest;
    }

    /** The length of the longest end of {@code pending} that is the beginning of a stop string. */
    private int longestStopPrefixSuffix() {
        String text = pending.toString();
        int best = 0;
        for (String stop : stops) {
            for (int len = Math.min(stop.length() - 1, text.length()); len > best; len--) {
                if (text.regionMatches(text.length() - len, stop, 0, len)) {
                    best = len;
                    break;
                }
            }
        }
        return best;
    }
}
