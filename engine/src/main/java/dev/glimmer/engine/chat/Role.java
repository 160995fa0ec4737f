package dev.glimmer.engine.chat;

import java.util.Arrays;
import java.util.Optional;
import java.util.stream.Collectors;

/** The message roles the GLM-4.7-Flash template knows. */
public enum Role {
    SYSTEM,
    USER,
    ASSISTANT,
    TOOL;

    /** The role's name in an OpenAI request ({@code "user"}, ...). */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * The role an OpenAI request names. {@code developer} is what current OpenAI clients send for
     * instructions (the newer name of {@code system}); the template knows it as {@code system}.
     */
    static Optional<Role> fromWireName(String name) {
        if (name.equals(DEVELOPER)) {
            return Optional.of(SYSTEM);
        }
        return Arrays.stream(values()).filter(r -> r.wireName().equals(name)).findFirst();
    }

    private static final String DEVELOPER = "developer";

    /** {@code "system, user, assistant, tool"}, for error messages. */
    static String wireNames() {
        return Arrays.stream(values()).map(Role::wireName).collect(Collectors.joining(", "));
    }
}
