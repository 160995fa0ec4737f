package dev.glimmer.server.routes;

import io.helidon.http.HttpException;
import io.helidon.http.Status;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.staticcontent.ClasspathHandlerConfig;
import io.helidon.webserver.staticcontent.StaticContentFeature;

/**
 * The web chat at {@code /}: the web-chat module's files (class path folder {@code web/}) and the
 * libraries it uses, which WebJars put under {@code META-INF/resources/webjars/}, at
 * {@code /webjars/}. A path that names no file falls through to the routes registered after these.
 */
public final class WebChatRoutes {
    private WebChatRoutes() {}

    public static void register(HttpRouting.Builder routing) {
        routing.register(
                "/webjars",
                StaticContentFeature.createService(ClasspathHandlerConfig.builder()
                        .location("META-INF/resources/webjars")
                        .build()));
        routing.register(
                "/",
                StaticContentFeature.createService(ClasspathHandlerConfig.builder()
                        .location("web")
                        .welcome("index.html")
                        .build()));
        // Helidon's static content answers a browser's conditional GET (If-None-Match, If-Modified-Since)
        // by throwing an HttpException with 304 Not Modified; it must reach the browser as that status,
        // not as a server error.
        routing.error(HttpException.class, (req, res, e) -> {
            res.status(e.status());
            if (e.status().code() == Status.NOT_MODIFIED_304.code()) {
                res.send();
            } else {
                res.send(e.getMessage());
            }
        });
    }
}
