package dev.glimmer.engine.chat;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * Recognises a model's chat template ({@code tokenizer.chat_template} from its GGUF). Glimmer
 * renders prompts in Java for exactly one template, the GLM-4.7-Flash one bundled as
 * {@code glm-4.7-flash.jinja}; any other template is reported and the GLM format used anyway.
 */
public final class ChatTemplates {

    /** GGUF metadata key of the chat template. */
    public static final String GGUF_KEY = "tokenizer.chat_template";

    private static final String BUNDLED = readBundled();

    /** The GLM-4.7-Flash template text, byte-exact as the real GGUF files carry it. */
    public static String glm47FlashTemplate() {
        return BUNDLED;
    }

    /** @param modelTemplate the model's template, or null when its GGUF has none */
    public static ChatFormat recognise(String modelTemplate) {
        Glm47ChatTemplate glm = new Glm47ChatTemplate();
        if (modelTemplate == null) {
            return new ChatFormat(
                    glm,
                    Optional.of(
                            "the model has no chat template (" + GGUF_KEY + "); using the GLM-4.7-Flash chat format"));
        }
        if (modelTemplate.equals(BUNDLED)) {
            return new ChatFormat(glm, Optional.empty());
        }
        String firstLine = modelTemplate.strip().lines().findFirst().orElse("");
        if (firstLine.length() > 60) {
            firstLine = firstLine.substring(0, 60) + "…";
        }
        return new ChatFormat(
                glm,
                Optional.of("the model's chat template is not the GLM-4.7-Flash one (found " + modelTemplate.length()
                        + " characters starting '" + firstLine + "'); using the GLM-4.7-Flash chat format"));
    }

    private static String readBundled() {
        try (InputStream in = ChatTemplates.class.getResourceAsStream("glm-4.7-flash.jinja")) {
            if (in == null) {
                throw new IllegalStateException("glm-4.7-flash.jinja is missing from the engine jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private ChatTemplates() {}
}
