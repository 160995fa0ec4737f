package dev.glimmer.engine.model;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a GGUF model file is, summarized for people and scripts ({@code ./glimmer info}, {@code bench}):
 * architecture, hyper-parameters, tokenizer, tensors by type, and how many bytes of weights one
 * decode step reads.
 *
 * @param architecture        {@code general.architecture}
 * @param name                {@code general.name}, or empty
 * @param fileSize            bytes of the file
 * @param ggufVersion         the container version
 * @param hyperParameters     every {@code ARCH.*} key in file order, key without the prefix, value as read
 * @param tokenizer           the tokenizer's facts
 * @param tensorCount         number of tensors
 * @param tensorsByType       tensor count per type, in type id order
 * @param weightBytes         bytes of all tensor data
 * @param weightBytesPerToken bytes of weights read to decode one token, see {@link #weightBytesPerToken(GgufFile)}
 */
public record ModelFacts(
        String architecture,
        String name,
        long fileSize,
        int ggufVersion,
        Map<String, GgufValue> hyperParameters,
        TokenizerFacts tokenizer,
        int tensorCount,
        Map<GgmlType, Integer> tensorsByType,
        long weightBytes,
        long weightBytesPerToken) {

    /** Where the chat template that ships with Glimmer lives (byte-identical to the real model's). */
    public static final String BUNDLED_TEMPLATE_RESOURCE = "/dev/glimmer/engine/chat/glm-4.7-flash.jinja";

    /**
     * @param model               {@code tokenizer.ggml.model}, or empty
     * @param pre                 {@code tokenizer.ggml.pre}, or empty
     * @param vocabSize           entries of {@code tokenizer.ggml.tokens}
     * @param mergeCount          entries of {@code tokenizer.ggml.merges}
     * @param specialIds          the special token ids present, by role: bos, eos, eot, eom, pad, unk
     * @param chatTemplate        whether {@code tokenizer.chat_template} is present
     * @param bundledChatTemplate whether it is exactly the GLM-4.7-Flash template Glimmer ships
     */
    public record TokenizerFacts(
            String model,
            String pre,
            int vocabSize,
            int mergeCount,
            Map<String, Long> specialIds,
            boolean chatTemplate,
            boolean bundledChatTemplate) {}

    /** The special-token roles and the keys that carry their ids. */
    private static final Map<String, String> SPECIAL_ID_KEYS = orderedMap(
            "bos", "tokenizer.ggml.bos_token_id",
            "eos", "tokenizer.ggml.eos_token_id",
            "eot", "tokenizer.ggml.eot_token_id",
            "eom", "tokenizer.ggml.eom_token_id",
            "pad", "tokenizer.ggml.padding_token_id",
            "unk", "tokenizer.ggml.unknown_token_id");

    private static final Pattern BLOCK = Pattern.compile("^blk\\.(\\d+)\\.");

    /** Reads the facts of an open file; metadata of the wrong type ends in a GgufFormatException naming the key. */
    public static ModelFacts of(GgufFile file) {
        GgufMetadata m = file.metadata();
        String arch = m.optString("general.architecture").orElse("");
        Map<String, GgufValue> hyper = new LinkedHashMap<>();
        String prefix = arch + ".";
        m.entries().forEach((key, value) -> {
            if (!arch.isEmpty() && key.startsWith(prefix)) {
                hyper.put(key.substring(prefix.length()), value);
            }
        });
        Map<GgmlType, Integer> byType = new EnumMap<>(GgmlType.class);
        long weightBytes = 0;
        for (TensorInfo t : file.tensors()) {
            byType.merge(t.type(), 1, Integer::sum);
            weightBytes += t.size();
        }
        return new ModelFacts(
                arch,
                m.optString("general.name").orElse(""),
                file.fileSize(),
                file.version(),
                hyper,
                tokenizer(m),
                file.tensors().size(),
                byType,
                weightBytes,
                weightBytesPerToken(file));
    }

    /**
     * Bytes of weights one decode step reads: every trunk tensor in full, except {@code token_embd}
     * (one row is looked up) and the stacked routed-expert tensors ({@code *_exps}, 3-D with
     * ne2 = expert_count), of which only expert_used_count of expert_count experts are read. The
     * NextN/MTP block (block index ≥ block_count − nextn_predict_layers) is not part of the trunk.
     */
    public static long weightBytesPerToken(GgufFile file) {
        return weightBytesPerToken(file.metadata(), file.tensors());
    }

    /** {@link #weightBytesPerToken(GgufFile)} from a header alone (e.g. one about to be written). */
    public static long weightBytesPerToken(GgufMetadata m, List<TensorInfo> tensors) {
        String arch = m.optString("general.architecture").orElse("");
        long blockCount = m.optInteger(arch + ".block_count").orElse(Long.MAX_VALUE);
        long nextn = m.optInteger(arch + ".nextn_predict_layers").orElse(0);
        long trunkBlocks = blockCount - nextn;
        long experts = m.optInteger(arch + ".expert_count").orElse(0);
        long expertsUsed = m.optInteger(arch + ".expert_used_count").orElse(experts);
        long total = 0;
        for (TensorInfo t : tensors) {
            Matcher block = BLOCK.matcher(t.name());
            if (block.find() && Long.parseLong(block.group(1)) >= trunkBlocks) {
                continue;
            }
            if (t.name().equals("token_embd.weight")) {
                total += t.rowBytes();
            } else if (experts > 0 && t.name().contains("_exps.") && t.shape().length == 3 && t.ne(2) == experts) {
                total += t.size() / experts * Math.min(expertsUsed, experts);
            } else {
                total += t.size();
            }
        }
        return total;
    }

    private static TokenizerFacts tokenizer(GgufMetadata m) {
        Map<String, Long> ids = new LinkedHashMap<>();
        SPECIAL_ID_KEYS.forEach((role, key) -> m.optInteger(key).ifPresent(id -> ids.put(role, id)));
        String template = m.optString("tokenizer.chat_template").orElse(null);
        return new TokenizerFacts(
                m.optString("tokenizer.ggml.model").orElse(""),
                m.optString("tokenizer.ggml.pre").orElse(""),
                m.has("tokenizer.ggml.tokens") ? m.stringArray("tokenizer.ggml.tokens").length : 0,
                m.has("tokenizer.ggml.merges") ? m.stringArray("tokenizer.ggml.merges").length : 0,
                ids,
                template != null,
                template != null && template.equals(bundledChatTemplate()));
    }

    /** The GLM-4.7-Flash chat template that ships with Glimmer. */
    public static String bundledChatTemplate() {
        try (InputStream in = ModelFacts.class.getResourceAsStream(BUNDLED_TEMPLATE_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("resource " + BUNDLED_TEMPLATE_RESOURCE + " is missing from the build");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Map<String, String> orderedMap(String... keysAndValues) {
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            map.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        return map;
    }
}
