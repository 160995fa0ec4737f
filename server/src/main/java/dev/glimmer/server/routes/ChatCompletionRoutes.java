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
import dev.glimmer.server.inference.JobEvent;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModel;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.util.ArrayList;
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
        ChatCompletionRequest request = ChatCompletionRequest.parse(
                RequestBodies.jsonObject(req, config.maxBodyBytes()), config.sampling(), model.thinksByDefault());
        List<ChatGeneration> choices = ChatGeneration.startChoices(model, request, "messages");
        Reply reply = new Reply(model, request);
        try {
            if (request.options().stream()) {
                reply.stream(choices, res);
            } else {
                reply.whole(choices, res);
            }
        } finally {
            // Stops every job this handler leaves behind (a gone client, a failure); no-op for ended ones.
            choices.forEach(c -> c.job().cancel());
        }
    }

    /**
     * The response to one request: its choices ({@code n}), each one generation, followed one after
     * another (they run side by side in the scheduler, their tokens queued until read).
     */
    private static final class Reply {
        private final ServedModel model;
        private final ChatCompletionRequest request;
        private final String id = ResponseParts.newId("chatcmpl-");
        private final long created = ResponseParts.now();

        Reply(ServedModel model, ChatCompletionRequest request) {
            this.model = model;
            this.request = request;
        }

        void whole(List<ChatGeneration> generations, ServerResponse res) throws InterruptedException {
            HeldJsonResponse held = HeldJsonResponse.open(res);
            ObjectNode body = base("chat.completion");
            ArrayNode choices = body.putArray("choices");
            List<JobEvent.Finished> ends = new ArrayList<>();
            for (int index = 0; index < generations.size(); index++) {
                ChatOutputParser parser = generations.get(index).parser();
                ArrayNode logprobs = Json.MAPPER.createArrayNode();
                Optional<JobEvent.Finished> ended =
                        Jobs.followHeld(generations.get(index).job(), held, token -> {
                            ObjectNode logprob = replyLogprob(parser, token);
                            parser.accept(token.text());
                            if (logprob != null) {
                                logprobs.add(logprob);
                            }
                        });
                if (ended.isEmpty()) {
                    return;
                }
                ends.add(ended.get());
                parser.finish();
                choices.add(choice(index, parser.result(), ended.get(), logprobs));
            }
            held.send(ResponseParts.withUsage(body, ResponseParts.total(ends)));
        }

        private ObjectNode choice(int index, ChatResult result, JobEvent.Finished end, ArrayNode logprobs) {
            ObjectNode choice = Json.object();
            choice.put("index", index);
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
            return choice;
        }

        /**
         * The log-probability entry of {@code token}, or null when none was asked for or the token belongs to
         * the reasoning: {@code logprobs.content} describes the reply's tokens only. Call before the parser
         * reads the token.
         */
        private ObjectNode replyLogprob(ChatOutputParser parser, JobEvent.Token token) {
            if (token.logprobs() == null || parser.inReasoning()) {
                return null;
            }
            return ResponseParts.chatLogprob(model.tokenizer(), token.logprobs());
        }

        void stream(List<ChatGeneration> generations, ServerResponse res) throws InterruptedException {
            SseStream sse = SseStream.open(res);
            try {
                List<JobEvent.Finished> ends = new ArrayList<>();
                for (int index = 0; index < generations.size(); index++) {
                    int i = index;
                    ChatOutputParser parser = generations.get(index).parser();
                    ObjectNode role = Json.object();
                    role.put("role", "assistant");
                    role.putNull("content");
                    sse.data(chunk(i, role, null, null));
                    JobEvent.Finished end = Jobs.follow(generations.get(index).job(), sse::ping, token -> {
                        ObjectNode logprobs = null;
                        ObjectNode logprob = replyLogprob(parser, token);
                        if (logprob != null) {
                            logprobs = Json.object();
                            logprobs.putArray("content").add(logprob);
                        }
                        send(sse, i, parser.accept(token.text()), logprobs);
                    });
                    ends.add(end);
                    send(sse, i, parser.finish(), null);
                    String reason = parser.result().finishReason(end.reason() == FinishReason.LENGTH);
                    sse.data(chunk(i, Json.object(), reason, null));
                }
                if (request.options().includeUsage()) {
                    sse.data(ResponseParts.usageChunk(base("chat.completion.chunk"), ResponseParts.total(ends)));
                }
                sse.done();
            } catch (ClientGoneException gone) {
                // The jobs are cancelled; there is nobody to tell.
            } catch (ApiException failed) {
                StreamEnd.error(sse, failed);
            } finally {
                sse.close();
            }
        }

        /** Sends one chunk per delta; the token's log-probabilities ride on the first (or an empty delta). */
        private void send(SseStream sse, int index, List<ChatDelta> deltas, ObjectNode logprobs) {
            if (deltas.isEmpty() && logprobs != null) {
                sse.data(chunk(index, Json.object(), null, logprobs));
                return;
            }
            for (ChatDelta delta : deltas) {
                ObjectNode d = delta(delta);
                if (d != null) {
                    sse.data(chunk(index, d, null, logprobs));
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

        /** A chunk of choice {@code index}. */
        private String chunk(int index, ObjectNode delta, String finishReason, ObjectNode logprobs) {
            ObjectNode c = base("chat.completion.chunk");
            ObjectNode choice = c.putArray("choices").addObject();
            choice.put("index", index);
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
