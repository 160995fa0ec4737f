package dev.glimmer.server.cli;

/**
 * A command-line option: {@code --name VALUE} when {@code valueName} is set, else a flag.
 *
 * @param name        the option with its dashes, e.g. {@code --model} (or {@code -o})
 * @param alias       another spelling, e.g. {@code --output} for {@code -o}; may be null
 * @param valueName   what the value is called in help text (e.g. {@code F}); null for a flag
 * @param description one line for {@code --help}
 * @param required    whether the command refuses to run without it
 */
public record Option(String name, String alias, String valueName, String description, boolean required) {

    public static Option value(String name, String valueName, String description) {
        return new Option(name, null, valueName, description, false);
    }

    public static Option required(String name, String valueName, String description) {
        return new Option(name, null, valueName, description, true);
    }

    public static Option flag(String name, String description) {
        return new Option(name, null, null, description, false);
    }

    public Option withAlias(String otherName) {
        return new Option(name, otherName, valueName, description, required);
    }

    public boolean takesValue() {
        return valueName != null;
    }

    boolean matches(String word) {
        return word.equals(name) || word.equals(alias);
    }

    String synopsis() {
        String names = alias == null ? name : name + ", " + alias;
        return takesValue() ? names + " " + valueName : names;
    }
}
