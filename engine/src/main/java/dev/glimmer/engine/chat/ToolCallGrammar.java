package dev.glimmer.engine.chat;

import static dev.glimmer.engine.grammar.Expr.literal;
import static dev.glimmer.engine.grammar.Expr.seq;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.grammar.Expr;
import dev.glimmer.engine.grammar.JsonSchemaGrammar;
import dev.glimmer.engine.grammar.OutputGrammar;
import dev.glimmer.engine.grammar.UnsupportedSchemaException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The grammar of a forced tool call ({@code tool_choice} {@code required} or a named function) in
 * GLM-4.7's format: {@code <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>},
 * one call to one of the tools, its arguments those of the tool's parameter schema in the schema's
 * order (required ones always). String arguments are written raw, as the template writes them, the
 * others as JSON, so that {@link ChatOutputParser} reads them back into arguments that satisfy the schema.
 */
public final class ToolCallGrammar {
    private ToolCallGrammar() {}

    /**
     * @param tools         the tools one of which must be called
     * @param thinkingFirst whether the reply starts in the reasoning
     * @throws UnsupportedSchemaException when a tool's parameter schema is outside the supported subset
     */
    public static OutputGrammar forced(List<ToolSpec> tools, boolean thinkingFirst) {
        List<Expr> calls = new ArrayList<>();
        for (int t = 0; t < tools.size(); t++) {
            ToolSpec tool = tools.get(t);
            // Each tag a literal of its own: the vocabulary has it as one token.
            calls.add(seq(
                    literal(ChatOutputParser.CALL_START),
                    literal(tool.name()),
                    arguments(tool, "tools/" + t + "/function/parameters"),
                    literal(ChatOutputParser.CALL_END)));
        }
        Set<String> tags = Set.of(
                ChatOutputParser.CALL_START,
                ChatOutputParser.CALL_END,
                ChatOutputParser.KEY_START,
                ChatOutputParser.KEY_END,
                ChatOutputParser.VALUE_START,
                ChatOutputParser.VALUE_END);
        return new OutputGrammar(Expr.alt(calls), thinkingFirst, tags);
    }

    private static Expr arguments(ToolSpec tool, String where) {
        JsonNode parameters = tool.parameters();
        if (parameters.isMissingNode()) {
            return Expr.empty();
        }
        JsonSchemaGrammar schemas = JsonSchemaGrammar.of(parameters);
        List<Expr> members = new ArrayList<>();
        List<Boolean> required = new ArrayList<>();
        for (JsonSchemaGrammar.Property p : schemas.properties(parameters, "/" + where)) {
            String at = "/" + where + "/properties/" + p.name();
            Expr value = tool.isStringParameter(p.name())
                    ? schemas.rawString(p.schema(), at)
                    : schemas.value(p.schema(), at);
            members.add(seq(
                    literal(ChatOutputParser.KEY_START),
                    literal(p.name()),
                    literal(ChatOutputParser.KEY_END),
                    literal(ChatOutputParser.VALUE_START),
                    value,
                    literal(ChatOutputParser.VALUE_END)));
            required.add(p.required());
        }
        return JsonSchemaGrammar.someOf(members, required, Expr.empty());
    }
}
