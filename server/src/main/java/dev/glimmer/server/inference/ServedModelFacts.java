package dev.glimmer.server.inference;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.nio.file.Files;
import java.util.EnumMap;
import java.util.HexFormat;
import java.util.Map;

/**
 * What {@code /v1/models} says about the served model (the engine's {@code ModelFacts} describe a file
 * for {@code info}; these are the few a client sees).
 *
 * @param id       the model id clients send (the file name without {@code .gguf})
 * @param created  when the file was written, in seconds since the epoch
 * @param ctx      the context length served, in tokens
 * @param params   the number of weights
 * @param quant    the weights' main type, e.g. {@code Q4_0}
 * @param demo     whether these are the built-in demo model's random weights
 * @param path     the GGUF file
 * @param backend  the backend serving it, e.g. {@code cpu} or {@code cuda}
 * @param backendReason why that backend (one line)
 */
public record ServedModelFacts(
        String id,
        long created,
        int ctx,
        long params,
        String quant,
        boolean demo,
        String path,
        String backend,
        String backendReason) {

    /**
     * OpenAI's {@code system_fingerprint}: names the serving configuration (model, weights, context,
     * backend), so that a client can tell when answers to the same seed may differ.
     */
    public String fingerprint() {
        String configuration = id + "|" + created + "|" + quant + "|" + ctx + "|" + backend;
        return "fp_" + HexFormat.of().toHexDigits(configuration.hashCode());
    }

    /** The facts of an opened GGUF file served with {@code ctx} tokens of context on {@code backend}. */
    public static ServedModelFacts of(GgufFile file, int ctx, boolean demo, String backend, String backendReason)
            throws IOException {
        String name = file.path().getFileName().toString();
        String id = name.endsWith(".gguf") ? name.substring(0, name.length() - 5) : name;
        long created = Files.getLastModifiedTime(file.path()).toMillis() / 1000;
        long params = 0;
        // The "quant" is the type holding most of the weight bytes (norms and biases stay F32 in every file).
        Map<GgmlType, Long> bytesByType = new EnumMap<>(GgmlType.class);
        for (TensorInfo t : file.tensors()) {
            params += t.elements();
            bytesByType.merge(t.type(), t.size(), Long::sum);
        }
        String quant = bytesByType.entrySet().stream()
                .max(Map.Entry.comparingByValue())
                .map(e -> e.getKey().name())
                .orElse("none");
        return new ServedModelFacts(
                id, created, ctx, params, quant, demo, file.path().toString(), backend, backendReason);
    }
}
