package dev.glimmer.server.routes;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.chat.ChatDelta;
import dev.glimmer.server.http.Json;
import java.util.List;
import java.util.function.Consumer;

/**
 * The content blocks of an Anthropic Messages response, built from the chat parser's deltas in the
 * order they arrive: a {@code thinking} block for GLM's thinking, a {@code text} block for the
 * answer, a {@code tool_use} block per tool call. Each block opens when its first text arrives and
 * closes when text of another kind does; every step is also given to {@code events} as the
 * streaming event that announces it ({@code content_block_start}, {@code content_block_delta} with
 * {@code thinking_delta}, {@code text_delta} or {@code input_json_delta}, {@code content_block_stop}).
 * A tool call the model never finished (its text follows as an answer) was streamed but is not a
 * block of the message: its input is not a complete JSON object.
 */
final class MessageOutput {
    private enum Kind {
        THINKING,
        TEXT,
        TOOL_USE
    }

    private final ArrayNode blocks = Json.MAPPER.createArrayNode();
    private final Consumer<ObjectNode> events;
    /** The open block, or null. */
    private ObjectNode block;

    private Kind kind;
    /** Blocks started so far: the stream's index of the next one. */
    private int started;

    private final StringBuilder text = new StringBuilder();
    /** Whether the open tool_use block's call was completed. */
    private boolean callEnded;

    private boolean toolUsed;

    /** @param events receives each streaming event */
    MessageOutput(Consumer<ObjectNode> events) {
        this.events = events;
    }

    /** The finished blocks (all of them once {@link #close} was called). */
    ArrayNode blocks() {
        return blocks;
    }

    /** Whether a tool call was completed ({@code stop_reason: "tool_use"}). */
    boolean toolUsed() {
        return toolUsed;
    }

    void add(List<ChatDelta> deltas) {
        for (ChatDelta delta : deltas) {
            switch (delta) {
                case ChatDelta.Reasoning r -> text(Kind.THINKING, r.text());
                case ChatDelta.Content c -> text(Kind.TEXT, c.text());
                case ChatDelta.ToolCallStart s -> {
                    ObjectNode tool = open(Kind.TOOL_USE);
                    tool.put("id", s.id());
                    tool.put("name", s.name());
                    tool.putObject("input");
                    // Called by the client itself (Anthropic also has server-side callers).
                    tool.putObject("caller").put("type", "direct");
                    started();
                }
                case ChatDelta.ToolCallArguments a -> {
                    text.append(a.text());
                    ObjectNode d = Json.object().put("type", "input_json_delta").put("partial_json", a.text());
                    events.accept(blockEvent("content_block_delta").set("delta", d));
                }
                case ChatDelta.ToolCallEnd e -> {
                    block.set("input", parse(text.toString()));
                    callEnded = true;
                    toolUsed = true;
                    close();
                }
            }
        }
    }

    /** Closes the open block. */
    void close() {
        if (block == null) {
            return;
        }
        events.accept(blockEvent("content_block_stop"));
        switch (kind) {
            case THINKING -> block.put("thinking", text.toString());
            case TEXT -> block.put("text", text.toString());
            case TOOL_USE -> {}
        }
        // An unfinished call's input is a fragment of JSON: it was streamed, but is no tool_use block.
        if (kind != Kind.TOOL_USE || callEnded) {
            blocks.add(block);
        }
        block = null;
        kind = null;
    }

    private void text(Kind k, String piece) {
        if (kind != k) {
            ObjectNode b = open(k);
            if (k == Kind.THINKING) {
                b.put("thinking", "");
                b.put("signature", "");
            } else {
                b.put("text", "");
                b.putNull("citations");
            }
            started();
        }
        text.append(piece);
        ObjectNode d = k == Kind.THINKING
                ? Json.object().put("type", "thinking_delta").put("thinking", piece)
                : Json.object().put("type", "text_delta").put("text", piece);
        events.accept(blockEvent("content_block_delta").set("delta", d));
    }

    private ObjectNode open(Kind k) {
        close();
        kind = k;
        callEnded = false;
        text.setLength(0);
        block = Json.object();
        block.put(
                "type",
                switch (k) {
                    case THINKING -> "thinking";
                    case TEXT -> "text";
                    case TOOL_USE -> "tool_use";
                });
        return block;
    }

    private void started() {
        started++;
        events.accept(blockEvent("content_block_start").set("content_block", block.deepCopy()));
    }

    private ObjectNode blockEvent(String type) {
        return Json.object().put("type", type).put("index", started - 1);
    }

    private static JsonNode parse(String json) {
        try {
            return Json.MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("the chat parser's tool arguments are not JSON: " + json, e);
        }
    }
}
