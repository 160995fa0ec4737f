package dev.glimmer.server.webchat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.GlimmerApp;
import dev.glimmer.server.TestServer;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.chrome.ChromeDriver;

/**
 * The web chat in headless Chromium against a real server serving the tiny oracle model: what a
 * user sees and does, checked in the page, with a screenshot of each test under target/web-chat/.
 */
class WebChatBrowserTest {
    /** The page's settings: greedy sampling, so that every run sees the same text; max tokens and thinking per test. */
    private static final String SETTINGS = """
            {"temperature": 0, "topP": 1, "maxTokens": %s, "thinking": %s}""";

    private static final ObjectMapper JSON = new ObjectMapper();

    /** A fresh browser profile per run, removed afterwards. */
    @TempDir
    static Path profile;

    private static GlimmerApp app;
    private static ChromeDriver driver;
    private static ChatPage page;

    @BeforeAll
    static void start() {
        // The tiny model's whole context, so that an answer runs long enough to watch it grow and stop it.
        app = TestServer.start(Map.of("model.ctx", "4096"));
        driver = HeadlessChromium.start(profile);
        String model = TestServer.tinyModel().getFileName().toString().replace(".gguf", "");
        page = new ChatPage(driver, base(), model);
    }

    @AfterAll
    static void stop() {
        if (driver != null) {
            driver.quit();
        }
        if (app != null) {
            app.close();
        }
    }

    @BeforeEach
    void freshPage() {
        page.openFresh(SETTINGS.formatted(200, false));
        page.consoleErrors(); // start each test with an empty console log
    }

    @Test
    void loadsWithoutConsoleErrorsAndShowsTheModel() throws IOException {
        page.reload();
        assertEquals(List.of(), page.consoleErrors());
        // The oracle model is a real file, not the demo model: no demo banner, and its facts are shown.
        assertFalse(page.visible(By.id("demo-banner")));
        assertTrue(page.text(By.id("model-facts")).contains("F32"), page.text(By.id("model-facts")));
        assertTrue(page.visible(By.cssSelector(".empty")));
        page.screenshot("empty-desktop");
        page.phoneWidth();
        page.screenshot("empty-phone");
    }

    @Test
    void streamsTheAnswerAsItArrives() throws IOException {
        page.openFresh(SETTINGS.formatted(600, false));
        page.recordAnswerGrowth();
        page.send("Tell me a story about a fox.");
        page.awaitIdle(Duration.ofSeconds(60));

        List<List<Number>> growth = page.answerGrowth();
        List<Integer> lengths =
                growth.stream().map(g -> g.get(1).intValue()).distinct().toList();
        // Shown piece by piece: several different lengths, never shrinking, the last one the whole answer.
        assertTrue(lengths.size() >= 5, "the answer appeared in too few steps: " + lengths);
        for (int i = 1; i < lengths.size(); i++) {
            assertTrue(lengths.get(i) > lengths.get(i - 1), "the answer shrank while streaming: " + lengths);
        }
        String answer = page.lastAnswerText();
        assertEquals(answer.length(), lengths.getLast());
        double firstMs = growth.getFirst().get(0).doubleValue();
        double lastMs = growth.getLast().get(0).doubleValue();
        assertTrue(lastMs > firstMs, "all of the answer appeared at once");
        // Under the answer: its statistics, from the server's usage and timings.
        String stats =
                page.lastAssistant().findElement(By.cssSelector(".stats")).getText();
        assertTrue(stats.matches("(?s)600 tokens.*tok/s.*to first token.*prompt tokens cached.*"), stats);
        assertFalse(page.visible(By.cssSelector(".message.assistant .thinking")));
        page.screenshot("answer-desktop");
        page.colorScheme("dark");
        page.screenshot("answer-desktop-dark");
        page.phoneWidth();
        page.screenshot("answer-phone-dark");
        page.colorScheme("light");
        page.screenshot("answer-phone");
    }

