package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.sampling.TokenLogprobs;
import dev.glimmer.server.api.CompletionRequest;
import dev.glimmer.server.api.GenerationOptions;
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
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * {@code POST /v1/completions}: a raw prompt (text, tokenized with special tokens, or token ids), or a
 * list of them ({@code n} choices each, sampled independently), continued without any chat template. The legacy {@code logprobs} shape (tokens, token_logprobs,
 * top_logprobs, text_offset) is produced when {@code logprobs} is given.
 */
public record CompletionRoutes(ModelHost host, ServerConfig config) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.post("/v1/completions", this::complete);
    }

    // The frame of ChatCompletionRoutes.complete (parse, check, submit, answer whole or streamed): the prompt
    // (text or ids, no template) and the response shapes are what differ.
    private void complete(ServerRequest req, ServerResponse res) throws InterruptedException {
        ServedModel model = host.require();
        CompletionRequest request =
                CompletionRequest.parse(RequestBodies.jsonObject(req, config.maxBodyBytes()), config.sampling());
        List<int[]> prompts = new ArrayList<>();
        for (CompletionRequest.Prompt p : request.prompts()) {
            prompts.add(tokens(model, p));
        }
        GenerationOptions options = request.optionsFor(model.tokenizer().specialTokens());
        List<InferenceJob> jobs = new ArrayList<>();
        try {
            // n choices per prompt: choice p·n + i is the i-th of prompt p, as OpenAI orders them.
            for (int[] prompt : prompts) {
                for (int i = 0; i < options.choices(); i++) {
                    jobs.add(Jobs.submit(model, prompt, options.forChoice(i), "prompt"));
                }
            }
            String id = ResponseParts.newId("cmpl-");
            long created = ResponseParts.now();
            if (request.options().stream()) {
                stream(model, request, jobs, id, created, res);
            } else {
                whole(model, request, jobs, id, created, res);
            }
        } finally {
            // Stops every job this handler leaves behind (a refused submit, a gone client); no-op for ended ones.
            jobs.forEach(InferenceJob::cancel);
        }
    }

    private static int[] tokens(ServedModel model, CompletionRequest.Prompt prompt) {
        return switch (prompt) {
            case CompletionRequest.Prompt.Text t -> model.tokenizer().encode(t.text(), true);
            case CompletionRequest.Prompt.Tokens t -> {
                for (int i = 0; i < t.ids().length; i++) {
                    if (t.ids()[i] >= model.vocabSize()) {
                        throw ApiException.badRequest(
                                "prompt token " + t.ids()[i] + " at " + i + " is beyond the vocabulary ("
                                        + model.vocabSize() + " tokens)",
                                "prompt");
                    }
                }
                yield t.ids();
            }
        };
    }

    /** One choice per job, in order; usage and timings add up the jobs. */
    private static void whole(
            ServedModel model,
            CompletionRequest request,
            List<InferenceJob> jobs,
            String id,
            long created,
            ServerResponse res)
            throws InterruptedException {
        HeldJsonResponse held = HeldJsonResponse.open(res);
        ObjectNode body = base(model, id, created);
        ArrayNode choices = body.putArray("choices");
        List<JobEvent.Finished> ends = new ArrayList<>();
        for (int index = 0; index < jobs.size(); index++) {
            StringBuilder text = new StringBuilder();
            LegacyLogprobs logprobs = new LegacyLogprobs(model);
            Optional<JobEvent.Finished> ended = Jobs.followHeld(jobs.get(index), held, token -> {
                if (token.logprobs() != null) {
                    logprobs.add(token.logprobs(), text.length());
                }
                text.append(token.text());
            });
            if (ended.isEmpty()) {
                return;
            }
            ends.add(ended.get());
            ObjectNode choice = choices.addObject();
            choice.put("text", text.toString());
            choice.put("index", index);
            if (request.options().logprobs()) {
                choice.set("logprobs", logprobs.json);
            } else {
                choice.putNull("logprobs");
            }
            choice.put("finish_reason", ended.get().reason().apiName());
        }
        held.send(ResponseParts.withUsage(body, ResponseParts.total(ends)));
    }

    /** The jobs' chunks one job after another (each chunk names its choice's index), then the usage of all. */
    private static void stream(
            ServedModel model,
            CompletionRequest request,
            List<InferenceJob> jobs,
            String id,
            long created,
            ServerResponse res)
            throws InterruptedException {
        SseStream sse = SseStream.open(res);
        try {
            List<JobEvent.Finished> ends = new ArrayList<>();
            for (int index = 0; index < jobs.size(); index++) {
                int i = index;
                int[] offset = {0};
                JobEvent.Finished end = Jobs.follow(jobs.get(index), sse::ping, token -> {
                    if (token.text().isEmpty() && token.logprobs() == null) {
                        return;
                    }
                    ObjectNode chunk = base(model, id, created);
                    ObjectNode choice = chunk.putArray("choices").addObject();
                    choice.put("text", token.text());
                    choice.put("index", i);
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
                ends.add(end);
                ObjectNode last = base(model, id, created);
                ObjectNode choice = last.putArray("choices").addObject();
                choice.put("text", "");
                choice.put("index", i);
                choice.putNull("logprobs");
                choice.put("finish_reason", end.reason().apiName());
                sse.data(Json.write(last));
            }
            if (request.options().includeUsage()) {
                sse.data(ResponseParts.usageChunk(base(model, id, created), ResponseParts.total(ends)));
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

    private static ObjectNode base(ServedModel model, String id, long created) {
        ObjectNode c = Json.object();
        c.put("id", id);
        c.put("object", "text_completion");
        c.put("created", created);
        c.put("model", model.facts().id());
        c.put("system_fingerprint", model.facts().fingerprint());
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
