package dev.glimmer.server.loadgen;

import java.util.SplittableRandom;

/**
 * Prompts for a load test: sentences of common English words drawn at random from a seed and the request's
 * number, so that every request has its own text from the first word on and no server can answer one from
 * the cache of another, while the same seed gives the same prompts on every server compared. A common word
 * is about one token for the usual BPE vocabularies (punctuation adds a few); {@link LoadGenerator} corrects
 * the word count with the server's own token count of the warm-up prompt.
 */
final class PromptText {
    /** Words of everyday English; with the space before it, most are a single token in current vocabularies. */
    private static final String[] WORDS = {
        "the",
        "a",
        "river",
        "morning",
        "city",
        "light",
        "old",
        "new",
        "small",
        "great",
        "house",
        "road",
        "water",
        "stone",
        "garden",
        "window",
        "winter",
        "summer",
        "market",
        "friend",
        "letter",
        "story",
        "bridge",
        "forest",
        "music",
        "train",
        "station",
        "table",
        "paper",
        "field",
        "island",
        "mountain",
        "teacher",
        "doctor",
        "farmer",
        "child",
        "family",
        "people",
        "country",
        "village",
        "night",
        "day",
        "walks",
        "finds",
        "builds",
        "carries",
        "opens",
        "reads",
        "writes",
        "sings",
        "watches",
        "remembers",
        "brings",
        "keeps",
        "follows",
        "paints",
        "counts",
        "plants",
        "cooks",
        "leaves",
        "answers",
        "calls",
        "quiet",
        "bright",
        "cold",
        "warm",
        "long",
        "short",
        "green",
        "blue",
        "red",
        "golden",
        "early",
        "late",
        "slowly",
        "often",
        "again",
        "together",
        "never",
        "always",
        "today",
        "later",
        "near",
        "far",
        "under",
        "over",
        "across",
        "behind",
        "before",
        "after",
        "with",
        "without",
        "and",
        "but",
        "because",
        "while",
        "when",
        "where",
        "every",
        "some",
        "many",
        "few",
        "two",
        "three",
        "first",
        "last",
        "bread",
        "coffee",
        "apple",
        "wind",
        "rain",
        "snow",
        "sun",
        "moon",
        "star",
        "boat",
        "ship",
        "door",
        "book",
        "song",
        "game",
        "dream",
        "idea",
        "plan",
        "question",
        "reason",
        "picture",
        "voice",
        "heart"
    };

    private PromptText() {}

    /**
     * The text of request {@code index} ({@code -1} for the warm-up): {@code words} words in sentences of 6
     * to 15 words, each sentence capitalised and ended by a full stop.
     */
    static String of(long seed, int index, int words) {
        SplittableRandom random = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + index);
        StringBuilder text = new StringBuilder(words * 7);
        int sentenceLeft = 0;
        for (int i = 0; i < words; i++) {
            String word = WORDS[random.nextInt(WORDS.length)];
            if (sentenceLeft == 0) {
                if (i > 0) {
                    text.append(". ");
                }
                sentenceLeft = random.nextInt(6, 16);
                word = Character.toUpperCase(word.charAt(0)) + word.substring(1);
            } else {
                text.append(' ');
            }
            text.append(word);
            sentenceLeft--;
        }
        return text.append('.').toString();
    }
}
