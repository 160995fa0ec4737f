package dev.glimmer.server.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The load test's prompts: the same for a seed on every run, different for every request from the start. */
class PromptTextTest {

    @Test
    void theSeedMakesTheSameTextEveryTime() {
        assertEquals(PromptText.of(42, 3, 200), PromptText.of(42, 3, 200));
        assertNotEquals(PromptText.of(42, 3, 200), PromptText.of(43, 3, 200));
    }

    @Test
    void everyRequestHasItsOwnTextFromTheFirstWords() {
        Set<String> openings = new HashSet<>();
        for (int i = -1; i < 1000; i++) {
            String[] words = PromptText.of(42, i, 50).split(" ");
            openings.add(words[0] + " " + words[1] + " " + words[2]);
        }
        assertTrue(openings.size() > 990, "distinct three-word openings of 1001 prompts: " + openings.size());
    }

    @Test
    void theTextHasTheWordsAskedForInSentences() {
        for (int words : new int[] {1, 7, 100, 4000}) {
            String text = PromptText.of(7, 0, words);
            assertEquals(words, text.split(" ").length, text);
            assertTrue(Character.isUpperCase(text.charAt(0)) && text.endsWith(".") && !text.contains(".."), text);
        }
    }
}
