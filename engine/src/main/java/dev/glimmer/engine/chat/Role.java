package dev.glimmer.engine.chat;

import java.util.Arrays;
import java.util.Optional;
import java.util.stream.Collectors;

/** The message roles the GLM-4.7-Flash template knows. */
public enum Role {
    SYSTEM, USER, ASSISTANT, TOOL;

    /** The role's name in an OpenAI request ({@code "user"}, ...). */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    static Optional<Role> fromWireName(String name) {
        return Arrays.stream(values()).filter(r -> r.wireName().equals(name)).findFirst();
    }

    /** {@code "system, user, assistant, tool"}, for error messages. */
    static String wireNames() {
        return Arrays.stream(values()).map(Role::wireName).collect(Collectors.joining(", "));
    }
}
