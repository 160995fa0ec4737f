package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.sampling.TokenLogprobs;
import dev.glimmer.server.api.CompletionRequest;
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

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * {@code POST /v1/completions}: a raw prompt (text, tokenized with special tokens, or token ids)
 * continued without any chat template. The legacy {@code logprobs} shape (tokens, token_logprobs,
 * top_logprobs, text_offset) is produced when {@code logprobs} is given.
 */
public final class CompletionRoutes implements HttpService {
    private final ModelHost host;
    private final ServerConfig config;

    public CompletionRoutes(ModelHost host, ServerConfig config) {
        this.host = host;
        this.config = config;
    }

    @Override
    public void routing(HttpRules rules) {
        rules.post("/v1/completions", this::complete);
    }

    // The frame of ChatCompletionRoutes.complete (parse, check, submit, answer whole or streamed): the prompt
    // (text or ids, no template) and the response shapes are what differ.
    private void complete(ServerRequest req, ServerResponse res) throws InterruptedException {
        ServedModel model = host.require();
        CompletionRequest request = CompletionRequest.parse(RequestBodies.jsonObject(req, config.maxBodyBytes()),
                config.sampling());
        Jobs.checkModel(request.model(), model);
        int[] prompt = request.tokens().orElseGet(() -> model.tokenizer().encode(request.text().orElseThrow(), true));
        for (int i = 0; i < prompt.length; i++) {
            if (prompt[i] >= model.vocabSize()) {
                throw ApiException.badRequest("prompt[" + i + "] = " + prompt[i] + " is beyond the vocabulary ("
                        + model.vocabSize() + " tokens)", "prompt");
            }
        }
        InferenceJob job = Jobs.submit(model, prompt, request.options(), "prompt");
        String id = ResponseParts.newId("cmpl-");
        long created = ResponseParts.now();
        if (request.options().stream()) {
            stream(model, request, job, id, created, res);
        } else {
            whole(model, request, job, id, created, res);
        }
    }

    private static void whole(ServedModel model, CompletionRequest request, InferenceJob job, String id, long created,
                              ServerResponse res) throws InterruptedException {
        StringBuilder text = new StringBuilder();
        LegacyLogprobs logprobs = new LegacyLogprobs(model);
        HeldJsonResponse held = HeldJsonResponse.open(res);
        Optional<JobEvent.Finished> ended = Jobs.followHeld(job, held, token -> {
            if (token.logprobs() != null) {
                logprobs.add(token.logprobs(), text.length());
            }
            text.append(token.text());
        });
        if (ended.isEmpty()) {
            return;
        }
        JobEvent.Finished end = ended.get();
        ObjectNode body = base(model, id, created);
        ObjectNode choice = body.putArray("choices").addObject();
        choice.put("text", text.toString());
        choice.put("index", 0);
        if (request.options().logprobs()) {
            choice.set("logprobs", logprobs.json);
        } else {
            choice.putNull("logprobs");
        }
        choice.put("finish_reason", end.reason().apiName());
        body.set("usage", ResponseParts.usage(end));
        body.set("timings", ResponseParts.timings(end));
        held.send(body);
    }

    private static void stream(ServedModel model, CompletionRequest request, InferenceJob job, String id, long created,
                               ServerResponse res) throws InterruptedException {
        SseStream sse = SseStream.open(res);
        try {
            int[] offset = {0};
            JobEvent.Finished end = Jobs.follow(job, sse::ping, token -> {
                if (token.text().isEmpty() && token.logprobs() == null) {
                    return;
                }
                ObjectNode chunk = base(model, id, created);
                ObjectNode choice = chunk.putArray("choices").addObject();
                choice.put("text", token.text());
                choice.put("index", 0);
                if (token.logprobs() != null) {
                    LegacyLogprobs one = new LegacyLogprobs(model);
                    one.add(token.logprobs(), offset[0]);
                    choice.set("logprobs", one.json);
                } else {
                    choice.putNull("logprobs");
                }
                choice.putNull("finish_reason");
                offset[0] += token.text().length();
                sse.data(Json.write(chunk));
            });
            ObjectNode last = base(model, id, created);
            ObjectNode choice = last.putArray("choices").addObject();
            choice.put("text", "");
            choice.put("index", 0);
            choice.putNull("logprobs");
            choice.put("finish_reason", end.reason().apiName());
            sse.data(Json.write(last));
            if (request.options().includeUsage()) {
                ObjectNode usage = base(model, id, created);
                usage.putArray("choices");
                usage.set("usage", ResponseParts.usage(end));
                usage.set("timings", ResponseParts.timings(end));
                sse.data(Json.write(usage));
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

    private static ObjectNode base(ServedModel model, String id, long created) {
        ObjectNode c = Json.object();
        c.put("id", id);
        c.put("object", "text_completion");
        c.put("created", created);
        c.put("model", model.facts().id());
        return c;
    }

    /** The completions API's logprobs object, filled token by token. */
    private static final class LegacyLogprobs {
        final ObjectNode json = Json.object();
        private final ServedModel model;
        private final ArrayNode tokens = json.putArray("tokens");
        private final ArrayNode tokenLogprobs = json.putArray("token_logprobs");
        private final ArrayNode top = json.putArray("top_logprobs");
        private final ArrayNode offsets = json.putArray("text_offset");

        LegacyLogprobs(ServedModel model) {
            this.model = model;
        }

        void add(TokenLogprobs lp, int textOffset) {
            tokens.add(piece(lp.token()));
            tokenLogprobs.add(lp.logprob());
            ObjectNode alternatives = top.addObject();
            for (TokenLogprobs.Candidate c : lp.top()) {
                alternatives.put(piece(c.token()), c.logprob());
            }
            offsets.add(textOffset);
        }

        private String piece(int token) {
            return new String(model.tokenizer().piece(token, true), StandardCharsets.UTF_8);
        }
    }
}
