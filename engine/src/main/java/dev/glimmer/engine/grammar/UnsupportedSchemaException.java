package dev.glimmer.engine.grammar;

import dev.glimmer.engine.InvalidInputException;

/**
 * A JSON schema that output cannot be constrained to: a keyword (or a use of one) outside the
 * supported subset, or a schema no value satisfies. The message names the keyword and where it is
 * (a JSON pointer into the schema).
 */
public final class UnsupportedSchemaException extends InvalidInputException {
    private final String keyword;

    public UnsupportedSchemaException(String keyword, String where, String detail) {
        super(detail + " (at " + (where.isEmpty() ? "the schema's root" : where) + ")");
        this.keyword = keyword;
    }

    /** The keyword at fault, e.g. {@code format}. */
    public String keyword() {
        return keyword;
    }
}
