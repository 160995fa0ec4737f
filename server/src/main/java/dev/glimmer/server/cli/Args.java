package dev.glimmer.server.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** The parsed options of one command invocation, checked against the command's declaration. */
public final class Args {
    private final Map<String, String> values;
    private final List<String> positionals;

    private Args(Map<String, String> values, List<String> positionals) {
        this.values = values;
        this.positionals = positionals;
    }

    /** Parses {@code words} against {@code options}; unknown options and missing values are usage errors. */
    static Args parse(Command command, String[] words) {
        Map<String, String> values = new LinkedHashMap<>();
        List<String> positionals = new ArrayList<>();
        for (int i = 0; i < words.length; i++) {
            String word = words[i];
            if (!word.startsWith("-") || word.equals("-")) {
                positionals.add(word);
                continue;
            }
            String inlineValue = null;
            int eq = word.indexOf('=');
            if (word.startsWith("--") && eq > 0) {
                inlineValue = word.substring(eq + 1);
                word = word.substring(0, eq);
            }
            Option option = find(command, word);
            if (values.containsKey(option.name())) {
                throw new UsageException(word + " given twice");
            }
            if (option.takesValue()) {
                String value = inlineValue;
                if (value == null) {
                    if (i + 1 >= words.length) {
                        throw new UsageException(word + " needs a value (" + option.valueName() + ")");
                    }
                    value = words[++i];
                }
                values.put(option.name(), value);
            } else {
                if (inlineValue != null) {
                    throw new UsageException(word + " takes no value");
                }
                values.put(option.name(), "");
            }
        }
        for (Option option : command.options()) {
            if (option.required() && !values.containsKey(option.name())) {
                throw new UsageException(command.name() + " needs " + option.name() + " " + option.valueName()
                        + " (see ./glimmer " + command.name() + " --help)");
            }
        }
        return new Args(values, positionals);
    }

    private static Option find(Command command, String word) {
        for (Option option : command.options()) {
            if (option.matches(word)) {
                return option;
            }
        }
        throw new UsageException("unknown option " + word + " for " + command.name()
                + " (see ./glimmer " + command.name() + " --help)");
    }

    public boolean has(String name) {
        return values.containsKey(name);
    }

    public Optional<String> optional(String name) {
        return Optional.ofNullable(values.get(name));
    }

    public String string(String name) {
        String value = values.get(name);
        if (value == null) {
            throw new UsageException("missing " + name);
        }
        return value;
    }

    public String string(String name, String defaultValue) {
        return values.getOrDefault(name, defaultValue);
    }

    public int integer(String name, int defaultValue) {
        return has(name) ? parseInt(name, string(name)) : defaultValue;
    }

    public long longValue(String name, long defaultValue) {
        if (!has(name)) {
            return defaultValue;
        }
        try {
            return Long.parseLong(string(name).trim());
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be an integer, got '" + string(name) + "'");
        }
    }

    public double decimal(String name, double defaultValue) {
        if (!has(name)) {
            return defaultValue;
        }
        try {
            double value = Double.parseDouble(string(name).trim());
            if (!Double.isFinite(value)) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be a number, got '" + string(name) + "'");
        }
    }

    /** An existing, readable file given by option {@code name}. */
    public Path existingFile(String name) {
        Path path = Path.of(string(name));
        if (!Files.exists(path)) {
            throw new UsageException("no such file: " + path);
        }
        if (Files.isDirectory(path)) {
            throw new UsageException("is a directory, not a file: " + path);
        }
        if (!Files.isReadable(path)) {
            throw new UsageException("cannot read " + path + " (permission denied)");
        }
        return path;
    }

    /** A comma-separated list of integers, e.g. {@code 1,2,3}. */
    public int[] intList(String name) {
        String text = string(name).trim();
        if (text.isEmpty()) {
            return new int[0];
        }
        String[] parts = text.split(",");
        int[] result = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            result[i] = parseInt(name, parts[i]);
        }
        return result;
    }

    public List<String> positionals() {
        return positionals;
    }

    private static int parseInt(String name, String text) {
        try {
            return Integer.parseInt(text.trim());
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be an integer, got '" + text.trim() + "'");
        }
    }
}
