package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** The llama.cpp reference data in the test resources (see /oracle/README of the project's oracle data). */
public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One prompt of a {@code refs/<model>.logits.json} file. */
    public record Case(
            String name,
            String promptText,
            int[] promptTokens,
            float[][] promptLogits,
            int[] greedyTokens,
            float[][] greedyStepLogits) {}

    public static Path model(String name) {
        try {
            return Path.of(Oracle.class.getResource("/oracle/" + name + ".gguf").toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    public static JsonNode json(String resource) {
        try (InputStream in = Oracle.class.getResourceAsStream("/oracle/" + resource)) {
            if (in == null) {
                throw new IllegalStateException("missing test resource /oracle/" + resource);
            }
            return JSON.readTree(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The cases of {@code refs/<model>.logits.json}. */
    public static List<Case> cases(String model) {
        List<Case> result = new ArrayList<>();
        for (JsonNode c : json("refs/" + model + ".logits.json").get("cases")) {
            result.add(new Case(
                    c.get("name").asText(),
                    c.get("prompt_text").isNull() ? null : c.get("prompt_text").asText(),
                    ints(c.get("prompt_tokens")),
                    matrix(c.get("prompt_logits")),
                    ints(c.get("greedy_tokens")),
                    matrix(c.get("greedy_step_logits"))));
        }
        return result;
    }

    public static Case chatCase(String model) {
        return cases(model).stream()
                .filter(c -> c.name().equals("chat"))
                .findFirst()
                .orElseThrow();
    }

    public static int[] ints(JsonNode array) {
        int[] v = new int[array.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = array.get(i).asInt();
        }
        return v;
    }

    public static float[] floats(JsonNode array) {
        float[] v = new float[array.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) array.get(i).asDouble();
        }
        return v;
    }

    public static float[][] matrix(JsonNode rows) {
        float[][] m = new float[rows.size()][];
        for (int i = 0; i < m.length; i++) {
            m[i] = floats(rows.get(i));
        }
        return m;
    }

    // The tests' own, beside SelfTest's: what checks the code does not share it.
    /** The spread of a logit vector (largest minus smallest), the scale GPU tolerances are relative to. */
    public static float range(float[] logits) {
        float lo = Float.POSITIVE_INFINITY;
        float hi = Float.NEGATIVE_INFINITY;
        for (float v : logits) {
            lo = Math.min(lo, v);
            hi = Math.max(hi, v);
        }
        return hi - lo;
    }

    /** The index of the largest value, the first one on ties (how the references chose greedy tokens). */
    public static int argmax(float[] v, int off, int n) {
        int best = 0;
        for (int i = 1; i < n; i++) {
            if (v[off + i] > v[off + best]) {
                best = i;
            }
        }
        return best;
    }

    public static float maxAbsDiff(float[] a, int aOff, float[] b, int n) {
        float max = 0;
        for (int i = 0; i < n; i++) {
            max = Math.max(max, Math.abs(a[aOff + i] - b[i]));
        }
        return max;
    }

    /**
     * Asserts that a GPU run's logits lie within {@code tolerance} of the reference's logit range of them and that
     * its argmax dispatch chose the reference's greedy token; returns that token.
     */
    public static int assertGpuLogits(String where, float[] expected, float[] got, int greedy, double tolerance) {
        float range = range(expected);
        float diff = maxAbsDiff(got, 0, expected, expected.length);
        assertTrue(
                diff <= tolerance * range, where + ": max |Δlogit| " + diff + " > " + tolerance + " × range " + range);
        int next = argmax(expected, 0, expected.length);
        assertEquals(next, greedy, where + ": greedy token");
        return next;
    }

    private Oracle() {}
}
