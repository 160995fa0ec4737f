package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.gguf.GgufFile;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ChatTemplatesTest {

    @Test
    void theOracleModelsTemplateIsRecognisedWithoutWarning() throws Exception {
        try (GgufFile model = GgufFile.open(Path.of("src/test/resources/oracle/tiny-f32.gguf"))) {
            String template = model.metadata().string(ChatTemplates.GGUF_KEY);
            assertEquals(ChatTemplates.glm47FlashTemplate(), template);
            assertTrue(ChatTemplates.recognise(template).warning().isEmpty());
        }
    }

    @Test
    void anotherTemplateIsNamedInTheWarning() {
        String chatml =
                "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}";
        ChatFormat format = ChatTemplates.recognise(chatml);
        String warning = format.warning().orElseThrow();
        assertTrue(warning.contains("not the GLM-4.7-Flash one"), warning);
        assertTrue(
                warning.contains(chatml.length() + " characters starting '{% for message in messages %}<|im_start|>"),
                warning);
        assertTrue(ChatTemplates.recognise(null).warning().orElseThrow().contains("has no chat template"));
    }

    @Test
    void theOracleChatCaseRendersToItsPromptText() throws Exception {
        JsonNode cases = new ObjectMapper()
                .readTree(Path.of("src/test/resources/oracle/refs/tiny-f32.logits.json")
                        .toFile())
                .path("cases");
        String promptText = null;
        for (JsonNode c : cases) {
            if (c.path("name").asText().equals("chat")) {
                promptText = c.path("prompt_text").textValue();
            }
        }
        // The oracle's README: one user message, "Hello, world! Tell me a story about a fox.".
        ChatRequest request = ChatRequestParser.parse(
                "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello, world! Tell me a story about a fox.\"}]}");
        assertEquals(promptText, new Glm47ChatTemplate().render(request));
    }
}
