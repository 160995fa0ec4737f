package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What a web page can make the browser send to a server on this machine is refused (issue #38): a
 * DNS-rebinding page's own name as the {@code Host} on every route, and the bodies a page may POST
 * cross-site without a preflight ({@code text/plain}, forms); the names of this machine, and the ones
 * given with {@code --allowed-hosts}, are served; a stored Response is seen only with the API key that
 * created it. Raw sockets, so that the {@code Host} header is exactly what a browser would send.
 */
class WebPageAccessTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String CHAT = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}";
    /** Bound to 127.0.0.1 with one more name and two keys. */
    static GlimmerApp local;

    @BeforeAll
    static void start() {
        local = TestServer.start(Map.of("server.allowed-hosts", "glimmer.lan", "server.api-key", "alpha, beta"));
    }

    @AfterAll
    static void stop() {
        local.close();
    }

    record Answer(int status, Map<String, String> headers, String body) {
        JsonNode json() {
            try {
                return JSON.readTree(body);
            } catch (IOException e) {
                throw new AssertionError("not JSON: " + body, e);
            }
        }
    }

    /** One request on its own connection, the headers as given ({@code Host} included), with key alpha. */
    static Answer send(int port, String method, String path, String host, Map<String, String> headers, String body)
            throws IOException {
        Map<String, String> all = new LinkedHashMap<>();
        all.put("Host", host);
        all.put("Authorization", "Bearer alpha");
        all.putAll(headers);
        byte[] bytes = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        StringBuilder head = new StringBuilder(method + " " + path + " HTTP/1.1\r\n");
        all.forEach((k, v) -> head.append(k).append(": ").append(v).append("\r\n"));
        head.append("Content-Length: ").append(bytes.length).append("\r\nConnection: close\r\n\r\n");
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(20_000);
            socket.getOutputStream().write(head.toString().getBytes(StandardCharsets.ISO_8859_1));
            socket.getOutputStream().write(bytes);
            socket.getOutputStream().flush();
            return parse(socket.getInputStream());
        }
    }

    static Answer get(int port, String path, String host) throws IOException {
        return send(port, "GET", path, host, Map.of(), null);
    }

    static Answer postJson(int port, String path, String host, String body) throws IOException {
        return send(port, "POST", path, host, Map.of("Content-Type", "application/json"), body);
    }

    /** The status, headers and body of one answer (by its Content-Length or chunks: the server keeps the connection). */
    private static Answer parse(InputStream in) throws IOException {
        String[] lines = line(in, "\r\n\r\n").split("\r\n");
        Map<String, String> headers = new LinkedHashMap<>();
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            headers.put(
                    lines[i].substring(0, colon).strip().toLowerCase(),
                    lines[i].substring(colon + 1).strip());
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            for (int size; (size = Integer.parseInt(line(in, "\r\n").strip(), 16)) > 0; line(in, "\r\n")) {
                body.write(in.readNBytes(size));
            }
            line(in, "\r\n");
        } else {
            body.write(in.readNBytes(Integer.parseInt(headers.getOrDefault("content-length", "0"))));
        }
        return new Answer(Integer.parseInt(lines[0].split(" ")[1]), headers, body.toString(StandardCharsets.UTF_8));
    }

    /** The bytes up to {@code end} (left out) as text. */
    private static String line(InputStream in, String end) throws IOException {
        StringBuilder text = new StringBuilder();
        while (!text.toString().endsWith(end)) {
            int b = in.read();
            if (b < 0) {
                throw new IOException("the connection ended after: " + text);
            }
            text.append((char) b);
        }
        return text.substring(0, text.length() - end.length());
    }

    static void assertRefusedHost(Answer a, String what) {
        assertEquals(403, a.status(), what + ": " + a.body());
        String message = a.json().path("error").path("message").asText();
        assertTrue(message.contains("--allowed-hosts"), what + ": " + message);
        assertFalse(message.contains("\n"), "one line");
    }

    /** The two requests of issue #38, as curl sent them. */
    @Test
    void theIssuesTwoCurlLinesAreRefused() throws IOException {
        int port = local.port();
        String attacker = "attacker.example:" + port;
        Answer models = get(port, "/v1/models", attacker);
        assertRefusedHost(models, "GET /v1/models");
        assertEquals(
                "permission_error", models.json().path("error").path("type").asText());
        assertEquals(
                "host_not_allowed", models.json().path("error").path("code").asText());
        assertTrue(models.json().path("error").path("message").asText().contains("'" + attacker + "'"));
        assertRefusedHost(
                send(port, "POST", "/v1/chat/completions", attacker, Map.of("Content-Type", "text/plain"), CHAT),
                "text/plain chat");
        // The same body from this machine's name is refused for its type alone.
        assertEquals(
                415,
                send(
                                port,
                                "POST",
                                "/v1/chat/completions",
                                "127.0.0.1:" + port,
                                Map.of("Content-Type", "text/plain"),
                                CHAT)
                        .status());
    }

    @Test
    void aRebindingHostIsRefusedOnEveryRoute() throws IOException {
        int port = local.port();
        for (String host : List.of(
                "attacker.example:" + port,
                "attacker.example",
                "127.0.0.1.attacker.example",
                "localhost.attacker.example:" + port,
                "192.168.1.20:" + port)) {
            for (String path : List.of(
                    "/v1/models",
                    "/models",
                    "/v1/models/tiny-f32",
                    "/health",
                    "/metrics",
                    "/",
                    "/index.html",
                    "/app.js",
                    "/style.css",
                    "/webjars/marked/15.0.12/marked.min.js",
                    "/v1/responses/resp_1",
                    "/nowhere")) {
                assertRefusedHost(get(port, path, host), "GET " + path + " as " + host);
            }
            for (String path : List.of(
                    "/v1/chat/completions",
                    "/v1/completions",
                    "/v1/responses",
                    "/tokenize",
                    "/apply-template",
                    "/chat/completions")) {
                assertRefusedHost(postJson(port, path, host, CHAT), "POST " + path + " as " + host);
            }
            Answer messages = postJson(port, "/v1/messages", host, CHAT);
            assertEquals(403, messages.status());
            assertEquals(
                    "permission_error",
                    messages.json().path("error").path("type").asText(),
                    "Anthropic's shape");
            assertRefusedHost(send(port, "DELETE", "/v1/responses/resp_1", host, Map.of(), null), "DELETE");
            assertRefusedHost(
                    send(
                            port,
                            "OPTIONS",
                            "/v1/chat/completions",
                            host,
                            Map.of("Origin", "http://" + host, "Access-Control-Request-Method", "POST"),
                            null),
                    "a preflight");
        }
    }

    @Test
    void thisMachinesNamesAndTheAllowedOnesAreServed() throws IOException {
        int port = local.port();
        for (String host : List.of(
                "localhost:" + port,
                "127.0.0.1:" + port,
                "[::1]:" + port,
                "localhost",
                "LocalHost:" + port,
                "localhost.:" + port,
                "glimmer.lan",
                "GLIMMER.LAN:" + port)) {
            Answer models = get(port, "/v1/models", host);
            assertEquals(200, models.status(), host + ": " + models.body());
            assertEquals(
                    "tiny-f32", models.json().path("data").get(0).path("id").asText());
            assertEquals(200, get(port, "/", host).status(), host);
            assertEquals(
                    200,
                    get(port, "/webjars/marked/15.0.12/marked.min.js", host).status(),
                    host);
            assertEquals(200, get(port, "/metrics", host).status(), host);
            assertEquals(
                    200,
                    postJson(port, "/tokenize", host, "{\"content\":\"hi\"}").status(),
                    host);
        }
        Answer chat = postJson(port, "/v1/chat/completions", "glimmer.lan:" + port, CHAT);
        assertEquals(200, chat.status(), chat.body());
        assertEquals("chat.completion", chat.json().path("object").asText());
    }

    /** The bodies a browser sends cross-site without a preflight, and a POST that says no type at all. */
    @Test
    void bodiesThatAreNotDeclaredJsonAre415() throws IOException {
        int port = local.port();
        String host = "localhost:" + port;
        for (String type : List.of(
                "text/plain",
                "text/plain;charset=UTF-8",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/jsonx",
                "text/json")) {
            for (String path :
                    List.of("/v1/chat/completions", "/v1/completions", "/v1/responses", "/tokenize", "/completions")) {
                Answer a = send(port, "POST", path, host, Map.of("Content-Type", type), CHAT);
                assertEquals(415, a.status(), type + " to " + path + ": " + a.body());
                assertEquals(
                        "unsupported_media_type",
                        a.json().path("error").path("code").asText());
                assertTrue(a.json().path("error").path("message").asText().contains("Content-Type: application/json"));
            }
            Answer messages = send(port, "POST", "/v1/messages", host, Map.of("Content-Type", type), CHAT);
            assertEquals(415, messages.status());
            assertEquals(
                    "invalid_request_error",
                    messages.json().path("error").path("type").asText());
        }
        Answer untyped = send(port, "POST", "/v1/chat/completions", host, Map.of(), CHAT);
        assertEquals(415, untyped.status());
        assertTrue(untyped.body().contains("no Content-Type"), untyped.body());
        // Parameters are allowed, and the type's case does not matter.
        for (String type : List.of("application/json; charset=utf-8", "Application/JSON")) {
            Answer a = send(port, "POST", "/v1/chat/completions", host, Map.of("Content-Type", type), CHAT);
            assertEquals(200, a.status(), type + ": " + a.body());
        }
    }

    /** Listening on every address, the user chose to be reachable: only names given are checked, if any. */
    @Test
    void onAnotherAddressOnlyTheGivenNamesAreChecked() throws IOException {
        ModelHost loading = new ModelHost();
        try (ServerMetrics metrics = new ServerMetrics();
                GlimmerServer open =
                        GlimmerServer.start(TestServer.config(Map.of("server.host", "0.0.0.0")), loading, metrics);
                GlimmerServer named = GlimmerServer.start(
                        TestServer.config(
                                Map.of("server.host", "0.0.0.0", "server.allowed-hosts", "glimmer.lan,10.0.0.5")),
                        loading,
                        metrics)) {
            assertEquals(
                    200,
                    get(open.port(), "/metrics", "attacker.example:" + open.port())
                            .status());
            assertEquals(200, get(open.port(), "/metrics", "glimmer.lan").status());
            assertRefusedHost(get(named.port(), "/metrics", "attacker.example:" + named.port()), "a name not given");
            for (String host : List.of("glimmer.lan:" + named.port(), "10.0.0.5:" + named.port(), "localhost")) {
                assertEquals(200, get(named.port(), "/metrics", host).status(), host);
            }
        }
        // "*" turns the check off on loopback too.
        try (ServerMetrics metrics = new ServerMetrics();
                GlimmerServer any =
                        GlimmerServer.start(TestServer.config(Map.of("server.allowed-hosts", "*")), loading, metrics)) {
            assertEquals(200, get(any.port(), "/metrics", "attacker.example").status());
        }
    }

    /** With several keys, one key's stored Responses are not there for another. */
    @Test
    void aStoredResponseIsSeenOnlyWithTheKeyThatCreatedIt() throws IOException {
        int port = local.port();
        String host = "127.0.0.1:" + port;
        Map<String, String> beta = Map.of("Authorization", "Bearer beta", "Content-Type", "application/json");
        Answer created = postJson(
                port,
                "/v1/responses",
                host,
                "{\"input\":\"my secret plans\",\"max_output_tokens\":3,\"temperature\":0}");
        assertEquals(200, created.status(), created.body());
        String id = created.json().path("id").asText();
        assertEquals(200, get(port, "/v1/responses/" + id, host).status());
        Answer other = send(port, "GET", "/v1/responses/" + id, host, beta, null);
        assertEquals(404, other.status(), "the same answer as for an id that was never stored");
        assertFalse(other.body().contains("secret"));
        Answer followUp = send(
                port,
                "POST",
                "/v1/responses",
                host,
                beta,
                "{\"previous_response_id\":\"" + id + "\",\"input\":\"and then?\",\"max_output_tokens\":3}");
        assertEquals(400, followUp.status());
        assertTrue(followUp.json().path("error").path("message").asText().contains(id), followUp.body());
        assertEquals(
                404,
                send(port, "DELETE", "/v1/responses/" + id, host, beta, null).status());
        // Its own key still sees it, continues it and deletes it.
        assertEquals(
                200,
                postJson(
                                port,
                                "/v1/responses",
                                host,
                                "{\"previous_response_id\":\"" + id
                                        + "\",\"input\":\"and then?\",\"max_output_tokens\":3}")
                        .status());
        assertEquals(
                200,
                send(port, "DELETE", "/v1/responses/" + id, host, Map.of(), null)
                        .status());
        assertEquals(404, get(port, "/v1/responses/" + id, host).status());
    }
}
