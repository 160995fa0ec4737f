package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every {@code NAME.request.json} under {@code chat/golden/} rendered by our template must equal,
 * byte for byte, {@code NAME.prompt.txt}: the real GLM-4.7-Flash template rendered by Jinja2 with
 * Hugging Face's settings (made by {@code src/test/python/render_chat_goldens.py}).
 */
class GoldenPromptTest {

    static final Path GOLDEN = Path.of("src/test/resources/chat/golden");

    static List<Path> requests() throws IOException {
        try (Stream<Path> files = Files.list(GOLDEN)) {
            return files.filter(p -> p.getFileName().toString().endsWith(".request.json"))
                    .sorted()
                    .toList();
        }
    }

    @Test
    void thereAreAtLeast25Conversations() throws IOException {
        assertTrue(requests().size() >= 25, "only " + requests().size() + " golden conversations");
    }

    @TestFactory
    Stream<DynamicTest> renderedPromptEqualsJinja2() throws IOException {
        Glm47ChatTemplate template = new Glm47ChatTemplate();
        return requests().stream()
                .map(request -> DynamicTest.dynamicTest(request.getFileName().toString(), () -> {
                    String name = request.getFileName().toString().replace(".request.json", "");
                    String expected = new String(
                            Files.readAllBytes(GOLDEN.resolve(name + ".prompt.txt")), StandardCharsets.UTF_8);
                    String body = Files.readString(request, StandardCharsets.UTF_8);
                    assertEquals(expected, template.render(ChatRequestParser.parse(body)));
                }));
    }
}
