package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.chat.ChatDelta;
import dev.glimmer.server.http.Json;
import java.util.List;
import java.util.function.Consumer;

/**
 * The output items of a Responses API response, built from the chat parser's deltas in the order
 * they arrive: a {@code reasoning} item for GLM's thinking, a {@code message} item with one
 * {@code output_text} part for the answer, a {@code function_call} item per tool call. Each item
 * opens when its first text arrives and closes when text of another kind does; every step is also
 * given to {@code events} as the streaming event that announces it ({@code response.output_item.added},
 * {@code response.content_part.added}, {@code response.reasoning_text.delta},
 * {@code response.output_text.delta}, {@code response.function_call_arguments.delta}, their
 * {@code .done} events and {@code response.output_item.done}), so that a streamed and a whole
 * response have the same items. A tool call that the model never finished (its text follows as an
 * answer) stays in the output with status {@code incomplete}.
 */
final class ResponseOutput {
    private enum Kind {
        REASONING,
        MESSAGE,
        CALL
    }

    private final ArrayNode items = Json.MAPPER.createArrayNode();
    private final Consumer<ObjectNode> events;
    /** The open item, or null. */
    private ObjectNode item;

    private Kind kind;
    private final StringBuilder text = new StringBuilder();

    /** @param events receives each streaming event without its {@code sequence_number} */
    ResponseOutput(Consumer<ObjectNode> events) {
        this.events = events;
    }

    /** The items so far (all of them once {@link #close} was called). */
    ArrayNode items() {
        return items;
    }

    void add(List<ChatDelta> deltas) {
        for (ChatDelta delta : deltas) {
            add(delta);
        }
    }

    private void add(ChatDelta delta) {
        switch (delta) {
            case ChatDelta.Reasoning r -> text(Kind.REASONING, r.text());
            case ChatDelta.Content c -> text(Kind.MESSAGE, c.text());
            case ChatDelta.ToolCallStart s -> {
                closeForNext();
                ObjectNode call = open(Kind.CALL, "fc_");
                call.put("call_id", s.id());
                call.put("name", s.name());
                call.put("arguments", "");
                added();
            }
            case ChatDelta.ToolCallArguments a -> {
                text.append(a.text());
                ObjectNode e = itemEvent("response.function_call_arguments.delta");
                e.put("delta", a.text());
                events.accept(e);
            }
            case ChatDelta.ToolCallEnd e -> {
                ObjectNode done = itemEvent("response.function_call_arguments.done");
                done.put("name", item.path("name").asText());
                done.put("arguments", text.toString());
                events.accept(done);
                closeItem("completed");
            }
        }
    }

    /** Closes the open item; {@code status} is {@code incomplete} when the generation ran out of tokens. */
    void close(String status) {
        closeItem(kind == Kind.CALL ? "incomplete" : status);
    }

    private void text(Kind k, String piece) {
        if (kind != k) {
            closeForNext();
            if (k == Kind.REASONING) {
                open(k, "rs_").putArray("summary");
                item.putArray("content");
            } else {
                open(k, "msg_").put("role", "assistant");
                item.putArray("content");
            }
            added();
            ObjectNode part = itemEvent("response.content_part.added");
            part.put("content_index", 0);
            part.set("part", part(""));
            events.accept(part);
        }
        text.append(piece);
        events.accept(textEvent(k, "delta", piece));
    }

    /** A reasoning or output text event ({@code delta} or {@code done}) of the open item's one part. */
    private ObjectNode textEvent(Kind k, String stage, String text) {
        ObjectNode e = itemEvent((k == Kind.REASONING ? "response.reasoning_text." : "response.output_text.") + stage);
        e.put("content_index", 0);
        e.put(stage.equals("delta") ? "delta" : "text", text);
        if (k == Kind.MESSAGE) {
            e.putArray("logprobs");
        }
        return e;
    }

    /** Ends the open item because other output follows: a text is complete, a call that did not end is not. */
    private void closeForNext() {
        closeItem(kind == Kind.CALL ? "incomplete" : "completed");
    }

    private ObjectNode open(Kind k, String idPrefix) {
        kind = k;
        text.setLength(0);
        item = Json.object();
        item.put("id", ResponseParts.newId(idPrefix));
        item.put(
                "type",
                switch (k) {
                    case REASONING -> "reasoning";
                    case MESSAGE -> "message";
                    case CALL -> "function_call";
                });
        item.put("status", "in_progress");
        return item;
    }

    private void added() {
        ObjectNode e = event("response.output_item.added");
        e.put("output_index", items.size());
        e.set("item", item.deepCopy());
        events.accept(e);
    }

    /** Ends the open item with {@code status}. */
    private void closeItem(String status) {
        if (item == null) {
            return;
        }
        if (kind == Kind.CALL) {
            item.put("arguments", text.toString());
            item.put("status", status);
        } else {
            String full = text.toString();
            events.accept(textEvent(kind, "done", full));
            ObjectNode partDone = itemEvent("response.content_part.done");
            partDone.put("content_index", 0);
            partDone.set("part", part(full));
            events.accept(partDone);
            ((ArrayNode) item.get("content")).add(part(full));
            item.put("status", status);
        }
        ObjectNode e = event("response.output_item.done");
        e.put("output_index", items.size());
        e.set("item", item);
        events.accept(e);
        items.add(item);
        item = null;
        kind = null;
    }

    private ObjectNode part(String content) {
        ObjectNode part = Json.object();
        if (kind == Kind.REASONING) {
            part.put("type", "reasoning_text");
            part.put("text", content);
        } else {
            part.put("type", "output_text");
            part.put("text", content);
            part.putArray("annotations");
            part.putArray("logprobs");
        }
        return part;
    }

    private static ObjectNode event(String type) {
        return Json.object().put("type", type);
    }

    private ObjectNode itemEvent(String type) {
        ObjectNode e = event(type);
        e.put("item_id", item.path("id").asText());
        e.put("output_index", items.size());
        return e;
    }
}
