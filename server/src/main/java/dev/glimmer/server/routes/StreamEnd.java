package dev.glimmer.server.routes;

import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ClientGoneException;
import dev.glimmer.server.http.ErrorResponses;
import dev.glimmer.server.http.SseStream;

/** How a started stream reports a failure. */
final class StreamEnd {
    private StreamEnd() {}

    /** The stream has started (status 200): the error goes in an event, then the stream ends. */
    static void error(SseStream sse, ApiException failed) {
        try {
            sse.data(ErrorResponses.body(failed));
            sse.done();
        } catch (ClientGoneException gone) {
            // Nobody is listening any more.
        }
    }
}
