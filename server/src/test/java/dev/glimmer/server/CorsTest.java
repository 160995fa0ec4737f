package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.nullValue;

import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import io.restassured.response.ValidatableResponse;
import io.restassured.specification.RequestSpecification;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Which pages of other origins may call the server from a browser: by default those served from
 * localhost, 127.0.0.1 or [::1] on any port (their origin reflected, credentials allowed, the preflight
 * answered), every other one refused; {@code --cors} widens or narrows that. Each case as a browser
 * sends it: the preflight, then the request itself.
 */
class CorsTest {
    static final String ASKED = "authorization, content-type, x-stainless-os";
    static final String CHAT = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1}";
    static GlimmerApp byDefault;
    static GlimmerApp narrowed;

    @BeforeAll
    static void start() {
        byDefault = TestServer.start(Map.of());
        narrowed = TestServer.start(Map.of("server.cors-origins", "https://chat.example", "server.api-key", "sesame"));
    }

    @AfterAll
    static void stop() {
        byDefault.close();
        narrowed.close();
    }

    /** A request on a connection of its own, closed after the answer: a server stops without waiting for it. */
    static RequestSpecification client(int port) {
        return given().port(port).header("Connection", "close");
    }

    static ValidatableResponse preflight(int port, String origin) {
        return client(port)
                .header("Origin", origin)
                .header("Access-Control-Request-Method", "POST")
                .header("Access-Control-Request-Headers", ASKED)
                .options("/v1/chat/completions")
                .then();
    }

    static RequestSpecification from(int port, String origin) {
        return client(port).header("Origin", origin).header("Authorization", "Bearer sesame");
    }

    /** What a page of {@code origin} gets from the server on {@code port}: a preflight, then answers it may read. */
    static void allowed(int port, String origin) {
        preflight(port, origin)
                .statusCode(204)
                .header("Access-Control-Allow-Origin", origin)
                .header("Access-Control-Allow-Credentials", "true")
                .header("Access-Control-Allow-Methods", containsString("POST"))
                .header("Access-Control-Allow-Methods", containsString("DELETE"))
                .header("Access-Control-Allow-Headers", equalTo(ASKED))
                .header("Vary", containsString("Origin"));
        from(port, origin)
                .get("/metrics")
                .then()
                .statusCode(200)
                .header("Access-Control-Allow-Origin", origin)
                .header("Access-Control-Allow-Credentials", "true");
        // Errors too, so that the page can read what went wrong.
        from(port, origin).get("/v1/nowhere").then().statusCode(404).header("Access-Control-Allow-Origin", origin);
    }

    static void refused(int port, String origin) {
        preflight(port, origin)
                .statusCode(403)
                .header("Access-Control-Allow-Origin", nullValue())
                .header("Access-Control-Allow-Methods", nullValue())
                .body("error.code", equalTo("origin_not_allowed"))
                .body("error.message", containsString("--cors"));
        from(port, origin)
                .get("/metrics")
                .then()
                .header("Access-Control-Allow-Origin", nullValue())
                .header("Access-Control-Allow-Credentials", nullValue());
    }

    @Test
    void byDefaultPagesOfThisMachineOnAnyPortMayCall() {
        for (String origin : List.of(
                "http://localhost:3000",
                "http://127.0.0.1:5173",
                "http://[::1]:8080",
                "https://localhost",
                "http://LocalHost:9000")) {
            allowed(byDefault.port(), origin);
            from(byDefault.port(), origin)
                    .contentType("application/json")
                    .body(CHAT)
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200)
                    .header("Access-Control-Allow-Origin", origin)
                    .header("Access-Control-Allow-Credentials", "true")
                    .body("object", equalTo("chat.completion"));
        }
    }

    @Test
    void byDefaultEveryOtherOriginIsRefused() {
        for (String origin : List.of(
                "http://evil.example",
                "https://localhost.evil.example:3000",
                "http://127.0.0.1.evil.example",
                "null",
                "file://",
                "http://192.168.1.20:3000",
                "ftp://localhost:3000")) {
            refused(byDefault.port(), origin);
        }
    }

    @Test
    void corsNamesTheOriginsInstead() {
        allowed(narrowed.port(), "https://chat.example");
        refused(narrowed.port(), "http://localhost:3000");
        refused(narrowed.port(), "http://chat.example");
        // A preflight needs no API key (browsers never send one with it); the request itself does.
        given().port(narrowed.port())
                .header("Origin", "https://chat.example")
                .get("/v1/models")
                .then()
                .statusCode(401)
                .header("Access-Control-Allow-Origin", "https://chat.example");
    }

    @Test
    void corsWidensToAnyOriginOrNarrowsToNone() {
        // Servers whose model is still loading: CORS is the same on every route, and /metrics answers meanwhile.
        ModelHost loading = new ModelHost();
        try (ServerMetrics metrics = new ServerMetrics();
                GlimmerServer any =
                        GlimmerServer.start(TestServer.config(Map.of("server.cors-origins", "*")), loading, metrics);
                GlimmerServer none = GlimmerServer.start(
                        TestServer.config(Map.of("server.cors-origins", "none")), loading, metrics);
                GlimmerServer both = GlimmerServer.start(
                        TestServer.config(Map.of("server.cors-origins", "local, https://chat.example")),
                        loading,
                        metrics)) {
            preflight(any.port(), "http://anywhere.example")
                    .statusCode(204)
                    .header("Access-Control-Allow-Origin", "*")
                    .header("Access-Control-Allow-Credentials", nullValue());
            client(any.port())
                    .header("Origin", "http://anywhere.example")
                    .get("/metrics")
                    .then()
                    .statusCode(200)
                    .header("Access-Control-Allow-Origin", "*");
            refused(none.port(), "http://localhost:3000");
            allowed(both.port(), "http://localhost:3000");
            allowed(both.port(), "https://chat.example");
            refused(both.port(), "http://evil.example");
        }
    }
}
