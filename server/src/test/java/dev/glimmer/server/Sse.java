package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;

/** Splits an event-stream body into its JSON events, checking the framing byte for byte on the way. */
public final class Sse {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /**
     * The events of {@code body}, which must be exactly {@code data: <json>\n\n} frames (ping comments
     * allowed) ending with {@code data: [DONE]\n\n}, each JSON compact as the server writes it.
     */
    public static List<JsonNode> events(String body) throws Exception {
        assertTrue(body.endsWith("data: [DONE]\n\n"), "the stream must end with [DONE]: " + tail(body));
        List<JsonNode> events = new ArrayList<>();
        StringBuilder rebuilt = new StringBuilder();
        for (String frame : body.split("\n\n")) {
            if (frame.equals(": ping")) {
                rebuilt.append(": ping\n\n");
                continue;
            }
            assertTrue(frame.startsWith("data: "), "a frame without 'data: ': " + frame);
            String data = frame.substring(6);
            rebuilt.append("data: ").append(data).append("\n\n");
            if (data.equals("[DONE]")) {
                continue;
            }
            JsonNode json = MAPPER.readTree(data);
            assertEquals(MAPPER.writeValueAsString(json), data, "one compact JSON object per frame");
            events.add(json);
        }
        assertEquals(body, rebuilt.toString(), "nothing but frames in the body");
        return events;
    }

    private static String tail(String s) {
        return s.length() < 200 ? s : s.substring(s.length() - 200);
    }

    private Sse() {}
}
