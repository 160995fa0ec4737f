package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.chat.ChatDelta;
import dev.glimmer.engine.chat.ChatOutputParser;
import dev.glimmer.engine.chat.ChatResult;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.server.api.ChatCompletionRequest;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ClientGoneException;
import dev.glimmer.server.http.HeldJsonResponse;
import dev.glimmer.server.http.Json;
import dev.glimmer.server.http.RequestBodies;
import dev.glimmer.server.http.SseStream;
import dev.glimmer.server.inference.InferenceJob;
import dev.glimmer.server.inference.JobEvent;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModel;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;

import java.util.List;
import java.util.Optional;

/**
 * {@code POST /v1/chat/completions}: renders the conversation with the chat template, generates,
 * and splits the output into reasoning, content and tool calls with the chat layer's parser, as
 * one JSON response or as server-sent events (docs/SERVING.md, Streaming).
 */
public record ChatCompletionRoutes(ModelHost host, ServerConfig config) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.post("/v1/chat/completions", this::complete);
    }

    private void complete(ServerRequest req, ServerResponse res) throws InterruptedException {
        ServedModel model = host.require();
        ChatCompletionRequest request = ChatCompletionRequest.parse(RequestBodies.jsonObject(req, config.maxBodyBytes()),
                config.sampling(), model.thinksByDefault());
        ChatGeneration generation = ChatGeneration.start(model, request, "messages");
        Reply reply = new Reply(model, request, generation.parser());
        if (request.options().stream()) {
            reply.stream(generation.job(), res);
        } else {
            reply.whole(generation.job(), res);
        }
    }

    /** The response to one request. */
    private static final class Reply {
        private final ServedModel model;
        private final ChatCompletionRequest request;
        private final ChatOutputParser parser;
        private final String id = ResponseParts.newId("chatcmpl-");
        private final long created = ResponseParts.now();

        Reply(ServedModel model, ChatCompletionRequest request, ChatOutputParser parser) {
            this.model = model;
            this.request = request;
            this.parser = parser;
        }

        void whole(InferenceJob job, ServerResponse res) throws InterruptedException {
            ArrayNode logprobs = Json.MAPPER.createArrayNode();
            HeldJsonResponse held = HeldJsonResponse.open(res);
            Optional<JobEvent.Finished> ended = Jobs.followHeld(job, held, token -> {
                parser.accept(token.text());
                if (token.logprobs() != null) {
                    logprobs.add(ResponseParts.chatLogprob(model.tokenizer(), token.logprobs()));
                }
            });
            if (ended.isEmpty()) {
                return;
            }
            JobEvent.Finished end = ended.get();
            parser.finish();
            ChatResult result = parser.result();
            ObjectNode body = base("chat.completion");
            ObjectNode choice = body.putArray("choices").addObject();
            choice.put("index", 0);
            choice.put("finish_reason", result.finishReason(end.reason() == FinishReason.LENGTH));
            ObjectNode message = choice.putObject("message");
            message.put("role", "assistant");
            message.put("content", result.content());
            if (!result.reasoning().isEmpty()) {
                message.put("reasoning_content", result.reasoning());
            }
            if (!result.toolCalls().isEmpty()) {
                ArrayNode calls = message.putArray("tool_calls");
                for (ChatResult.ParsedToolCall call : result.toolCalls()) {
                    ObjectNode c = calls.addObject();
                    c.put("id", call.id());
                    c.put("type", "function");
                    c.putObject("function").put("name", call.name()).put("arguments", call.arguments());
                }
            }
            if (request.options().logprobs()) {
                choice.putObject("logprobs").set("content", logprobs);
            } else {
                choice.putNull("logprobs");
            }
            held.send(ResponseParts.withUsage(body, end));
        }

        void stream(InferenceJob job, ServerResponse res) throws InterruptedException {
            SseStream sse = SseStream.open(res);
            try {
                ObjectNode role = Json.object();
                role.put("role", "assistant");
                role.putNull("content");
                sse.data(chunk(role, null, null));
                JobEvent.Finished end = Jobs.follow(job, sse::ping, token -> {
                    ObjectNode logprobs = null;
                    if (token.logprobs() != null) {
                        logprobs = Json.object();
                        logprobs.putArray("content").add(ResponseParts.chatLogprob(model.tokenizer(), token.logprobs()));
                    }
                    send(sse, parser.accept(token.text()), logprobs);
                });
                send(sse, parser.finish(), null);
                String reason = parser.result().finishReason(end.reason() == FinishReason.LENGTH);
                sse.data(chunk(Json.object(), reason, null));
                if (request.options().includeUsage()) {
                    sse.data(ResponseParts.usageChunk(base("chat.completion.chunk"), end));
                }
                sse.done();
            } catch (ClientGoneException gone) {
                // The job is cancelled; there is nobody to tell.
            } catch (ApiException failed) {
                StreamEnd.error(sse, failed);
            } finally {
                // Stops the job when this handler leaves early (a write failed before following it); no-op otherwise.
                job.cancel();
                sse.close();
            }
        }

        /** Sends one chunk per delta; the token's log-probabilities ride on the first (or an empty delta). */
        private void send(SseStream sse, List<ChatDelta> deltas, ObjectNode logprobs) {
            if (deltas.isEmpty() && logprobs != null) {
                sse.data(chunk(Json.object(), null, logprobs));
                return;
            }
            for (ChatDelta delta : deltas) {
                ObjectNode d = delta(delta);
                if (d != null) {
                    sse.data(chunk(d, null, logprobs));
                    logprobs = null;
                }
            }
        }

        private static ObjectNode delta(ChatDelta delta) {
            ObjectNode d = Json.object();
            switch (delta) {
                case ChatDelta.Reasoning r -> d.put("reasoning_content", r.text());
                case ChatDelta.Content c -> d.put("content", c.text());
                case ChatDelta.ToolCallStart s -> {
                    ObjectNode call = d.putArray("tool_calls").addObject();
                    call.put("index", s.index());
                    call.put("id", s.id());
                    call.put("type", "function");
                    call.putObject("function").put("name", s.name()).put("arguments", "");
                }
                case ChatDelta.ToolCallArguments a -> {
                    ObjectNode call = d.putArray("tool_calls").addObject();
                    call.put("index", a.index());
                    call.putObject("function").put("arguments", a.text());
                }
                case ChatDelta.ToolCallEnd e -> {
                    return null;
                }
            }
            return d;
        }

        /** The fields every response and chunk starts with; {@code object} says which it is. */
        private ObjectNode base(String object) {
            ObjectNode c = Json.object();
            c.put("id", id);
            c.put("object", object);
            c.put("created", created);
            c.put("model", model.facts().id());
            c.put("system_fingerprint", model.facts().fingerprint());
            return c;
        }

        private String chunk(ObjectNode delta, String finishReason, ObjectNode logprobs) {
            ObjectNode c = base("chat.completion.chunk");
            ObjectNode choice = c.putArray("choices").addObject();
            choice.put("index", 0);
            choice.set("delta", delta);
            if (logprobs != null) {
                choice.set("logprobs", logprobs);
            } else {
                choice.putNull("logprobs");
            }
            if (finishReason != null) {
                choice.put("finish_reason", finishReason);
            } else {
                choice.putNull("finish_reason");
            }
            return Json.write(c);
        }
    }
}
