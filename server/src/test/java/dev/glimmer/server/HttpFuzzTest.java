package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A few thousand mutated requests against a running server on loopback, from a fixed seed: truncated
 * JSON, a wrong type at every path of realistic bodies, huge and odd numbers, invalid UTF-8, deep
 * nesting, random bytes, odd headers and HTTP framing, and slow or stalled bodies. None may get a 5xx
 * or go unanswered past a deadline; afterwards no handler, request or platform thread is left over,
 * the heap has not grown, and a normal request gets the same answer as before. The tally of what each
 * class of input got is printed (in the test's output file).
 *
 * <p>Raw sockets, so that anything can be sent: each request on its own connection; a 200 is taken as
 * soon as its status line arrives (the connection is then closed, which cancels the generation).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class HttpFuzzTest {
    private static final long SEED = 0x6c696d6d6572L;
    /** No answer within this is a hang. */
    private static final int DEADLINE_MS = 10_000;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private final Random random = new Random(SEED);
    /** Per class of input: what it got ("400 error object", "200", "closed", "hang", ...) and how often. */
    private final Map<String, Map<String, Integer>> tally = new TreeMap<>();

    private final List<String> failures = new ArrayList<>();
    private int port;

    /** A request body and where it goes. */
    record Body(String path, ObjectNode json) {}

    /**
     * Realistic bodies of every JSON route: the mutations start from these. The first one's prompt (329
     * tokens with its tools) is over the served 256-token context on purpose: its mutations go through
     * every check of a chat request without paying for a long prompt each; the others generate.
     */
    static List<Body> bodies() throws IOException {
        return List.of(
                new Body("/v1/chat/completions", (ObjectNode) JSON.readTree("""
                        {"model": "gpt-4o", "messages": [
                           {"role": "system", "content": "Be brief."},
                           {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
                           {"role": "user", "content": "What is the weather in Paris?", "name": "ann"},
                           {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
                            "tool_calls": [{"id": "c1", "type": "function",
                                            "function": {"name": "weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]},
                           {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
                         "tools": [{"type": "function", "function": {"name": "weather", "description": "the weather",
                                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                   "required": ["city"]}}}],
                         "tool_choice": "auto", "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
                         "seed": 7, "max_tokens": 3, "stop": ["\\n\\n", "END"], "presence_penalty": 0.1,
                         "frequency_penalty": 0.1, "repeat_penalty": 1.1, "logit_bias": {"11": 2.5},
                         "logprobs": true, "top_logprobs": 2, "stream": false,
                         "stream_options": {"include_usage": true}, "user": "u1",
                         "chat_template_kwargs": {"enable_thinking": true, "clear_thinking": false},
                         "reasoning_effort": "low", "n": 1}""")),
                new Body("/v1/chat/completions", (ObjectNode) JSON.readTree("""
                        {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 2,
                         "stream": true, "stream_options": {"include_usage": true}}""")),
                new Body("/v1/completions", (ObjectNode) JSON.readTree("""
                        {"model": "x", "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0,
                         "logprobs": 2, "stop": "\\n", "seed": 1, "stream": false}""")),
                new Body("/v1/completions", (ObjectNode) JSON.readTree("""
                        {"prompt": [[11, 12, 13], [14, 15]], "max_tokens": 2, "stream": true}""")),
                new Body("/tokenize", (ObjectNode) JSON.readTree("""
                        {"content": "Hello <|user|> world", "parse_special": true, "with_pieces": true}""")),
                new Body("/detokenize", (ObjectNode) JSON.readTree("{\"tokens\": [11, 12, 13]}")),
                new Body("/apply-template", (ObjectNode) JSON.readTree("""
                        {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false,
                         "chat_template_kwargs": {"enable_thinking": false}}""")));
    }

    @Test
    void mutatedRequestsGetNo5xxAndLeaveNothingBehind() throws Exception {
        GlimmerApp app =
                TestServer.start(Map.of("model.ctx", "256", "server.max-body", "64K", "inference.queue", "64"));
        try {
            port = app.port();
            String reference = normalAnswer();
            List<Body> bodies = bodies();
            // Warm up what the first requests load once (classes, the session cache), then take the baseline.
            for (Body b : bodies) {
                record("warm-up", send(post(b.path(), Map.of(), bytes(b.json()))));
            }
            long threadsBefore = ManagementFactory.getThreadMXBean().getThreadCount();
            long heapBefore = heapAfterGc();

            long start = System.nanoTime();
            truncatedJson(bodies);
            wrongTypes(bodies);
            oddNumbers(bodies);
            invalidUtf8(bodies);
            deepNesting(bodies);
            randomBytes();
            headersAndFraming(bodies.get(1));
            slowBodies(bodies.get(1));
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);

            awaitIdle();
            long threadsAfter = ManagementFactory.getThreadMXBean().getThreadCount();
            long heapAfter = heapAfterGc();
            StringBuilder report = new StringBuilder("HttpFuzzTest, seed " + SEED + ", " + seconds + " s:\n");
            tally.forEach((kind, got) -> report.append(String.format(
                    "  %-24s %6d  %s%n",
                    kind, got.values().stream().mapToInt(Integer::intValue).sum(), got)));
            report.append("  platform threads ")
                    .append(threadsBefore)
                    .append(" -> ")
                    .append(threadsAfter)
                    .append(", heap after GC ")
                    .append(heapBefore >> 20)
                    .append(" -> ")
                    .append(heapAfter >> 20)
                    .append(" MB\n");
            System.out.print(report);

            assertEquals(List.of(), failures, report.toString());
            assertTrue(threadsAfter <= threadsBefore + 2, report.toString());
            assertTrue(heapAfter <= heapBefore + (48L << 20), report.toString());
            assertEquals(reference, normalAnswer(), "a normal request afterwards");
        } finally {
            app.close();
        }
    }

    // ---- the classes of input ----

    private void truncatedJson(List<Body> bodies) throws IOException {
        for (Body b : bodies) {
            byte[] whole = bytes(b.json());
            for (int i = 0; i < 25; i++) {
                int cut = random.nextInt(whole.length);
                expectAnswer("truncated JSON", post(b.path(), Map.of(), java.util.Arrays.copyOf(whole, cut)));
            }
        }
    }

    /** Every path of every body (objects' fields and arrays' elements) set to each value of another type, or removed. */
    private void wrongTypes(List<Body> bodies) throws IOException {
        List<JsonNode> values = List.of(
                NODES.nullNode(),
                NODES.booleanNode(true),
                NODES.numberNode(-1),
                NODES.numberNode(0.5),
                NODES.textNode("x"),
                NODES.arrayNode(),
                NODES.objectNode(),
                NODES.arrayNode().add(NODES.objectNode()),
                NODES.textNode(""));
        for (Body b : bodies) {
            for (String path : paths(b.json(), "")) {
                for (JsonNode value : values) {
                    expectAnswer(
                            "wrong type at a path", post(b.path(), Map.of(), bytes(replaced(b.json(), path, value))));
                }
                expectAnswer("field removed", post(b.path(), Map.of(), bytes(replaced(b.json(), path, null))));
            }
        }
    }

    /** Numbers JSON allows but nothing can hold, at every path that holds a number or a string. */
    private void oddNumbers(List<Body> bodies) throws IOException {
        List<String> numbers = List.of(
                "1e309",
                "-1e309",
                "1e-400",
                "123456789012345678901234567890",
                "-9223372036854775809",
                "2147483648",
                "4294967296",
                "-2147483649",
                "1" + "0".repeat(999),
                "1" + "0".repeat(1200),
                "0." + "0".repeat(500) + "1",
                "-0",
                "-0.0",
                "1E2",
                "5.0",
                "1e3");
        for (Body b : bodies) {
            for (String path : paths(b.json(), "")) {
                JsonNode at = b.json().at(path);
                if (!at.isNumber() && !at.isTextual()) {
                    continue;
                }
                // A few of them at each path (all of them at every path is a thousand requests more).
                for (int i = 0; i < 5; i++) {
                    String number = numbers.get(random.nextInt(numbers.size()));
                    String text = new String(
                                    bytes(replaced(b.json(), path, NODES.textNode("\u0000NUMBER\u0000"))),
                                    StandardCharsets.UTF_8)
                            .replace("\"\\u0000NUMBER\\u0000\"", number);
                    expectAnswer("huge or odd number", post(b.path(), Map.of(), text.getBytes(StandardCharsets.UTF_8)));
                }
            }
        }
    }

    private void invalidUtf8(List<Body> bodies) throws IOException {
        byte[][] bad = {
            {(byte) 0xff},
            {(byte) 0xc3, 0x28},
            {(byte) 0xc0, (byte) 0xaf},
            {(byte) 0xed, (byte) 0xa0, (byte) 0x80},
            {(byte) 0xe2, (byte) 0x82},
            {(byte) 0xf4, (byte) 0x90, (byte) 0x80, (byte) 0x80},
            {(byte) 0x80},
            {(byte) 0xf0, (byte) 0x9f, (byte) 0x98}
        };
        for (Body b : bodies) {
            byte[] whole = bytes(b.json());
            for (int i = 0; i < 20; i++) {
                // Inside a string (after an opening quote) or anywhere.
                int at = random.nextBoolean() ? indexAfterQuote(whole) : random.nextInt(whole.length + 1);
                byte[] seq = bad[random.nextInt(bad.length)];
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                out.write(whole, 0, at);
                out.write(seq);
                out.write(whole, at, whole.length - at);
                expectAnswer("invalid UTF-8", post(b.path(), Map.of(), out.toByteArray()));
            }
        }
    }

    private void deepNesting(List<Body> bodies) throws IOException {
        int[] depths = {999, 1001, 5000, 20000};
        for (Body b : bodies) {
            for (String path : paths(b.json(), "")) {
                if (path.chars().filter(c -> c == '/').count() > 1) {
                    continue;
                }
                for (int depth : depths) {
                    String nested = random.nextBoolean()
                            ? "[".repeat(depth) + "]".repeat(depth)
                            : "{\"a\":".repeat(depth) + "1" + "}".repeat(depth);
                    String text = new String(
                                    bytes(replaced(b.json(), path, NODES.textNode("\u0000NEST\u0000"))),
                                    StandardCharsets.UTF_8)
                            .replace("\"\\u0000NEST\\u0000\"", nested);
                    expectAnswer("deep nesting", post(b.path(), Map.of(), text.getBytes(StandardCharsets.UTF_8)));
                }
            }
            expectAnswer("deep nesting", post(b.path(), Map.of(), ("[".repeat(3000) + "]".repeat(3000)).getBytes()));
        }
    }

    private void randomBytes() throws IOException {
        String[] tokens = {
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            "\"messages\"",
            "\"role\"",
            "\"user\"",
            "\"content\"",
            "1",
            "-",
            "null",
            "true",
            "\"",
            "\\",
            "\"prompt\"",
            "e",
            ".",
            " "
        };
        String[] paths = {
            "/v1/chat/completions",
            "/v1/completions",
            "/tokenize",
            "/detokenize",
            "/apply-template",
            "/chat/completions"
        };
        for (int i = 0; i < 100; i++) {
            byte[] body = new byte[random.nextInt(400)];
            random.nextBytes(body);
            expectAnswer("random bytes", post(paths[random.nextInt(paths.length)], Map.of(), body));
            StringBuilder soup = new StringBuilder();
            for (int t = random.nextInt(60); t > 0; t--) {
                soup.append(tokens[random.nextInt(tokens.length)]);
            }
            expectAnswer(
                    "JSON token soup",
                    post(
                            paths[random.nextInt(paths.length)],
                            Map.of(),
                            soup.toString().getBytes(StandardCharsets.UTF_8)));
        }
    }

    /** Odd headers, methods, paths and HTTP framing around a valid chat body. */
    private void headersAndFraming(Body chat) throws IOException {
        byte[] body = bytes(chat.json());
        String json = new String(body, StandardCharsets.UTF_8);
        String p = chat.path();
        List<byte[]> requests = new ArrayList<>();
        for (String type : List.of(
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin1",
                "application/json; charset=utf-16",
                "",
                ";;;",
                "\u00ff/\u00fe")) {
            requests.add(post(p, Map.of("Content-Type", type), body));
        }
        for (String length : List.of("-1", "abc", "99999999999999999999", "1e3", " 10", "0", "1")) {
            requests.add(raw(
                    "POST " + p + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                            + length + "\r\nConnection: close\r\n\r\n" + json));
        }
        requests.add(raw("POST " + p + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + body.length
                + "\r\nContent-Length: 3\r\n" + "Connection: close\r\n\r\n" + json));
        requests.add(raw(
                "POST " + p + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        + Integer.toHexString(body.length) + "\r\n" + json + "\r\n0\r\n\r\n"));
        requests.add(raw(
                "POST " + p + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        + "zz\r\n" + json + "\r\n0\r\n\r\n"));
        requests.add(raw(
                "POST " + p + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        + "fffffffffffffff\r\n" + json + "\r\n0\r\n\r\n"));
        requests.add(
                raw("POST " + p + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n"
                        + "Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
        requests.add(raw("POST " + p
                + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n" + json));
        requests.add(post(p, Map.of("Content-Encoding", "gzip"), body));
        requests.add(post(p, Map.of("X-Long", "a".repeat(20_000)), body));
        requests.add(post(p, Map.of("X-Long", "a".repeat(200_000)), body));
        Map<String, String> many = new TreeMap<>();
        for (int i = 0; i < 2000; i++) {
            many.put("X-H" + i, "v");
        }
        requests.add(post(p, many, body));
        requests.add(post(p, Map.of("Authorization", "Bearer \u00ff\u0000"), body));
        requests.add(post(p, Map.of("Accept", "text/event-stream"), body));
        requests.add(post(p, Map.of("Expect", "100-continue"), body));
        requests.add(post(p, Map.of("Origin", "http://evil.example"), body));
        requests.add(post(p, Map.of("X-Bad\u00ffName", "v"), body));
        requests.add(raw("POST " + p + " HTTP/1.1\r\nHost: localhost\r\nX-Folded: a\r\n b\r\nContent-Length: "
                + body.length + "\r\nConnection: close\r\n\r\n" + json));
        requests.add(raw(
                "POST " + p + " HTTP/1.1\r\nContent-Length: " + body.length + "\r\nConnection: close\r\n\r\n" + json));
        requests.add(raw("POST " + p + " HTTP/1.0\r\nContent-Length: " + body.length + "\r\n\r\n" + json));
        requests.add(raw(
                "POST " + p + " HTTP/2.0\r\nHost: localhost\r\nContent-Length: " + body.length + "\r\n\r\n" + json));
        requests.add(raw("POST " + p + " HTTP/1.1\nHost: localhost\nContent-Length: " + body.length
                + "\nConnection: close\n\n" + json));
        requests.add(raw("POST " + p + "\r\n\r\n"));
        requests.add(raw("\r\n\r\n"));
        requests.add(raw("GARBAGE\r\n\r\n"));
        requests.add(raw("POST /" + "a".repeat(100_000) + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
        for (String path : List.of(
                "/v1/chat/completions?x=%zz",
                "/v1/chat/completions/..",
                "/v1/../v1/chat/completions",
                "/%00",
                "/v1/%ff%fe",
                "//v1//chat//completions",
                "/v1/models/%2e%2e%2f",
                "/v1/models/" + "x".repeat(5000),
                "*",
                "http://evil.example/v1/models",
                "/v1/chat/completions#frag")) {
            requests.add(raw("POST " + path
                    + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " + body.length
                    + "\r\nConnection: close\r\n\r\n" + json));
        }
        for (String method : List.of("GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "BREW", "CONNECT")) {
            requests.add(raw(method + " " + p + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + body.length
                    + "\r\nConnection: close\r\n\r\n" + json));
        }
        for (byte[] request : requests) {
            Exchange e = send(request);
            // HTTP that is broken before any route runs may be answered by a closed connection; a version
            // other than HTTP/1.1 by 505 (HTTP Version Not Supported), which is no fault of the server.
            record("headers and framing", e);
            boolean otherVersion =
                    !preview(request).lines().findFirst().orElse("").endsWith("HTTP/1.1");
            if (e.status() == HANG || e.status() >= 500 && !(e.status() == 505 && otherVersion)) {
                failures.add("headers and framing: " + e + " for " + preview(request));
            }
        }
    }

    /**
     * Bodies that arrive slowly but completely get their answer; bodies that stall do not hold up
     * anyone else, and their handlers end when their connections close.
     */
    private void slowBodies(Body chat) throws IOException, InterruptedException {
        byte[] request = post(chat.path(), Map.of(), bytes(chat.json()));
        for (int i = 0; i < 3; i++) {
            try (Socket s = socket()) {
                OutputStream out = s.getOutputStream();
                for (int at = 0; at < request.length; at += 64) {
                    out.write(request, at, Math.min(64, request.length - at));
                    out.flush();
                    Thread.sleep(5);
                }
                expect("slow complete body", readAnswer(s), 200);
            }
        }
        List<Socket> stalled = new ArrayList<>();
        try {
            for (int i = 0; i < 20; i++) {
                Socket s = socket();
                stalled.add(s);
                // Headers and half the body, or half the headers.
                int cut = i % 2 == 0 ? request.length - bytes(chat.json()).length / 2 : 30;
                s.getOutputStream().write(request, 0, cut);
                s.getOutputStream().flush();
            }
            Thread.sleep(200);
            // The others are served meanwhile.
            for (int i = 0; i < 5; i++) {
                expect("while bodies stall", send(request), 200);
            }
            // A body cut short by the client's half-close is answered, not waited for.
            for (int i = 0; i < 4; i++) {
                try (Socket s = socket()) {
                    s.getOutputStream().write(request, 0, request.length - 10);
                    s.shutdownOutput();
                    Exchange e = readAnswer(s);
                    record("body cut short", e);
                    if (e.status() >= 500 || e.status() == HANG) {
                        failures.add("body cut short: " + e);
                    }
                }
            }
        } finally {
            for (Socket s : stalled) {
                s.close();
                record("stalled body", new Exchange(CLOSED_BY_CLIENT, ""));
            }
        }
    }

    // ---- checks ----

    /** Anything a well-formed HTTP request may get: no 5xx, no hang, and a 4xx is an OpenAI error object. */
    private void expectAnswer(String kind, byte[] request) throws IOException {
        Exchange e = send(request);
        record(kind, e);
        boolean errorObject = e.status() >= 400 && e.status() < 500 && isErrorObject(e.body());
        if (e.status() >= 500 || e.status() < 200 || (e.status() >= 400 && !errorObject)) {
            failures.add(kind + ": " + e + " for " + preview(request));
        }
    }

    private void expect(String kind, Exchange e, int status) {
        record(kind, e);
        if (e.status() != status) {
            failures.add(kind + ": " + e + ", expected " + status);
        }
    }

    private void record(String kind, Exchange e) {
        String outcome = switch (e.status()) {
            case HANG -> "hang";
            case CLOSED -> "closed";
            case CLOSED_BY_CLIENT -> "held, then closed by the client";
            default ->
                e.status() >= 400 && isErrorObject(e.body())
                        ? e.status() + " error object"
                        : Integer.toString(e.status());
        };
        tally.computeIfAbsent(kind, k -> new TreeMap<>()).merge(outcome, 1, Integer::sum);
    }

    private static boolean isErrorObject(String body) {
        try {
            JsonNode error = JSON.readTree(body.strip()).get("error");
            return error != null
                    && error.get("message").isTextual()
                    && error.get("type").isTextual();
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Waits until no handler, request or queued job is left (a cancelled generation ends within a token). */
    private void awaitIdle() throws InterruptedException, IOException {
        String metrics = "";
        for (int i = 0; i < 100; i++) {
            metrics = new String(send(raw("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
                    .body());
            // This scrape's own handler is the one left.
            if (gauge(metrics, "glimmer_http_handlers_active") <= 1
                    && gauge(metrics, "glimmer_requests_processing") == 0
                    && gauge(metrics, "glimmer_requests_deferred") == 0) {
                return;
            }
            Thread.sleep(100);
        }
        failures.add("not idle after the fuzzing:\n"
                + metrics.lines().filter(l -> l.startsWith("glimmer_")).reduce("", (a, b) -> a + b + "\n"));
    }

    private static double gauge(String metrics, String name) {
        return metrics.lines()
                .filter(l -> l.startsWith(name + " ") || l.startsWith(name + "{"))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
                .sum();
    }

    private static long heapAfterGc() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /** The greedy answer to a plain chat request, whole. */
    private String normalAnswer() throws IOException, InterruptedException {
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> response = http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/chat/completions"))
                            .header("Content-Type", "application/json")
                            .timeout(Duration.ofMillis(DEADLINE_MS))
                            .POST(
                                    HttpRequest.BodyPublishers.ofString(
                                            "{\"messages\": [{\"role\": \"user\", \"content\": "
                                                    + "\"Tell me a story about a fox.\"}], \"max_tokens\": 12, \"temperature\": 0}"))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode(), response.body());
            return JSON.readTree(response.body().strip())
                    .at("/choices/0/message")
                    .toString();
        }
    }

    // ---- raw HTTP ----

    private static final int HANG = -2;
    private static final int CLOSED = -1;
    private static final int CLOSED_BY_CLIENT = -3;

    /** The status (or HANG, CLOSED) and, for non-200 answers, the body. */
    record Exchange(int status, String body) {
        @Override
        public String toString() {
            return switch (status) {
                case HANG -> "no answer within " + DEADLINE_MS + " ms";
                case CLOSED -> "connection closed without an answer";
                default -> status + " " + (body.length() > 300 ? body.substring(0, 300) + "..." : body);
            };
        }
    }

    private Socket socket() throws IOException {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
        s.setSoTimeout(DEADLINE_MS);
        s.setTcpNoDelay(true);
        return s;
    }

    private Exchange send(byte[] request) throws IOException {
        try (Socket s = socket()) {
            try {
                s.getOutputStream().write(request);
                s.getOutputStream().flush();
            } catch (IOException e) {
                // The server answered and closed before taking the whole request (a 413, a bad header): read what it
                // said.
            }
            return readAnswer(s);
        }
    }

    /** Reads the status line and headers; the body too unless the status is 200 (then the connection is dropped). */
    private static Exchange readAnswer(Socket s) throws IOException {
        InputStream in = s.getInputStream();
        try {
            String head = readHead(in);
            // An interim answer (100 Continue to "Expect: 100-continue") comes before the real one.
            while (head != null && head.startsWith("HTTP/1.1 1")) {
                head = readHead(in);
            }
            if (head == null) {
                return new Exchange(CLOSED, "");
            }
            int status = Integer.parseInt(head.substring(9, 12));
            if (status == 200) {
                return new Exchange(200, "");
            }
            long length = -1;
            for (String line : head.split("\r\n")) {
                if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
                    length = Long.parseLong(line.substring(15).strip());
                }
            }
            byte[] body = length >= 0 ? in.readNBytes((int) Math.min(length, 1 << 20)) : readSome(in);
            return new Exchange(status, new String(body, StandardCharsets.UTF_8));
        } catch (SocketTimeoutException e) {
            return new Exchange(HANG, "");
        } catch (IOException e) {
            return new Exchange(CLOSED, "");
        }
    }

    /** The status line and headers, or null when the connection ends first. */
    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int b;
        while ((b = in.read()) >= 0) {
            head.write(b);
            int n = head.size();
            byte[] h = head.toByteArray();
            if (n >= 4 && h[n - 4] == '\r' && h[n - 3] == '\n' && h[n - 2] == '\r' && h[n - 1] == '\n') {
                return head.toString(StandardCharsets.ISO_8859_1);
            }
        }
        return head.size() >= 12 ? head.toString(StandardCharsets.ISO_8859_1) : null;
    }

    private static byte[] readSome(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[8192];
        int n;
        while (out.size() < (1 << 20) && (n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
        return out.toByteArray();
    }

    private static byte[] post(String path, Map<String, String> headers, byte[] body) {
        StringBuilder head = new StringBuilder("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        if (!headers.containsKey("Content-Type")) {
            head.append("Content-Type: application/json\r\n");
        }
        headers.forEach((k, v) -> head.append(k).append(": ").append(v).append("\r\n"));
        head.append("Content-Length: ").append(body.length).append("\r\nConnection: close\r\n\r\n");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(head.toString().getBytes(StandardCharsets.ISO_8859_1));
        out.writeBytes(body);
        return out.toByteArray();
    }

    private static byte[] raw(String request) {
        return request.getBytes(StandardCharsets.ISO_8859_1);
    }

    private static byte[] bytes(JsonNode json) {
        return json.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static String preview(byte[] request) {
        String s = new String(request, StandardCharsets.ISO_8859_1);
        return s.length() > 400 ? s.substring(0, 400) + "..." : s;
    }

    private int indexAfterQuote(byte[] body) {
        int from = random.nextInt(body.length);
        for (int i = from; i < body.length; i++) {
            if (body[i] == '"') {
                return i + 1;
            }
        }
        return from;
    }

    // ---- JSON paths ----

    /** JSON Pointers of every node under {@code node} (not the root). */
    static List<String> paths(JsonNode node, String at) {
        List<String> paths = new ArrayList<>();
        if (node.isObject()) {
            for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
                String name = names.next();
                String path = at + "/" + name.replace("~", "~0").replace("/", "~1");
                paths.add(path);
                paths.addAll(paths(node.get(name), path));
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                String path = at + "/" + i;
                paths.add(path);
                paths.addAll(paths(node.get(i), path));
            }
        }
        return paths;
    }

    /** A copy of {@code root} with the node at {@code path} replaced by {@code value} (removed when null). */
    static JsonNode replaced(ObjectNode root, String path, JsonNode value) {
        ObjectNode copy = root.deepCopy();
        int slash = path.lastIndexOf('/');
        JsonNode parent = copy.at(path.substring(0, slash));
        String last = path.substring(slash + 1).replace("~1", "/").replace("~0", "~");
        if (parent instanceof ObjectNode o) {
            if (value == null) {
                o.remove(last);
            } else {
                o.set(last, value);
            }
        } else if (parent instanceof ArrayNode a) {
            int i = Integer.parseInt(last);
            if (value == null) {
                a.remove(i);
            } else {
                a.set(i, value);
            }
        }
        return copy;
    }
}
