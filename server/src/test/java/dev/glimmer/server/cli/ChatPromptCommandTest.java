package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.EngineTestData;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatPromptCommandTest {

    static final Path ENGINE_TEST_RESOURCES = EngineTestData.RESOURCES;
    static final String MODEL =
            ENGINE_TEST_RESOURCES.resolve("oracle/tiny-f32.gguf").toString();

    @TempDir
    Path dir;

    private String requestFile(String body) throws Exception {
        Path file = dir.resolve("request.json");
        Files.writeString(file, body, StandardCharsets.UTF_8);
        return file.toString();
    }

    @Test
    void printsTheOracleChatPromptExactly() throws Exception {
        JsonNode cases = new ObjectMapper()
                .readTree(ENGINE_TEST_RESOURCES
                        .resolve("oracle/refs/tiny-f32.logits.json")
                        .toFile())
                .path("cases");
        String promptText = null;
        for (JsonNode c : cases) {
            if (c.path("name").asText().equals("chat")) {
                promptText = c.path("prompt_text").textValue();
            }
        }
        MainTest.Result r = MainTest.run(
                "chat-prompt",
                "--model",
                MODEL,
                "--request",
                requestFile(
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello, world! Tell me a story about a fox.\"}]}"));
        assertEquals(0, r.code(), r.err());
        assertEquals(promptText, r.out());
        assertEquals("", r.err(), "the oracle model carries the GLM-4.7-Flash template: no warning");
    }

    @Test
    void printsAGoldenToolConversation() throws Exception {
        Path golden = ENGINE_TEST_RESOURCES.resolve("chat/golden");
        MainTest.Result r = MainTest.run(
                "chat-prompt",
                "--model",
                MODEL,
                "--request",
                golden.resolve("parallel_tool_calls.request.json").toString());
        assertEquals(0, r.code(), r.err());
        assertEquals(
                Files.readString(golden.resolve("parallel_tool_calls.prompt.txt"), StandardCharsets.UTF_8), r.out());
    }

    @Test
    void malformedRequestsAreOneLineInputErrors() throws Exception {
        MainTest.Result bot = MainTest.run(
                "chat-prompt",
                "--model",
                MODEL,
                "--request",
                requestFile("{\"messages\":[{\"role\":\"bot\",\"content\":\"hi\"}]}"));
        assertEquals(2, bot.code());
        assertEquals(
                "glimmer chat-prompt: messages[0].role: unknown role 'bot' (system, user, assistant, tool)\n",
                bot.err());
        assertEquals("", bot.out());

        MainTest.Result notJson =
                MainTest.run("chat-prompt", "--model", MODEL, "--request", requestFile("{\"messages\": [1,"));
        assertEquals(2, notJson.code());
        assertEquals(1, notJson.err().strip().lines().count(), notJson.err());
        assertTrue(notJson.err().startsWith("glimmer chat-prompt: the request is not valid JSON: "), notJson.err());

        MainTest.Result noFile = MainTest.run(
                "chat-prompt",
                "--model",
                MODEL,
                "--request",
                dir.resolve("absent.json").toString());
        assertEquals(2, noFile.code());
        assertTrue(noFile.err().contains("no such file"), noFile.err());
    }

    /** A GGUF file with no tensors whose only metadata is {@code tokenizer.chat_template} (when not null). */
    private Path modelWithTemplate(String template) throws Exception {
        ByteBuffer header = ByteBuffer.allocate(64 + (template == null ? 0 : template.length() * 4))
                .order(ByteOrder.LITTLE_ENDIAN);
        header.putInt(0x46554747).putInt(3).putLong(0).putLong(template == null ? 0 : 1);
        if (template != null) {
            byte[] key = "tokenizer.chat_template".getBytes(StandardCharsets.UTF_8);
            byte[] value = template.getBytes(StandardCharsets.UTF_8);
            header.putLong(key.length)
                    .put(key)
                    .putInt(8 /* string */)
                    .putLong(value.length)
                    .put(value);
        }
        Path file = dir.resolve("model.gguf");
        Files.write(file, Arrays.copyOf(header.array(), header.position()));
        return file;
    }

    @Test
    void anotherTemplateIsNamedOnStderrOnceAndTheGlmFormatIsUsed() throws Exception {
        String request = requestFile("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        String chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
        MainTest.Result r =
                MainTest.run("chat-prompt", "--model", modelWithTemplate(chatml).toString(), "--request", request);
        assertEquals(0, r.code(), r.err());
        assertEquals("[gMASK]<sop><|user|>hi<|assistant|><think>", r.out());
        assertEquals(1, r.err().lines().count(), r.err());
        assertTrue(
                r.err()
                        .contains("not the GLM-4.7-Flash one (found " + chatml.length()
                                + " characters starting '{% for m in messages %}<|im_start|>"),
                r.err());

        MainTest.Result none =
                MainTest.run("chat-prompt", "--model", modelWithTemplate(null).toString(), "--request", request);
        assertEquals(0, none.code(), none.err());
        assertEquals("[gMASK]<sop><|user|>hi<|assistant|><think>", none.out());
        assertTrue(none.err().contains("has no chat template"), none.err());
    }

    @Test
    void aFileThatIsNotAModelIsAnInputError() throws Exception {
        String request = requestFile("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        MainTest.Result r = MainTest.run("chat-prompt", "--model", request, "--request", request);
        assertEquals(2, r.code(), r.err());
        assertEquals(1, r.err().strip().lines().count(), r.err());
    }
}
