package dev.glimmer.engine.chat;

import java.util.Optional;

/**
 * The chat format chosen for a model: always the GLM-4.7-Flash renderer, plus a one-line warning
 * when the model's own template is something else (the caller logs it once, at load time).
 */
public record ChatFormat(Glm47ChatTemplate template, Optional<String> warning) {}
