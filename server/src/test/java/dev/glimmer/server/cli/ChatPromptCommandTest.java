package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ChatPromptCommandTest {

    static final Path ENGINE_TEST_RESOURCES = Path.of("../engine/src/test/resources");
    static final String MODEL = ENGINE_TEST_RESOURCES.resolve("oracle/tiny-f32.gguf").toString();

    @TempDir
    Path dir;

    private String requestFile(String body) throws Exception {
        Path file = dir.resolve("request.json");
        Files.writeString(file, body, StandardCharsets.UTF_8);
        return file.toString();
    }

    @Test
    void printsTheOracleChatPromptExactly() throws Exception {
        JsonNode cases = new ObjectMapper().readTree(ENGINE_TEST_RESOURCES.resolve("oracle/refs/tiny-f32.logits.json").toFile())
                .path("cases");
        String promptText = null;
        for (JsonNode c : cases) {
            if (c.path("name").asText().equals("chat")) {
                promptText = c.path("prompt_text").textValue();
            }
        }
        MainTest.Result r = MainTest.run("chat-prompt", "--model", MODEL, "--request",
                requestFile("{\"messages\":[{\"role\":\"user\",\"content\":\"Hello, world! Tell me a story about a fox.\"}]}"));
        assertEquals(0, r.code(), r.err());
        assertEquals(promptText, r.out());
        assertEquals("", r.err(), "the oracle model carries the GLM-4.7-Flash template: no warning");
    }

    @Test
    void printsAGoldenToolConversation() throws Exception {
        Path golden = ENGINE_TEST_RESOURCES.resolve("chat/golden");
        MainTest.Result r = MainTest.run("chat-prompt", "--model", MODEL, "--request",
                golden.resolve("parallel_tool_calls.request.json").toString());
        assertEquals(0, r.code(), r.err());
        assertEquals(Files.readString(golden.resolve("parallel_tool_calls.prompt.txt"), StandardCharsets.UTF_8), r.out());
    }

    @Test
    void malformedRequestsAreOneLineInputErrors() throws Exception {
        MainTest.Result bot = MainTest.run("chat-prompt", "--model", MODEL, "--request",
                requestFile("{\"messages\":[{\"role\":\"bot\",\"content\":\"hi\"}]}"));
        assertEquals(2, bot.code());
        assertEquals("glimmer chat-prompt: messages[0].role: unknown role 'bot' (system, user, assistant, tool)\n", bot.err());
        assertEquals("", bot.out());

        MainTest.Result notJson = MainTest.run("chat-prompt", "--model", MODEL, "--request", requestFile("{\"messages\": [1,"));
        assertEquals(2, notJson.code());
        assertEquals(1, notJson.err().strip().lines().count(), notJson.err());
        assertTrue(notJson.err().startsWith("glimmer chat-prompt: the request is not valid JSON: "), notJson.err());

        MainTest.Result noFile = MainTest.run("chat-prompt", "--model", MODEL, "--request", dir.resolve("absent.json").toString());
        assertEquals(2, noFile.code());
        assertTrue(noFile.err().contains("no such file"), noFile.err());
    }

    @Test
    void aFileThatIsNotAModelIsAnInputError() throws Exception {
        String request = requestFile("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        MainTest.Result r = MainTest.run("chat-prompt", "--model", request, "--request", request);
        assertEquals(2, r.code(), r.err());
        assertEquals(1, r.err().strip().lines().count(), r.err());
    }
}
