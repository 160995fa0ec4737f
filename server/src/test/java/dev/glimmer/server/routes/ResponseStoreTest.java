package dev.glimmer.server.routes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.ApiKeyFilter;
import dev.glimmer.server.http.Json;
import org.junit.jupiter.api.Test;

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
    void aResponseBelongsToTheCallerThatStoredIt() {
        ResponseStore store = new ResponseStore(10, 1 << 20);
        store.put("key 1", response("resp_1", 3), conversation("secret"));
        assertTrue(store.response("resp_1", "key 2").isEmpty());
        assertTrue(store.conversation("resp_1", "key 2").isEmpty());
        assertFalse(store.remove("resp_1", "key 2"));
        assertTrue(store.response("resp_1", "key 1").isPresent(), "still there for its owner");
        assertTrue(store.remove("resp_1", "key 1"));
    }

    @Test
    void keepsAResponseAndItsConversationUntilDeleted() {
        ResponseStore store = new ResponseStore(10, 1 << 20);
        store.put(ApiKeyFilter.ANYONE, response("resp_1", 3), conversation("hi"));
        assertEquals(
                "resp_1",
                store.response("resp_1", ApiKeyFilter.ANYONE)
                        .orElseThrow()
                        .path("id")
                        .asText());
        assertEquals(
                "hi",
                store.conversation("resp_1", ApiKeyFilter.ANYONE)
                        .orElseThrow()
                        .get(0)
                        .path("content")
                        .asText());
        assertTrue(store.remove("resp_1", ApiKeyFilter.ANYONE));
        assertFalse(store.remove("resp_1", ApiKeyFilter.ANYONE));
        assertTrue(store.response("resp_1", ApiKeyFilter.ANYONE).isEmpty());
        assertEquals(0, store.bytes());
    }

    @Test
    void dropsTheLeastRecentlyUsedBeyondTheCount() {
        ResponseStore store = new ResponseStore(3, 1 << 20);
        for (int i = 1; i <= 3; i++) {
            store.put(ApiKeyFilter.ANYONE, response("resp_" + i, 0), conversation("hi"));
        }
        store.conversation("resp_1", ApiKeyFilter.ANYONE); // continued: now the most recently used
        store.put(ApiKeyFilter.ANYONE, response("resp_4", 0), conversation("hi"));
        assertEquals(3, store.size());
        assertTrue(store.response("resp_2", ApiKeyFilter.ANYONE).isEmpty());
        assertTrue(store.response("resp_1", ApiKeyFilter.ANYONE).isPresent());
    }

    @Test
    void staysWithinItsBytes() {
        ResponseStore store = new ResponseStore(1000, 10_000);
        for (int i = 0; i < 20; i++) {
            store.put(ApiKeyFilter.ANYONE, response("resp_" + i, 1000), conversation("hi"));
            assertTrue(store.bytes() <= 10_000, store.bytes() + " bytes");
        }
        assertTrue(store.response("resp_19", ApiKeyFilter.ANYONE).isPresent());
        assertTrue(store.response("resp_0", ApiKeyFilter.ANYONE).isEmpty());
        store.put(ApiKeyFilter.ANYONE, response("resp_big", 20_000), conversation("hi"));
        assertTrue(store.response("resp_big", ApiKeyFilter.ANYONE).isEmpty(), "larger than the whole store: not kept");
        assertTrue(store.response("resp_19", ApiKeyFilter.ANYONE).isPresent());
    }
}
