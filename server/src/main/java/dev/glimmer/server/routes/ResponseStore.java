package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The responses stored for {@code GET /v1/responses/{id}} and {@code previous_response_id}, in
 * memory and bounded in number and in bytes of JSON text (by default {@link #MAX_RESPONSES} and
 * {@link #MAX_BYTES}), the least recently used dropped first (so a conversation being continued stays). Each is kept as
 * JSON text: the Response object and the conversation a follow-up continues (every input item and
 * the output items). The KV cache is not kept here: a follow-up renders the whole conversation and
 * the server's prefix cache finds the tokens it already processed.
 *
 * <p>Each response belongs to the caller that created it ({@code ApiKeyFilter.caller}: the API key it was
 * sent with, or anyone on a server without keys); to every other caller it is not there.
 */
final class ResponseStore {
    static final int MAX_RESPONSES = 1000;
    static final long MAX_BYTES = 64L << 20;

    private record Stored(String owner, String response, String conversation) {
        long bytes() {
            return 2L * (response.length() + conversation.length());
        }
    }

    private final LinkedHashMap<String, Stored> responses = new LinkedHashMap<>(16, 0.75f, true);
    private final int maxResponses;
    private final long maxBytes;
    private long bytes;

    ResponseStore() {
        this(MAX_RESPONSES, MAX_BYTES);
    }

    ResponseStore(int maxResponses, long maxBytes) {
        this.maxResponses = maxResponses;
        this.maxBytes = maxBytes;
    }

    /** Keeps {@code response} (its {@code id} is the key) and the conversation it ends, for {@code owner}. */
    synchronized void put(String owner, ObjectNode response, ArrayNode conversation) {
        Stored stored = new Stored(owner, Json.write(response), Json.write(conversation));
        if (stored.bytes() > maxBytes) {
            return; // larger than the whole store: not kept, so GET answers 404 as for an expired one
        }
        drop(response.path("id").asText());
        responses.put(response.path("id").asText(), stored);
        bytes += stored.bytes();
        Iterator<Map.Entry<String, Stored>> oldest = responses.entrySet().iterator();
        while (responses.size() > maxResponses || bytes > maxBytes) {
            bytes -= oldest.next().getValue().bytes();
            oldest.remove();
        }
    }

    synchronized Optional<ObjectNode> response(String id, String owner) {
        return owned(id, owner).map(s -> (ObjectNode) parse(s.response));
    }

    /** The conversation that response {@code id} ended, for a follow-up. */
    synchronized Optional<ArrayNode> conversation(String id, String owner) {
        return owned(id, owner).map(s -> (ArrayNode) parse(s.conversation));
    }

    private Optional<Stored> owned(String id, String owner) {
        Stored s = responses.get(id);
        return s != null && s.owner.equals(owner) ? Optional.of(s) : Optional.empty();
    }

    synchronized int size() {
        return responses.size();
    }

    /** The bytes the stored JSON text takes (two per character). */
    synchronized long bytes() {
        return bytes;
    }

    synchronized boolean remove(String id, String owner) {
        return owned(id, owner).isPresent() && drop(id);
    }

    private boolean drop(String id) {
        Stored s = responses.remove(id);
        if (s != null) {
            bytes -= s.bytes();
        }
        return s != null;
    }

    private static JsonNode parse(String json) {
        try {
            return Json.MAPPER.readTree(json);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
