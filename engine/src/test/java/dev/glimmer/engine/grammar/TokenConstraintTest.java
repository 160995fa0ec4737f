package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.JsonSchemaGrammarTest.JSON;
import static dev.glimmer.engine.grammar.JsonSchemaGrammarTest.schema;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import dev.glimmer.engine.chat.ChatOutputParser;
import dev.glimmer.engine.chat.ChatResult;
import dev.glimmer.engine.chat.ToolCallGrammar;
import dev.glimmer.engine.chat.ToolSpec;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Token masks over the tiny oracle model's real vocabulary (byte-level BPE, 1,024 tokens): a
 * sequence that picks any allowed token at random, as a model with random weights does, always ends
 * with text the schema accepts, within its token limit.
 */
class TokenConstraintTest {
    static Tokenizer tokenizer;
    static TokenTrie trie;

    /** Schemas of every supported kind; the walks below must satisfy each. */
    static final List<String> SCHEMAS = List.of(
            "{'type':'string'}",
            "{'type':'string','minLength':3,'maxLength':8}",
            "{'type':'string','pattern':'^[A-Z][a-z]{2,5}-[0-9]{3}$'}",
            "{'type':'string','pattern':'^(yes|no|maybe)$'}",
            "{'type':'string','pattern':'^\\\\d{4}-\\\\d{2}-\\\\d{2}$'}",
            "{'type':'integer'}",
            "{'type':'integer','minimum':-40,'maximum':125}",
            "{'type':'integer','minimum':1000000}",
            "{'type':'number'}",
            "{'type':'boolean'}",
            "{'type':'null'}",
            "{'enum':['red','green','blue',42,null]}",
            "{'const':{'version':2,'tags':['a','b']}}",
            "{'type':['integer','string','null']}",
            "{'anyOf':[{'type':'integer','minimum':0,'maximum':9},{'type':'string','maxLength':2}]}",
            "{'oneOf':[{'type':'object','properties':{'kind':{'const':'circle'},'r':{'type':'number'}},"
                    + "'required':['kind','r']},{'type':'object','properties':{'kind':{'const':'square'},"
                    + "'side':{'type':'integer','minimum':1,'maximum':100}},'required':['kind','side']}]}",
            "{'type':'array','items':{'type':'integer','minimum':0,'maximum':255},'minItems':2,'maxItems':4}",
            "{'type':'array','items':{'type':'string','maxLength':4},'maxItems':3}",
            "{'type':'array','items':{'type':'boolean'},'minItems':3}",
            "{'type':'object','properties':{'name':{'type':'string','maxLength':12},'age':{'type':'integer',"
                    + "'minimum':0,'maximum':150},'email':{'type':'string','pattern':'^[a-z]+@[a-z]+\\\\.com$'}},"
                    + "'required':['name','age'],'additionalProperties':false}",
            "{'type':'object','properties':{'a':{'type':'boolean'},'b':{'type':'null'},'c':{'type':'integer'}}}",
            "{'type':'object'}",
            "{'type':'object','additionalProperties':{'type':'integer','minimum':0,'maximum':9}}",
            "{'type':'object','properties':{'point':{'$ref':'#/$defs/point'},'path':{'type':'array','items':"
                    + "{'$ref':'#/$defs/point'},'maxItems':2}},'required':['point','path'],'$defs':{'point':"
                    + "{'type':'object','properties':{'x':{'type':'integer'},'y':{'type':'integer'}},"
                    + "'required':['x','y']}}}",
            "{'$ref':'#/definitions/tree','definitions':{'tree':{'type':'object','properties':{'value':"
                    + "{'type':'integer','minimum':0,'maximum':99},'children':{'type':'array','items':"
                    + "{'$ref':'#/definitions/tree'},'maxItems':2}},'required':['value']}}}",
            "{}");

    @BeforeAll
    static void load() throws IOException {
        try (GgufFile f = GgufFile.open(Path.of("src/test/resources/oracle/tiny-f32.gguf"))) {
            tokenizer = Tokenizer.fromMetadata(f.metadata());
        }
        trie = TokenTrie.of(tokenizer);
    }

    /** Picks allowed tokens at random until the end of generation or the limit; returns the tokens. */
    static List<Integer> walk(TokenConstraint constraint, int maxTokens, Random random) {
        List<Integer> out = new ArrayList<>();
        for (int left = maxTokens; left > 0; left--) {
            long[] mask = constraint.allowed(left);
            List<Integer> allowed = new ArrayList<>();
            for (int t = 0; t < tokenizer.vocabularySize(); t++) {
                if (TokenTrie.allows(mask, t)) {
                    allowed.add(t);
                }
            }
            int token = allowed.get(random.nextInt(allowed.size()));
            out.add(token);
            if (tokenizer.isEndOfGeneration(token)) {
                break;
            }
            constraint.accept(token);
        }
        return out;
    }

