package dev.glimmer.server.routes;

import dev.glimmer.engine.grammar.TokenConstraint;
import dev.glimmer.server.api.GenerationOptions;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ClientGoneException;
import dev.glimmer.server.http.HeldJsonResponse;
import dev.glimmer.server.inference.InferenceJob;
import dev.glimmer.server.inference.JobEvent;
import dev.glimmer.server.inference.ServedModel;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** Submitting a checked prompt to the scheduler and following its events, shared by the completion routes. */
final class Jobs {
    /** How long a stream may stay silent before a {@code : ping} frame is sent. */
    static final long PING_SECONDS = 5;

    private Jobs() {}

    /**
     * Checks {@code prompt} against the context and vocabulary, then queues it.
     *
     * @param promptParam the request field the prompt came from, for error messages
     */
    static InferenceJob submit(ServedModel model, int[] prompt, GenerationOptions options, String promptParam) {
        int ctx = model.ctx();
        if (prompt.length > ctx) {
            // A larger --ctx helps only up to the model's own context.
            String remedy = ctx < model.ownCtx()
                    ? "shorten it or start the server with a larger --ctx (up to " + model.ownCtx() + ")"
                    : "shorten it (that is the model's whole context)";
            throw ApiException.contextLengthExceeded(
                    "the prompt has " + prompt.length + " tokens but the context holds " + ctx + "; " + remedy,
                    promptParam);
        }
        for (int token : options.sampling().logitBias().keySet()) {
            if (token >= model.vocabSize()) {
                throw ApiException.badRequest(
                        "logit_bias token id " + token + " is beyond the vocabulary (" + model.vocabSize() + " tokens)",
                        "logit_bias");
            }
        }
        int maxTokens = options.maxTokens() < 0 ? model.defaultMaxTokens() : options.maxTokens();
        InferenceJob job = new InferenceJob(
                prompt,
                options.sampling(),
                maxTokens,
                options.stop(),
                options.logprobs(),
                options.topLogprobs(),
                options.grammar()
                        .map(g -> new TokenConstraint(g, model.tokenTrie()))
                        .orElse(null));
        model.scheduler().submit(job);
        return job;
    }

    /**
     * Passes every token of {@code job} to {@code onToken} and returns its end. Silence and prompt
     * progress are answered with {@code keepAlive} (a {@code : ping} frame on a stream, a space in a
     * held JSON response), so that a client that has gone is noticed: a failed write ends this call
     * with {@link ClientGoneException}. Whenever this call ends before the job did (a gone client, an
     * interrupt, a failure while handling a token), the job is cancelled.
     *
     * @throws ApiException when the job failed: 503 while shutting down, else 500
     */
    static JobEvent.Finished follow(InferenceJob job, Runnable keepAlive, Consumer<JobEvent.Token> onToken)
            throws InterruptedException {
        return follow(job, keepAlive, admitted -> {}, onToken);
    }

    /** {@link #follow}, telling {@code onAdmitted} when the job's prompt begins (before its first token). */
    static JobEvent.Finished follow(
            InferenceJob job,
            Runnable keepAlive,
            Consumer<JobEvent.Admitted> onAdmitted,
            Consumer<JobEvent.Token> onToken)
            throws InterruptedException {
        boolean ended = false;
        try {
            while (true) {
                JobEvent event = job.poll(PING_SECONDS, TimeUnit.SECONDS);
                switch (event) {
                    case null -> keepAlive.run();
                    case JobEvent.Admitted a -> onAdmitted.accept(a);
                    case JobEvent.PromptProgress p -> keepAlive.run();
                    case JobEvent.Token t -> onToken.accept(t);
                    case JobEvent.Finished f -> {
                        ended = true;
                        return f;
                    }
                    case JobEvent.Failed f -> {
                        ended = true;
                        throw f.retryable()
                                ? ApiException.unavailable(f.message(), 1)
                                : ApiException.internal(f.message());
                    }
                }
            }
        } finally {
            if (!ended) {
                job.cancel();
            }
        }
    }

    /**
     * {@link #follow} for a non-streaming response: the held response may probe its client on every token
     * and while the prompt is processed (a space, once the answer takes longer than a quick one), so a
     * client that leaves stops its generation as a streaming one does.
     *
     * @return the job's end; empty when the client left or the job failed (the failure is answered:
     *         rethrown with its status while nothing was sent, else in the body)
     */
    static Optional<JobEvent.Finished> followHeld(
            InferenceJob job, HeldJsonResponse held, Consumer<JobEvent.Token> onToken) throws InterruptedException {
        try {
            return Optional.of(follow(job, held::keepAlive, token -> {
                held.keepAlive();
                onToken.accept(token);
            }));
        } catch (ClientGoneException gone) {
            return Optional.empty();
        } catch (ApiException failed) {
            held.fail(failed);
            return Optional.empty();
        }
    }
}