    @Test
    void stopEndsTheGenerationAndTheServerCancelsIt() throws Exception {
        page.openFresh(SETTINGS.formatted("null", false));
        double cancelledBefore = cancelledOnServer();
        page.send("Write a very long story.");
        page.awaitAnswerLength(20, Duration.ofSeconds(30));
        assertTrue(page.generating(), "the answer ended before Stop could be pressed");
        page.clickStop();
        page.awaitIdle(Duration.ofSeconds(5));

        assertTrue(page.visible(By.cssSelector(".message.assistant .status.stopped")), "no 'Stopped' shown");
        assertFalse(page.lastAnswerText().isEmpty(), "the partial answer was not kept");
        assertTrue(page.visible(By.id("send")));
        // The server noticed the client leaving and stopped generating.
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (cancelledOnServer() <= cancelledBefore && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertEquals(cancelledBefore + 1, cancelledOnServer());
        page.screenshot("stopped-desktop");
    }

    // Each browser test sends, waits and reads the page; the steps repeat in form, the checks differ.
    @Test
    void aConversationSurvivesAReload() throws IOException {
        page.send("Hello there");
        page.awaitIdle(Duration.ofSeconds(60));
        String answer = page.lastAnswerText();
        assertFalse(answer.isEmpty());

        page.reload();
        assertEquals(List.of("Hello there"), page.userMessages());
        assertEquals(answer, page.lastAnswerText());
        assertEquals(List.of("Hello there"), page.conversationTitles());
        page.screenshot("reloaded-desktop");
        page.phoneWidth();
        page.openSidebar();
        page.screenshot("sidebar-phone");
    }

    @Test
    void regenerateAndEditReplaceTheLastAnswer() throws IOException {
        page.send("Hello");
        page.awaitIdle(Duration.ofSeconds(60));
        String first = page.lastAnswerText();

        page.click(By.cssSelector(".message.assistant .action.regenerate"));
        page.awaitIdle(Duration.ofSeconds(60));
        // Greedy sampling: the same prompt gives the same answer, in place of the old one.
        assertEquals(1, page.assistantMessages());
        assertEquals(first, page.lastAnswerText());

        page.editLastUserMessage("Good morning");
        page.awaitIdle(Duration.ofSeconds(60));
        assertEquals(List.of("Good morning"), page.userMessages());
        assertEquals(1, page.assistantMessages());
        assertFalse(page.lastAnswerText().isEmpty());
        assertFalse(page.lastAnswerText().equals(first), "the answer to the edited message is the old answer");
        page.screenshot("edited-desktop");
    }

    @Test
    void theThinkingSectionAppearsOnlyWhenThinkingIsOn() throws IOException {
        page.openFresh(SETTINGS.formatted("null", false));
        page.setThinking(true);
        page.send("Why is the sky blue?");
        // While the model reasons, the section is open, says so, and its text grows.
        By live = By.cssSelector(".message.assistant .thinking.live .thinking-body");
        page.awaitVisible(live, Duration.ofSeconds(30));
        assertEquals("Thinking…", page.text(By.cssSelector(".message.assistant .thinking-label")));
        page.screenshot("thinking-live-desktop");
        // The deterministic answer may end on its own before Stop is pressed; either way the section folds.
        page.stopIfGenerating();
        page.awaitIdle(Duration.ofSeconds(5));
        // Afterwards it is folded, with how long the model thought, and opens on a click.
        String label = page.text(By.cssSelector(".message.assistant .thinking-label"));
        assertTrue(label.matches("Thought for [0-9.]+ s"), label);
        assertFalse(page.visible(By.cssSelector(".message.assistant .thinking-body")));
        page.click(By.cssSelector(".message.assistant .thinking summary"));
        assertFalse(
                page.text(By.cssSelector(".message.assistant .thinking-body")).isBlank(),
                "the thinking section is empty");
        page.screenshot("thinking-desktop");

        page.openFresh(SETTINGS.formatted(200, false));
        page.send("Why is the sky blue?");
        page.awaitIdle(Duration.ofSeconds(60));
        assertFalse(
                page.visible(By.cssSelector(".message.assistant .thinking")), "a thinking section with thinking off");
        assertFalse(page.lastAnswerText().isEmpty());
    }

    @Test
    void settingsAreKeptAndApplied() throws IOException {
        page.openSettings();
        page.screenshot("settings-desktop");
        page.setMaxTokensInSettings(25);
        page.reload();
        page.openSettings();
        assertEquals("25", page.value(By.id("set-max-tokens")), "the setting did not survive a reload");
        page.phoneWidth();
        page.screenshot("settings-phone");
        page.click(By.id("settings-cancel"));

        page.send("Count to ten.");
        page.awaitIdle(Duration.ofSeconds(60));
        String stats =
                page.lastAssistant().findElement(By.cssSelector(".stats")).getText();
        assertTrue(stats.startsWith("25 tokens"), "max tokens was not applied: " + stats);
    }

    @Test
    void aServerErrorIsShownInTheConversation() throws Exception {
        // Far more than the model's 4096 tokens of context: the server refuses it with a 400.
        String message = "fox ".repeat(5000).strip();
        page.sendPasted(message);
        page.awaitIdle(Duration.ofSeconds(30));
        String shown = page.text(By.cssSelector(".message.assistant .status.error .status-text"));
        String said = serverError(message);
        assertEquals(Character.toUpperCase(said.charAt(0)) + said.substring(1), shown);
        assertTrue(page.visible(By.cssSelector(".message.assistant .action.regenerate")), "no way to retry");
        assertTrue(page.visible(By.id("send")));
        page.screenshot("error-desktop");
    }

    @Test
    void theDemoModelIsAnnouncedByABanner(@TempDir Path cache) throws Exception {
        // A server started without a model serves the demo model (random weights), written to this cache.
        ServerConfig config =
                ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.port", "0", "model.ctx", "1024"));
        ChatPage demoPage;
        try (GlimmerApp demo = GlimmerApp.start(config, Map.of("XDG_CACHE_HOME", cache.toString()))) {
            demo.awaitLoaded();
            String base = "http://127.0.0.1:" + demo.port() + "/";
            JsonNode model = JSON.readTree(get(base + "v1/models")).path("data").path(0);
            assertTrue(model.path("meta").path("demo").asBoolean(), "the server does not call its model a demo");
            demoPage = new ChatPage(driver, base, model.path("id").asText());
            // The first look: no token limit and thinking left to the page (greedy, so every run sees the same
            // answer), so the page's defaults (thinking on, no token limit) meet random weights.
            demoPage.openFresh("{\"temperature\": 0}");
            assertTrue(demoPage.visible(By.id("demo-banner")), "no demo banner");
            assertTrue(demoPage.text(By.id("demo-banner")).contains("random weights"));
            assertTrue(demoPage.text(By.id("demo-banner")).contains("thinking starts off"));
            assertFalse(driver.findElement(By.id("thinking-toggle")).isSelected(), "thinking is on for the demo model");
            demoPage.send("Hello!");
            // Answer text (not only a thought) within seconds: short answers, thinking off.
            demoPage.awaitIdle(Duration.ofSeconds(30));
            assertFalse(demoPage.lastAnswerText().isEmpty(), "the demo's first answer shows no text");
            // Random weights do not end an answer: the server's cap did, and the note names it (not Settings).
            assertEquals(
                    "Cut off at the demo server's limit of 128 tokens per answer.",
                    demoPage.text(By.cssSelector(".message.assistant .status.note")));
            demoPage.screenshot("demo-desktop");
            // At phone width the banner is short and above the messages, not over them.
            demoPage.phoneWidth();
            List<Number> banner = demoPage.box(By.id("demo-banner"));
            List<Number> messages = demoPage.box(By.id("messages"));
            assertTrue(
                    banner.get(1).doubleValue() <= messages.get(0).doubleValue(),
                    "the banner " + banner + " overlaps the messages " + messages);
            assertTrue(banner.get(2).doubleValue() <= 60, "the banner takes " + banner.get(2) + " px at phone width");
            demoPage.screenshot("demo-phone");
            // Dismissed, it stays away, after a reload too.
            demoPage.click(By.id("demo-banner-close"));
            assertFalse(demoPage.visible(By.id("demo-banner")));
            demoPage.reload();
            assertFalse(demoPage.visible(By.id("demo-banner")), "the dismissed banner came back");
            demoPage.screenshot("demo-phone-dismissed");
        }
        // The server has gone: the page notices within seconds, without a reload.
        demoPage.awaitPill("offline", Duration.ofSeconds(15));
        assertEquals("model-dot down", driver.findElement(By.id("model-dot")).getAttribute("class"));
    }

    /** A server that wants an API key is up, not offline: the pill says a key is needed, and works once it is set. */
    @Test
    void aServerThatWantsAKeyIsNotOffline() throws Exception {
        try (GlimmerApp locked = TestServer.start(Map.of("server.api-key", "sesame", "model.ctx", "256"))) {
            String base = "http://127.0.0.1:" + locked.port() + "/";
            String id = TestServer.tinyModel().getFileName().toString().replace(".gguf", "");
            ChatPage lockedPage = new ChatPage(driver, base, id);
            lockedPage.openFresh("{}", "API key needed");
            String dot = driver.findElement(By.id("model-dot")).getAttribute("class");
            assertEquals("model-dot locked", dot);
            lockedPage.screenshot("needs-key-desktop");
            // The pill leads to Settings, where the key goes.
            lockedPage.click(By.id("model"));
            assertTrue(lockedPage.visible(By.id("set-api-key")), "the pill did not open Settings");
            lockedPage.openFresh("{\"apiKey\": \"sesame\"}");
            assertEquals("model-dot ok", driver.findElement(By.id("model-dot")).getAttribute("class"));
        }
    }

    private static String get(String url) throws IOException, InterruptedException {
        try (HttpClient http = HttpClient.newHttpClient()) {
            return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString())
                    .body();
        }
    }

    /** The error message the server gives for a chat request with this one user message. */
    private static String serverError(String userMessage) throws IOException, InterruptedException {
        ObjectNode body = JSON.createObjectNode();
        body.putArray("messages").addObject().put("role", "user").put("content", userMessage);
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> response = http.send(
                    HttpRequest.newBuilder(URI.create(base() + "v1/chat/completions"))
                            .header("Content-Type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body)))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(400, response.statusCode(), response.body());
            return JSON.readTree(response.body()).path("error").path("message").asText();
        }
    }

    private static String base() {
        return "http://127.0.0.1:" + app.port() + "/";
    }

    /** The server's count of generations cancelled because the client went away. */
    private static double cancelledOnServer() throws IOException, InterruptedException {
        String metrics = get(base() + "metrics");
        Matcher m = Pattern.compile("(?m)^glimmer_requests_cancelled_total(?:\\{[^}]*})? ([0-9.eE+-]+)$")
                .matcher(metrics);
        if (!m.find()) {
            throw new AssertionError("no glimmer_requests_cancelled_total in /metrics");
        }
        return Double.parseDouble(m.group(1));
    }
}
