package dev.glimmer.engine.grammar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The grammar a schema compiles to accepts the JSON texts the schema accepts, byte by byte. */
class JsonSchemaGrammarTest {
    static final ObjectMapper JSON = new ObjectMapper();

    static JsonNode schema(String json) {
        try {
            return JSON.readTree(json.replace('\'', '"'));
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** Whether the grammar of {@code schema} accepts exactly {@code text}. */
    static boolean accepts(String schemaJson, String text) {
        Matcher m = new Matcher(JsonSchemaGrammar.forSchema(schema(schemaJson)));
        return m.next(m.start(), text.getBytes(StandardCharsets.UTF_8)).accepting();
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'string'} => "hello"
            {'type':'string'} => "a \\"quoted\\" \\u00e9 é ü"
            {'type':'string','minLength':2,'maxLength':3} => "ab"
            {'type':'string','minLength':2,'maxLength':3} => "aéb"
            {'type':'string','pattern':'^[a-z]+-[0-9]{2}$'} => "abc-42"
            {'type':'string','pattern':'fox'} => "the fox jumps"
            {'type':'string','pattern':'^(cat|dog)s?$'} => "dogs"
            {'type':'integer'} => -120
            {'type':'integer','minimum':-5,'maximum':250} => 250
            {'type':'integer','minimum':-5,'maximum':250} => -5
            {'type':'integer','minimum':10,'maximum':20} => 15
            {'type':'integer','exclusiveMinimum':0} => 1
            {'type':'number'} => -0.25e+3
            {'type':'boolean'} => false
            {'type':'null'} => null
            {'enum':['red','green',3]} => 3
            {'const':{'a':[1,2]}} => {"a":[1,2]}
            {'type':['string','null']} => null
            {'anyOf':[{'type':'integer'},{'type':'string'}]} => "x"
            {'type':'array','items':{'type':'integer'},'minItems':1,'maxItems':3} => [1, 2,3]
            {'type':'array'} => [{"x": [true, null]}, "s", 1.5]
            {'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'}},'required':['b']} => {"b":"x"}
            {'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'}},'required':['b']} => { "a": 1,\\n  "b": "x" }
            {'type':'object'} => {"any": {"thing": [1]}}
            {'type':'object','additionalProperties':{'type':'integer'}} => {"x":1,"y":2}
            {'$defs':{'n':{'type':'object','properties':{'next':{'anyOf':[{'$ref':'#/$defs/n'},{'type':'null'}]}},'required':['next']}},'$ref':'#/$defs/n'} => {"next":{"next":null}}
            """)
    void acceptsValidText(String schema, String text) {
        assertTrue(accepts(schema, text.replace("\\n", "\n")), text);
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'string'} => hello
            {'type':'string'} => "a"b"
            {'type':'string','minLength':2,'maxLength':3} => "a"
            {'type':'string','minLength':2,'maxLength':3} => "abcd"
            {'type':'string','pattern':'^[a-z]+-[0-9]{2}$'} => "abc-4"
            {'type':'string','pattern':'fox'} => "the dog"
            {'type':'integer'} => 1.5
            {'type':'integer'} => 012
            {'type':'integer','minimum':-5,'maximum':250} => 251
            {'type':'integer','minimum':-5,'maximum':250} => -6
            {'type':'integer','minimum':10,'maximum':20} => 9
            {'type':'integer','exclusiveMinimum':0} => 0
            {'type':'boolean'} => 1
            {'enum':['red','green',3]} => "blue"
            {'type':'array','items':{'type':'integer'},'minItems':1,'maxItems':3} => []
            {'type':'array','items':{'type':'integer'},'minItems':1,'maxItems':3} => [1,2,3,4]
            {'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'}},'required':['b']} => {"a":1}
            {'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'}},'required':['b']} => {"b":"x","c":1}
            {'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'}},'required':['b']} => {"b":"x",}
            """)
    void refusesInvalidText(String schema, String text) {
        assertFalse(accepts(schema, text), text);
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'string','format':'idn-email'} => format
            {'type':'number','multipleOf':2} => multipleOf
            {'type':'array','uniqueItems':true} => uniqueItems
            {'type':'object','patternProperties':{'x':{}}} => patternProperties
            {'type':'object','properties':{'a':{'not':{}}}} => not
            {'type':'string','pattern':'(a)\\\\1'} => pattern
            {'type':'string','pattern':'(?=a)'} => pattern
            {'$ref':'http://example.com/s.json'} => $ref
            {'type':'object','properties':{'a':{}},'additionalProperties':true} => additionalProperties
            """)
    void refusesUnsupportedKeywordsByName(String schema, String keyword) {
        UnsupportedSchemaException e =
                assertThrows(UnsupportedSchemaException.class, () -> JsonSchemaGrammar.forSchema(schema(schema)));
        assertEquals(keyword, e.keyword());
        assertTrue(e.getMessage().contains(keyword), e.getMessage());
    }

    @Test
    void aLongStringLeadsBackToOneState() {
        Matcher m = new Matcher(JsonSchemaGrammar.forSchema(schema("{'type':'string'}")));
        Matcher.State s = m.next(m.start(), "\"abc".getBytes(StandardCharsets.UTF_8));
        assertEquals(s, m.next(s, "defghijklmnop".getBytes(StandardCharsets.UTF_8)));
        assertEquals(1, m.fewestTokensToEnd(s));
    }

    @Test
    void fewestTokensToEndCountsTheShortestCompletion() {
        Matcher m = new Matcher(JsonSchemaGrammar.forSchema(
                schema("{'type':'object','properties':{'n':{'type':'integer','minimum':100}},'required':['n']}")));
        assertEquals("{\"n\":100}".length(), m.fewestTokensToEnd(m.start()));
        assertEquals(1, m.fewestTokensToEnd(m.next(m.start(), "{\"n\":12345".getBytes(StandardCharsets.UTF_8))));
        assertEquals(3, m.fewestTokensToEnd(m.next(m.start(), "{\"n\":1".getBytes(StandardCharsets.UTF_8))));
    }

    @Test
    void aSchemaThatIsOnlyItselfIsRefusedAndOneThatStartsWithItselfTerminates() {
        dev.glimmer.engine.InvalidInputException e = assertThrows(
                dev.glimmer.engine.InvalidInputException.class,
                () -> new Matcher(JsonSchemaGrammar.forSchema(schema("{'$ref':'#'}"))));
        assertTrue(e.getMessage().contains("no output satisfies"), e.getMessage());
        assertTrue(accepts("{'anyOf':[{'$ref':'#'},{'type':'null'}]}", "null"));
        assertFalse(accepts("{'anyOf':[{'$ref':'#'},{'type':'null'}]}", "1"));
    }
}
