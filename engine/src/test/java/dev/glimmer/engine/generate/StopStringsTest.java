package dev.glimmer.engine.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class StopStringsTest {

    @Test
    void holdsBackAPossibleStartAndNamesTheStopThatMatched() {
        StopStrings stops = new StopStrings(List.of("END", "xy"));
        assertEquals("abc ", stops.push("abc E"));
        assertFalse(stops.matched());
        assertNull(stops.matchedStop());
        assertEquals("EE", stops.push("Ex"));
        assertEquals("", stops.push("y"));
        assertTrue(stops.matched());
        assertEquals("xy", stops.matchedStop());
    }

    @Test
    void theFirstStopInTheTextWinsWhenSeveralComplete() {
        StopStrings stops = new StopStrings(List.of("later", "now"));
        assertEquals("a ", stops.push("a now and later"));
        assertEquals("now", stops.matchedStop());
    }
}
