package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.chat.ChatDelta;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.server.api.ResponsesRequest;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ApiKeyFilter;
import dev.glimmer.server.http.ClientGoneException;
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
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * OpenAI's Responses API: {@code POST /v1/responses} (whole or streamed), {@code GET} and
 * {@code DELETE /v1/responses/{id}}. A request is translated into the chat completions request it
 * means ({@link ResponsesRequest}) and generated as a chat is ({@link ChatGeneration}); the output
 * becomes Response items ({@link ResponseOutput}). Stored responses ({@code store}, the default)
 * can be fetched, deleted and continued with {@code previous_response_id}: the follow-up renders
 * the stored conversation plus its new input, so the prefix cache reuses the KV cache of the
 * conversation and only the new tokens are processed ({@code usage.input_tokens_details.cached_tokens}).
 * A stored response is seen only by the API key that created it (a 404 for any other).
 */
public final class ResponsesRoutes implements HttpService {
    private final ModelHost host;
    private final ServerConfig config;
    private final ResponseStore store = new ResponseStore();

    public ResponsesRoutes(ModelHost host, ServerConfig config) {
        this.host = host;
        this.config = config;
    }

    @Override
    public void routing(HttpRules rules) {
        rules.post("/v1/responses", this::create)
                .get("/v1/responses/{id}", this::retrieve)
                .delete("/v1/responses/{id}", this::delete);
    }

    private void create(ServerRequest req, ServerResponse res) throws InterruptedException {
        ServedModel model = host.require();
        String caller = ApiKeyFilter.caller(req);
        ResponsesRequest request = ResponsesRequest.parse(
                RequestBodies.jsonObject(req, config.maxBodyBytes()),
                config.sampling(),
                model.thinksByDefault(),
                id -> store.conversation(id, caller));
        ChatGeneration generation = ChatGeneration.start(model, request.chat(), "input");
        Reply reply = new Reply(model, request, generation, caller);
        if (request.chat().options().stream()) {
            reply.stream(res);
        } else {
            reply.whole(res);
        }
    }

    private void retrieve(ServerRequest req, ServerResponse res) {
        String id = req.path().pathParameters().get("id");
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(Json.write(store.response(id, ApiKeyFilter.caller(req)).orElseThrow(() -> notFound(id))));
    }

    private void delete(ServerRequest req, ServerResponse res) {
        String id = req.path().pathParameters().get("id");
        if (!store.remove(id, ApiKeyFilter.caller(req))) {
            throw notFound(id);
        }
        ObjectNode body = Json.object().put("id", id).put("object", "response").put("deleted", true);
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(Json.write(body));
    }

    private static ApiException notFound(String id) {
        return ApiException.notFound(
                "no stored response with id '" + id + "' (it was not stored, was deleted or has" + " expired)",
                "response_id",
                "not_found");
    }

    /** The response to one request. */
    private final class Reply {
        private final ServedModel model;
        private final ResponsesRequest request;
        private final ChatGeneration generation;
        /** Whose response this is: only they may fetch or continue it. */
        private final String caller;

        private final String id = ResponseParts.newId("resp_");
        private final long created = ResponseParts.now();
        private ResponseOutput output;
        /** Tokens generated while the model was thinking (the one that ends the thinking included). */
        private int reasoningTokens;

        private boolean thinking;

        Reply(ServedModel model, ResponsesRequest request, ChatGeneration generation, String caller) {
            this.model = model;
            this.request = request;
            this.generation = generation;
            this.caller = caller;
            this.thinking = request.chat().chat().startsInReasoning();
        }

        void whole(ServerResponse res) throws InterruptedException {
            output = new ResponseOutput(event -> {});
            HeldJsonResponse held = HeldJsonResponse.open(res);
            Optional<JobEvent.Finished> ended = Jobs.followHeld(generation.job(), held, this::accept);
            if (ended.isPresent()) {
                held.send(finish(ended.get()));
            }
        }

        void stream(ServerResponse res) throws InterruptedException {
            SseStream sse = SseStream.open(res);
            int[] sequence = {0};
            Consumer<ObjectNode> send = event -> {
                event.put("sequence_number", sequence[0]++);
                sse.event(event.path("type").asText(), Json.write(event));
            };
            try {
                output = new ResponseOutput(send);
                send.accept(Json.object().put("type", "response.created").set("response", response("in_progress")));
                send.accept(Json.object().put("type", "response.in_progress").set("response", response("in_progress")));
                JobEvent.Finished end = Jobs.follow(generation.job(), sse::ping, this::accept);
                ObjectNode done = finish(end);
                String type =
                        done.path("status").asText().equals("completed") ? "response.completed" : "response.incomplete";
                send.accept(Json.object().put("type", type).set("response", done));
            } catch (ClientGoneException gone) {
                // The job is cancelled; there is nobody to tell.
            } catch (ApiException failed) {
                try {
                    ObjectNode response = response("failed");
                    response.putObject("error").put("code", "server_error").put("message", failed.getMessage());
                    send.accept(Json.object().put("type", "response.failed").set("response", response));
                } catch (ClientGoneException gone) {
                    // Nobody is listening any more.
                }
            } finally {
                generation.job().cancel();
                sse.close();
            }
        }

        private void accept(JobEvent.Token token) {
            List<ChatDelta> deltas = generation.parser().accept(token.text());
            if (thinking) {
                reasoningTokens++;
                thinking = deltas.stream().allMatch(d -> d instanceof ChatDelta.Reasoning);
            }
            output.add(deltas);
        }

        /** Ends the output and returns the final Response object, stored when asked for. */
        private ObjectNode finish(JobEvent.Finished end) {
            output.add(generation.parser().finish());
            boolean ranOut = end.reason() == FinishReason.LENGTH;
            output.close(ranOut ? "incomplete" : "completed");
            ObjectNode response = response(ranOut ? "incomplete" : "completed");
            if (ranOut) {
                response.putObject("incomplete_details").put("reason", "max_output_tokens");
            }
            ObjectNode usage = response.putObject("usage");
            usage.put("input_tokens", end.promptTokens());
            usage.putObject("input_tokens_details").put("cached_tokens", end.cachedTokens());
            usage.put("output_tokens", end.generatedTokens());
            usage.putObject("output_tokens_details")
                    .put("reasoning_tokens", reasoningTokens)
                    // Chat Completions' names for the drafts of speculative steps (docs/SPECULATIVE.md)
                    .put("accepted_prediction_tokens", end.acceptedTokens())
                    .put("rejected_prediction_tokens", end.draftedTokens() - end.acceptedTokens());
            usage.put("total_tokens", end.promptTokens() + end.generatedTokens());
            if (request.store()) {
                ArrayNode conversation = request.conversation().deepCopy();
                conversation.addAll(output.items().deepCopy());
                store.put(caller, response, conversation);
            }
            return response;
        }

        /** The Response object with the items so far. */
        private ObjectNode response(String status) {
            ObjectNode r = Json.object();
            r.put("id", id);
            r.put("object", "response");
            r.put("created_at", created);
            r.put("status", status);
            r.put("background", false);
            r.putNull("error");
            r.putNull("incomplete_details");
            r.put("model", model.facts().id());
            r.set("output", output.items().deepCopy());
            r.setAll(request.settings());
            r.putNull("usage");
            return r;
        }
    }
}
