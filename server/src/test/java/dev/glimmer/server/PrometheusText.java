package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A scrape of {@code /metrics} read as the Prometheus text format 0.0.4 defines it: {@code # TYPE} lines and samples
 * {@code name{label="value",...} number}. Any line of another shape fails the test.
 */
record PrometheusText(Map<String, String> types, List<Sample> samples) {

    record Sample(String name, Map<String, String> labels, double value) {}

    private static final Pattern SAMPLE = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(.*)})? (\\S+)");
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\",?");

    static PrometheusText parse(String text) {
        Map<String, String> types = new HashMap<>();
        List<Sample> samples = new ArrayList<>();
        for (String line : text.lines().toList()) {
            if (line.startsWith("# TYPE ")) {
                String[] parts = line.split(" ");
                assertEquals(4, parts.length, line);
                types.put(parts[2], parts[3]);
            } else if (line.startsWith("#") || line.isBlank()) {
                continue;
            } else {
                Matcher m = SAMPLE.matcher(line);
                assertTrue(m.matches(), "not a sample line: " + line);
                Map<String, String> labels = new LinkedHashMap<>();
                if (m.group(3) != null) {
                    Matcher l = LABEL.matcher(m.group(3));
                    int end = 0;
                    while (l.find() && l.start() == end) {
                        labels.put(l.group(1), l.group(2));
                        end = l.end();
                    }
                    assertEquals(m.group(3).length(), end, "bad labels: " + line);
                }
                samples.add(new Sample(m.group(1), labels, Double.parseDouble(m.group(4))));
            }
        }
        return new PrometheusText(types, samples);
    }

    /** The samples named {@code name}. */
    List<Sample> all(String name) {
        return samples.stream().filter(s -> s.name().equals(name)).toList();
    }

    /** The value of the one sample named {@code name} whose labels include {@code labels}. */
    double value(String name, Map<String, String> labels) {
        List<Sample> found = all(name).stream()
                .filter(s -> s.labels().entrySet().containsAll(labels.entrySet()))
                .toList();
        if (found.size() != 1) {
            fail(found.size() + " samples of " + name + " with " + labels + ": " + all(name));
        }
        return found.getFirst().value();
    }

    double value(String name) {
        return value(name, Map.of());
    }
}
