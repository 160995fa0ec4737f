package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.Json;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ResponseStoreTest {

    private static ObjectNode response(String id, int padding) {
        return Json.object().put("id", id).put("text", "x".repeat(padding));
    }

    private static ArrayNode conversation(String text) {
        ArrayNode items = Json.MAPPER.createArrayNode();
        items.addObject().put("type", "message").put("role", "user").put("content", text);
        return items;
    }

    @Test
    void keepsAResponseAndItsConversationUntilDeleted() {
        ResponseStore store = new ResponseStore(10, 1 << 20);
        store.put(response("resp_1", 3), conversation("hi"));
        assertEquals("resp_1", store.response("resp_1").orElseThrow().path("id").asText());
        assertEquals("hi", store.conversation("resp_1").orElseThrow().get(0).path("content").asText());
        assertTrue(store.remove("resp_1"));
        assertFalse(store.remove("resp_1"));
        assertTrue(store.response("resp_1").isEmpty());
        assertEquals(0, store.bytes());
    }

    @Test
    void dropsTheLeastRecentlyUsedBeyondTheCount() {
        ResponseStore store = new ResponseStore(3, 1 << 20);
        for (int i = 1; i <= 3; i++) {
            store.put(response("resp_" + i, 0), conversation("hi"));
        }
        store.conversation("resp_1"); // continued: now the most recently used
        store.put(response("resp_4", 0), conversation("hi"));
        assertEquals(3, store.size());
        assertTrue(store.response("resp_2").isEmpty());
        assertTrue(store.response("resp_1").isPresent());
    }

    @Test
    void staysWithinItsBytes() {
        ResponseStore store = new ResponseStore(1000, 10_000);
        for (int i = 0; i < 20; i++) {
            store.put(response("resp_" + i, 1000), conversation("hi"));
            assertTrue(store.bytes() <= 10_000, store.bytes() + " bytes");
        }
        assertTrue(store.response("resp_19").isPresent());
        assertTrue(store.response("resp_0").isEmpty());
        store.put(response("resp_big", 20_000), conversation("hi"));
        assertTrue(store.response("resp_big").isEmpty(), "larger than the whole store: not kept");
        assertTrue(store.response("resp_19").isPresent());
    }
}
