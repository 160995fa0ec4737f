package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.sampling.TokenLogprobs;
import dev.glimmer.engine.tokenizer.Tokenizer;
import dev.glimmer.server.http.Json;
import dev.glimmer.server.inference.JobEvent;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;

/** JSON pieces shared by chat and text completions: ids, usage, llama-server's timings, logprobs. */
final class ResponseParts {
    private static final SecureRandom RANDOM = new SecureRandom();

    private ResponseParts() {}

    static String newId(String prefix) {
        byte[] bytes = new byte[12];
        RANDOM.nextBytes(bytes);
        return prefix + HexFormat.of().formatHex(bytes);
    }

    static long now() {
        return System.currentTimeMillis() / 1000;
    }

    /** The ends of several jobs of one request (a list of prompts) as one, for its usage and timings. */
    static JobEvent.Finished total(List<JobEvent.Finished> ends) {
        int prompt = 0;
        int cached = 0;
        int generated = 0;
        double promptMillis = 0;
        double generationMillis = 0;
        int drafted = 0;
        int accepted = 0;
        for (JobEvent.Finished f : ends) {
            drafted += f.draftedTokens();
            accepted += f.acceptedTokens();
            prompt += f.promptTokens();
            cached += f.cachedTokens();
            generated += f.generatedTokens();
            promptMillis += f.promptMillis();
            generationMillis += f.generationMillis();
        }
        return new JobEvent.Finished(
                ends.getLast().reason(),
                prompt,
                cached,
                generated,
                promptMillis,
                generationMillis,
                ends.getLast().stopString(),
                drafted,
                accepted);
    }

    /** {@code body} with the OpenAI {@code usage} and llama-server {@code timings} of {@code f} (chat and completions). */
    static ObjectNode withUsage(ObjectNode body, JobEvent.Finished f) {
        body.set("usage", usage(f));
        body.set("timings", timings(f));
        return body;
    }

    /** The last chunk of a stream that asked for {@code stream_options.include_usage}: no choices, the usage. */
    static String usageChunk(ObjectNode base, JobEvent.Finished f) {
        base.putArray("choices");
        return Json.write(withUsage(base, f));
    }

    private static ObjectNode usage(JobEvent.Finished f) {
        ObjectNode u = Json.object();
        u.put("prompt_tokens", f.promptTokens());
        u.put("completion_tokens", f.generatedTokens());
        u.put("total_tokens", f.promptTokens() + f.generatedTokens());
        u.putObject("prompt_tokens_details").put("cached_tokens", f.cachedTokens());
        // OpenAI's names for a prediction's tokens: here the drafts of speculative steps (docs/SPECULATIVE.md)
        u.putObject("completion_tokens_details")
                .put("accepted_prediction_tokens", f.acceptedTokens())
                .put("rejected_prediction_tokens", f.draftedTokens() - f.acceptedTokens());
        return u;
    }

    private static ObjectNode timings(JobEvent.Finished f) {
        ObjectNode t = Json.object();
        int processed = f.promptTokens() - f.cachedTokens();
        t.put("cache_n", f.cachedTokens());
        t.put("prompt_n", processed);
        t.put("prompt_ms", f.promptMillis());
        t.put("prompt_per_second", f.promptMillis() > 0 ? processed * 1000.0 / f.promptMillis() : 0);
        t.put("predicted_n", f.generatedTokens());
        t.put("predicted_ms", f.generationMillis());
        t.put(
                "predicted_per_second",
                f.generationMillis() > 0 ? f.generatedTokens() * 1000.0 / f.generationMillis() : 0);
        if (f.draftedTokens() > 0) {
            // llama-server's names, given as it gives them: only when something was drafted
            t.put("draft_n", f.draftedTokens());
            t.put("draft_n_accepted", f.acceptedTokens());
        }
        return t;
    }

    /** One entry of a chat response's {@code logprobs.content}: the token, its bytes, its alternatives. */
    static ObjectNode chatLogprob(Tokenizer tokenizer, TokenLogprobs lp) {
        ObjectNode entry = tokenEntry(tokenizer, lp.token(), lp.logprob());
        ArrayNode top = entry.putArray("top_logprobs");
        for (TokenLogprobs.Candidate c : lp.top()) {
            top.add(tokenEntry(tokenizer, c.token(), c.logprob()));
        }
        return entry;
    }

    private static ObjectNode tokenEntry(Tokenizer tokenizer, int token, float logprob) {
        byte[] bytes = tokenizer.piece(token, true);
        ObjectNode e = Json.object();
        e.put("token", new String(bytes, StandardCharsets.UTF_8));
        e.put("logprob", logprob);
        ArrayNode b = e.putArray("bytes");
        for (byte x : bytes) {
            b.add(x & 0xff);
        }
        return e;
    }
}