    static String text(List<Integer> tokens) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int t : tokens) {
            if (!tokenizer.isEndOfGeneration(t)) {
                bytes.writeBytes(tokenizer.piece(t, true));
            }
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    static void assertValid(JsonNode schema, String text) throws IOException {
        JsonNode value = JSON.readTree(text);
        Set<ValidationMessage> errors = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012)
                .getSchema(schema)
                .validate(value);
        assertTrue(errors.isEmpty(), () -> text + " breaks " + schema + ": " + errors);
    }

    @Test
    void randomWalksSatisfyEverySchema() throws IOException {
        for (String s : SCHEMAS) {
            JsonNode schema = schema(s);
            for (int seed = 0; seed < 8; seed++) {
                TokenConstraint c = new TokenConstraint(
                        new OutputGrammar(JsonSchemaGrammar.forSchema(schema), false, Set.of()), trie);
                List<Integer> tokens = walk(c, 80, new Random(seed));
                String text = text(tokens);
                assertTrue(tokenizer.isEndOfGeneration(tokens.getLast()), () -> "no end of generation after " + text);
                assertValid(schema, text);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {12, 20, 40})
    void theThinkingEndsInTimeForTheAnswer(int maxTokens) throws IOException {
        JsonNode schema = schema("{'type':'object','properties':{'ok':{'type':'boolean'}},'required':['ok']}");
        for (int seed = 0; seed < 5; seed++) {
            TokenConstraint c =
                    new TokenConstraint(new OutputGrammar(JsonSchemaGrammar.forSchema(schema), true, Set.of()), trie);
            List<Integer> tokens = walk(c, maxTokens, new Random(seed));
            String text = text(tokens);
            int end = text.indexOf("</think>");
            assertTrue(end >= 0, text);
            assertTrue(tokenizer.isEndOfGeneration(tokens.getLast()), text);
            assertValid(schema, text.substring(end + "</think>".length()));
        }
    }

    @Test
    void aForcedToolCallParsesIntoArgumentsOfTheSchema() throws IOException {
        JsonNode parameters = schema("{'type':'object','properties':{'city':{'type':'string','maxLength':10},"
                + "'days':{'type':'integer','minimum':1,'maximum':7},'units':{'enum':['metric','imperial']},"
                + "'detail':{'type':'boolean'}},'required':['city','days']}");
        ToolSpec weather = new ToolSpec("get_weather", parameters, JSON.createObjectNode());
        ToolSpec time = new ToolSpec("get_time", schema("{'type':'object','properties':{}}"), JSON.createObjectNode());
        List<ToolSpec> tools = List.of(weather, time);
        for (int seed = 0; seed < 10; seed++) {
            TokenConstraint c = new TokenConstraint(ToolCallGrammar.forced(tools, false), trie);
            List<Integer> tokens = walk(c, 80, new Random(seed));
            String text = text(tokens);
            ChatResult result = new ChatOutputParser(false, tools).parse(text);
            assertEquals(1, result.toolCalls().size(), text);
            assertEquals("", result.content(), text);
            ChatResult.ParsedToolCall call = result.toolCalls().getFirst();
            JsonNode schema = call.name().equals("get_weather") ? parameters : time.parameters();
            assertValid(schema, call.arguments());
        }
    }

    /** The trie walk allows exactly the tokens whose bytes the grammar accepts one by one. */
    @Test
    void theTrieWalkAgreesWithEveryTokenTriedAlone() {
        JsonNode schema = schema(SCHEMAS.get(19));
        Matcher m = new Matcher(JsonSchemaGrammar.forSchema(schema));
        TokenConstraint c =
                new TokenConstraint(new OutputGrammar(JsonSchemaGrammar.forSchema(schema), false, Set.of()), trie);
        String prefix = "{\"name\": \"Al";
        Matcher.State s = m.next(m.start(), prefix.getBytes(StandardCharsets.UTF_8));
        for (int t : tokenizer.encode(prefix, false)) {
            c.accept(t);
        }
        long[] mask = c.allowed(1000);
        int allowed = 0;
        for (int token = 0; token < tokenizer.vocabularySize(); token++) {
            int t = token;
            byte[] piece = tokenizer.piece(t, true);
            boolean expected = !tokenizer.isEndOfGeneration(t)
                    && piece.length > 0
                    && tokenizer.tokenType(t) == dev.glimmer.engine.tokenizer.TokenType.NORMAL
                    && m.next(s, piece) != m.dead;
            assertEquals(expected, TokenTrie.allows(mask, t), () -> "token " + t + " '" + tokenizer.tokenText(t) + "'");
            allowed += expected ? 1 : 0;
        }
        assertTrue(allowed > 100, "a string goes on with most tokens: " + allowed);
    }
}
