package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.model.ModelFacts;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./glimmer info}: what a GGUF model file is, from {@link ModelFacts}. */
@Command(
        name = "info",
        description =
                "describe a GGUF model: architecture, hyper-parameters, tokenizer, tensors, weight bytes per token",
        footer = """
                Weight bytes per decode token: every tensor of the trunk in full, except token_embd (one row)
                and the routed-expert stacks (expert_used_count of expert_count experts); the NextN/MTP block
                is not counted.""")
final class InfoCommand implements Subcommand {

    @Mixin
    ModelFile modelFile;

    @Option(names = "--json", description = "print JSON on stdout instead of text")
    boolean json;

    @Override
    public int run(Terminal io) throws Exception {
        ModelFacts facts;
        Path path = modelFile.path(io);
        try (GgufFile file = GgufFile.open(path)) {
            facts = ModelFacts.of(file);
        }
        if (json) {
            ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
            io.out().println(mapper.writeValueAsString(json(path, facts)));
        } else {
            printText(io.out(), path, facts);
        }
        io.out().flush();
        return 0;
    }

    private static Map<String, Object> json(Path path, ModelFacts f) {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("file", path.toString());
        root.put("file_size", f.fileSize());
        root.put("gguf_version", f.ggufVersion());
        root.put("architecture", f.architecture());
        root.put("name", f.name());
        Map<String, Object> hyper = new LinkedHashMap<>();
        f.hyperParameters().forEach((k, v) -> hyper.put(k, plain(v.value())));
        root.put("hyper_parameters", hyper);
        ModelFacts.TokenizerFacts t = f.tokenizer();
        Map<String, Object> tok = new LinkedHashMap<>();
        tok.put("model", t.model());
        tok.put("pre", t.pre());
        tok.put("vocab_size", t.vocabSize());
        tok.put("merge_count", t.mergeCount());
        tok.put("special_ids", t.specialIds());
        tok.put("chat_template", t.chatTemplate());
        tok.put("chat_template_is_glm_4_7_flash", t.bundledChatTemplate());
        root.put("tokenizer", tok);
        root.put("tensor_count", f.tensorCount());
        Map<String, Integer> byType = new LinkedHashMap<>();
        f.tensorsByType().forEach((type, n) -> byType.put(type.ggmlName(), n));
        root.put("tensors_by_type", byType);
        root.put("weight_bytes", f.weightBytes());
        root.put("weight_bytes_per_token", f.weightBytesPerToken());
        return root;
    }

    /** A metadata value as JSON-friendly Java: arrays become lists. */
    private static Object plain(Object value) {
        if (value instanceof GgufArray a) {
            List<Object> list = new ArrayList<>(a.length());
            for (int i = 0; i < a.length(); i++) {
                list.add(plain(java.lang.reflect.Array.get(a.values(), i)));
            }
            return list;
        }
        return value;
    }

    private static void printText(PrintStream out, Path path, ModelFacts f) {
        out.printf("file            %s (%s, GGUF v%d)%n", path, gigabytes(f.fileSize()), f.ggufVersion());
        out.printf("architecture    %s%n", f.architecture().isEmpty() ? "(none)" : f.architecture());
        out.printf("name            %s%n", f.name().isEmpty() ? "(none)" : f.name());
        out.println("hyper-parameters");
        int width = f.hyperParameters().keySet().stream()
                .mapToInt(String::length)
                .max()
                .orElse(0);
        for (Map.Entry<String, GgufValue> e : f.hyperParameters().entrySet()) {
            out.printf("  %-" + width + "s  %s%n", e.getKey(), e.getValue().describe());
        }
        ModelFacts.TokenizerFacts t = f.tokenizer();
        out.println("tokenizer");
        out.printf(
                "  model %s, pre %s, vocab %d, merges %d%n",
                orNone(t.model()), orNone(t.pre()), t.vocabSize(), t.mergeCount());
        out.printf(
                "  special ids     %s%n",
                t.specialIds().isEmpty()
                        ? "(none)"
                        : t.specialIds().entrySet().stream()
                                .map(e -> e.getKey() + " " + e.getValue())
                                .collect(Collectors.joining(", ")));
        out.printf(
                "  chat template   %s%n",
                !t.chatTemplate()
                        ? "absent"
                        : t.bundledChatTemplate()
                                ? "present (the GLM-4.7-Flash template)"
                                : "present (not the GLM-4.7-Flash one)");
        out.printf(
                "tensors         %d (%s)%n",
                f.tensorCount(),
                f.tensorsByType().entrySet().stream()
                        .map(e -> e.getKey().ggmlName() + " " + e.getValue())
                        .collect(Collectors.joining(", ")));
        out.printf("weight bytes    %s (%d)%n", gigabytes(f.weightBytes()), f.weightBytes());
        out.printf(
                "read per token  %s (%d bytes of weights per decode token)%n",
                gigabytes(f.weightBytesPerToken()), f.weightBytesPerToken());
    }

    private static String orNone(String s) {
        return s.isEmpty() ? "(none)" : s;
    }

    /** Decimal units, as disk sizes and bandwidths are quoted. */
    static String gigabytes(long bytes) {
        if (bytes >= 1_000_000_000L) {
            return String.format(Locale.ROOT, "%.2f GB", bytes / 1e9);
        }
        if (bytes >= 1_000_000L) {
            return String.format(Locale.ROOT, "%.2f MB", bytes / 1e6);
        }
        return String.format(Locale.ROOT, "%.1f kB", bytes / 1e3);
    }
}
