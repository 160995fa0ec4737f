package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.server.api.ChatCompletionRequest;
import dev.glimmer.server.api.MessagesRequest;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ClientGoneException;
import dev.glimmer.server.http.ErrorShape;
import dev.glimmer.server.http.HeldJsonResponse;
import dev.glimmer.server.http.Json;
import dev.glimmer.server.http.RequestBodies;
import dev.glimmer.server.http.SseStream;
import dev.glimmer.server.inference.JobEvent;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModel;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.util.Optional;

/**
 * Anthropic's Messages API: {@code POST /v1/messages} (whole or streamed) and
 * {@code POST /v1/messages/count_tokens}. A request is translated into the chat completions request
 * it means ({@link MessagesRequest}) and generated as a chat is ({@link ChatGeneration}); the output
 * becomes content blocks ({@link MessageOutput}). Errors on these routes are Anthropic error objects
 * ({@link ErrorShape#ANTHROPIC}).
 */
public record MessagesRoutes(ModelHost host, ServerConfig config) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.post("/v1/messages", this::create).post("/v1/messages/count_tokens", this::countTokens);
    }

    private void create(ServerRequest req, ServerResponse res) throws InterruptedException {
        ServedModel model = host.require();
        ChatCompletionRequest request =
                MessagesRequest.parse(RequestBodies.jsonObject(req, config.maxBodyBytes()), config.sampling(), false);
        Reply reply = new Reply(model, ChatGeneration.start(model, request, "messages"));
        if (request.options().stream()) {
            reply.stream(res);
        } else {
            reply.whole(res);
        }
    }

    private void countTokens(ServerRequest req, ServerResponse res) {
        ServedModel model = host.require();
        ChatCompletionRequest request =
                MessagesRequest.parse(RequestBodies.jsonObject(req, config.maxBodyBytes()), config.sampling(), true);
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(Json.write(Json.object().put("input_tokens", ChatGeneration.prompt(model, request.chat()).length)));
    }

    /** The response to one request. */
    private static final class Reply {
        private final ServedModel model;
        private final ChatGeneration generation;
        private final String id = ResponseParts.newId("msg_");
        private MessageOutput output;
        /** Whether a stream's message_start was sent. */
        private boolean started;

        Reply(ServedModel model, ChatGeneration generation) {
            this.model = model;
            this.generation = generation;
        }

        void whole(ServerResponse res) throws InterruptedException {
            output = new MessageOutput(event -> {});
            HeldJsonResponse held = HeldJsonResponse.open(res, ErrorShape.ANTHROPIC);
            Optional<JobEvent.Finished> ended = Jobs.followHeld(
                    generation.job(),
                    held,
                    token -> output.add(generation.parser().accept(token.text())));
            if (ended.isEmpty()) {
                return;
            }
            JobEvent.Finished end = ended.get();
            finish();
            ObjectNode message = message();
            message.set("content", output.blocks());
            message.put("stop_reason", stopReason(end));
            message.put("stop_sequence", end.stopString());
            message.set("usage", usage(end));
            held.send(message);
        }

        void stream(ServerResponse res) throws InterruptedException {
            SseStream sse = SseStream.open(res);
            try {
                output = new MessageOutput(event -> sse.event(event.path("type").asText(), Json.write(event)));
                // message_start waits for the job's slot, when the cached share of the prompt is known, so that
                // its usage and message_delta's agree; until then silence is bridged by comment frames.
                Runnable ping = () -> {
                    if (started) {
                        sse.event("ping", "{\"type\":\"ping\"}");
                    } else {
                        sse.ping();
                    }
                };
                JobEvent.Finished end = Jobs.follow(
                        generation.job(),
                        ping,
                        admitted -> start(sse, admitted.promptTokens(), admitted.cachedTokens()),
                        token -> output.add(generation.parser().accept(token.text())));
                // A job ended before it started (cancelled while waiting) still gets its message_start.
                start(sse, end.promptTokens(), end.cachedTokens());
                finish();
                ObjectNode delta = Json.object().put("type", "message_delta");
                delta.putObject("delta").put("stop_reason", stopReason(end)).put("stop_sequence", end.stopString());
                delta.set("usage", usage(end));
                sse.event("message_delta", Json.write(delta));
                sse.event("message_stop", "{\"type\":\"message_stop\"}");
            } catch (ClientGoneException gone) {
                // The job is cancelled; there is nobody to tell.
            } catch (ApiException failed) {
                try {
                    sse.event("error", Json.write(ErrorShape.ANTHROPIC.body(failed)));
                } catch (ClientGoneException gone) {
                    // Nobody is listening any more.
                }
            } finally {
                generation.job().cancel();
                sse.close();
            }
        }

        /** Sends message_start and the first ping, once. */
        private void start(SseStream sse, int promptTokens, int cachedTokens) {
            if (started) {
                return;
            }
            started = true;
            ObjectNode start = message();
            start.putArray("content");
            start.putNull("stop_reason");
            start.putNull("stop_sequence");
            start.set("usage", usage(promptTokens, cachedTokens, 0));
            sse.event(
                    "message_start",
                    Json.write(Json.object().put("type", "message_start").set("message", start)));
            sse.event("ping", "{\"type\":\"ping\"}");
        }

        private void finish() {
            output.add(generation.parser().finish());
            output.close();
        }

        private ObjectNode message() {
            ObjectNode m = Json.object();
            m.put("id", id);
            m.put("type", "message");
            m.put("role", "assistant");
            m.put("model", model.facts().id());
            return m;
        }

        private String stopReason(JobEvent.Finished end) {
            if (end.reason() == FinishReason.LENGTH) {
                return "max_tokens";
            }
            if (end.stopString() != null) {
                return "stop_sequence";
            }
            return output.toolUsed() ? "tool_use" : "end_turn";
        }

        private static ObjectNode usage(JobEvent.Finished end) {
            return usage(end.promptTokens(), end.cachedTokens(), end.generatedTokens());
        }

        /** Anthropic counts cached prompt tokens apart: input_tokens are the ones processed. */
        private static ObjectNode usage(int promptTokens, int cachedTokens, int outputTokens) {
            ObjectNode u = Json.object();
            u.put("input_tokens", promptTokens - cachedTokens);
            u.put("output_tokens", outputTokens);
            u.put("cache_creation_input_tokens", 0);
            u.put("cache_read_input_tokens", cachedTokens);
            u.putNull("cache_creation");
            u.putNull("server_tool_use");
            u.putNull("service_tier");
            return u;
        }
    }
}
