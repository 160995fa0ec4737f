package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.JsonSchemaGrammarTest.accepts;
import static dev.glimmer.engine.grammar.JsonSchemaGrammarTest.schema;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SchemaValidatorsConfig;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import java.net.InetAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.OffsetTime;
import java.time.Period;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code format}, number bounds and {@code allOf}: random texts of each grammar (random walks through
 * the matcher) are valid for an independent validator (networknt, with format assertions on) and for
 * Java's own parsers of the standards; texts just outside are refused.
 */
class SchemaFormatsTest {
    private static final int SAMPLES = 200;
    private static final SchemaValidatorsConfig ASSERT_FORMATS =
            SchemaValidatorsConfig.builder().formatAssertionsEnabled(true).build();

    /** A random text the grammar accepts: random allowed bytes, ending more and more eagerly. */
    static String sample(Matcher m, Random random) {
        Matcher.State s = m.start();
        StringBuilder bytes = new StringBuilder();
        List<Integer> allowed = new ArrayList<>();
        for (int step = 0; ; step++) {
            if (s.accepting() && (s.closed() || random.nextInt(100) < 2 + step / 4)) {
                return new String(bytes.toString().getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
            }
            allowed.clear();
            long nearest = Long.MAX_VALUE;
            for (int b = 0; b < 256; b++) {
                Matcher.State n = m.next(s, b);
                if (n != m.dead) {
                    // After a while only bytes that bring the end nearer, so that every walk ends.
                    long toEnd = m.fewestTokensToEnd(n);
                    if (step > 300) {
                        if (toEnd < nearest) {
                            allowed.clear();
                            nearest = toEnd;
                        } else if (toEnd > nearest) {
                            continue;
                        }
                    }
                    allowed.add(b);
                }
            }
            assertFalse(allowed.isEmpty(), "a dead end after " + bytes);
            int b = allowed.get(random.nextInt(allowed.size()));
            bytes.append((char) b);
            s = m.next(s, b);
        }
    }

    static void assertValid(String schemaJson, String text) {
        JsonNode schema = schema(schemaJson);
        JsonNode value;
        try {
            value = JsonSchemaGrammarTest.JSON.readTree(text);
        } catch (Exception e) {
            throw new AssertionError("not JSON: " + text, e);
        }
        Set<ValidationMessage> errors = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012)
                .getSchema(schema, ASSERT_FORMATS)
                .validate(value);
        assertTrue(errors.isEmpty(), () -> text + " breaks " + schemaJson + ": " + errors);
    }

    static List<String> samples(String schemaJson, long seed) {
        return samples(schemaJson, seed, true);
    }

    /** @param validate whether networknt checks each sample (else only the caller's checks run) */
    static List<String> samples(String schemaJson, long seed, boolean validate) {
        Matcher m = new Matcher(JsonSchemaGrammar.forSchema(schema(schemaJson)));
        Random random = new Random(seed);
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < SAMPLES; i++) {
            String text = sample(m, random);
            if (validate) {
                assertValid(schemaJson, text);
            }
            texts.add(text);
        }
        return texts;
    }

    static String unquote(String json) {
        try {
            return JsonSchemaGrammarTest.JSON.readTree(json).textValue();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void datesTimesDurationsAndUuidsParseWithJavaTime() {
        for (String t : samples("{'type':'string','format':'date'}", 1)) {
            LocalDate.parse(unquote(t));
        }
        // networknt 1.5.6 refuses some negative offsets with minutes that RFC 3339 allows ("07:46:39-08:30"):
        // java.time alone judges the times (date-time, below, is checked by both).
        for (String t : samples("{'type':'string','format':'time'}", 2, false)) {
            OffsetTime.parse(unquote(t));
        }
        for (String t : samples("{'type':'string','format':'date-time'}", 3)) {
            OffsetDateTime.parse(unquote(t));
        }
        for (String t : samples("{'type':'string','format':'duration'}", 10)) {
            String d = unquote(t);
            // java.time reads the date part (Period) and the time part (Duration) apart.
            int tAt = d.indexOf('T');
            if (tAt != 1) {
                Period.parse(tAt < 0 ? d : d.substring(0, tAt));
            }
            if (tAt >= 0) {
                Duration.parse("P" + d.substring(tAt));
            }
        }
        for (String t : samples("{'type':'string','format':'uuid'}", 4)) {
            assertEquals(unquote(t).toLowerCase(), UUID.fromString(unquote(t)).toString());
        }
    }

    @Test
    void addressesHostnamesEmailsAndUrisAreValid() throws Exception {
        for (String t : samples("{'type':'string','format':'ipv4'}", 5)) {
            assertEquals(unquote(t), InetAddress.ofLiteral(unquote(t)).getHostAddress());
        }
        for (String t : samples("{'type':'string','format':'ipv6'}", 6)) {
            InetAddress.ofLiteral(unquote(t));
        }
        for (String t : samples("{'type':'string','format':'hostname'}", 7)) {
            assertTrue(unquote(t).length() <= 253, t);
        }
        for (String t : samples("{'type':'string','format':'email'}", 8)) {
            String address = unquote(t);
            assertTrue(address.length() <= 254 && address.indexOf('@') <= 64, t);
        }
        for (String t : samples("{'type':'string','format':'uri','minLength':1,'maxLength':2083}", 9)) {
            URI uri = new URI(unquote(t));
            assertTrue(uri.isAbsolute() && uri.getRawAuthority() != null, t);
        }
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "{'type':'number','minimum':0,'maximum':1}",
                "{'type':'number','exclusiveMinimum':0,'exclusiveMaximum':0.5}",
                "{'type':'number','minimum':-2.75,'maximum':3.125}",
                "{'type':'number','minimum':-10.5,'exclusiveMaximum':-10.25}",
                "{'type':'number','exclusiveMinimum':-1}",
                "{'type':'number','maximum':100,'minimum':99.999}",
                "{'type':'integer','minimum':-3,'exclusiveMaximum':70}",
                "{'type':['number','null'],'minimum':1e2,'maximum':1.5e2}"
            })
    void boundedNumbersStayInside(String schemaJson) {
        samples(schemaJson, schemaJson.hashCode());
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'number','minimum':0,'maximum':1} => 0
            {'type':'number','minimum':0,'maximum':1} => 1.000
            {'type':'number','minimum':0,'maximum':1} => 0.123456789012345
            {'type':'number','minimum':-2.75,'maximum':3.125} => -2.75
            {'type':'number','minimum':-2.75,'maximum':3.125} => -0.5
            {'type':'number','minimum':-2.75,'maximum':3.125} => 3.12
            {'type':'number','exclusiveMinimum':0,'exclusiveMaximum':0.5} => 0.4999
            {'type':'string','format':'date'} => "2024-02-29"
            {'type':'string','format':'date'} => "2000-02-29"
            {'type':'string','format':'date'} => "1999-12-31"
            {'type':'string','format':'date-time'} => "2026-11-28T09:15:00.123+01:00"
            {'type':'string','format':'time'} => "23:59:59Z"
            {'type':'string','format':'duration'} => "P1Y2M3DT4H5M6S"
            {'type':'string','format':'duration'} => "P3W"
            {'type':'string','format':'duration'} => "PT90S"
            {'type':'string','format':'uuid'} => "123e4567-e89b-12d3-A456-426614174000"
            {'type':'string','format':'ipv4'} => "255.0.10.1"
            {'type':'string','format':'ipv6'} => "::"
            {'type':'string','format':'ipv6'} => "fe80::1:2"
            {'type':'string','format':'ipv6'} => "1:2:3:4:5:6:7:8"
            {'type':'string','format':'ipv6'} => "::ffff:192.168.0.1"
            {'type':'string','format':'hostname'} => "api.example-1.com"
            {'type':'string','format':'email'} => "first.last+tag@mail.example.org"
            {'type':'string','format':'uri'} => "https://example.com:8443/a/b%20c?q=1&r=2#top"
            {'type':'string','format':'uri'} => "http://[::1]/"
            {'allOf':[{'type':'integer'},{'minimum':3},{'maximum':5}]} => 4
            {'allOf':[{'type':'object','properties':{'a':{'type':'integer'}},'required':['a']},{'properties':{'b':{'type':'string'}},'required':['b']}]} => {"a":1,"b":"x"}
            {'allOf':[{'$ref':'#/$defs/named'},{'type':'object','properties':{'age':{'type':'integer','minimum':0}}}],'$defs':{'named':{'type':'object','properties':{'name':{'type':'string'}},'required':['name']}}} => {"name":"x","age":3}
            {'allOf':[{'type':['string','integer']},{'anyOf':[{'type':'integer'},{'type':'boolean'}]}]} => 7
            {'allOf':[{'enum':['a','b',1]},{'type':'string'}]} => "b"
            """)
    void acceptsValidText(String schemaJson, String text) {
        assertTrue(accepts(schemaJson, text), text);
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'number','minimum':0,'maximum':1} => 1.0001
            {'type':'number','minimum':0,'maximum':1} => -0.5
            {'type':'number','minimum':0,'maximum':1} => 1e0
            {'type':'number','minimum':-2.75,'maximum':3.125} => -2.76
            {'type':'number','minimum':-2.75,'maximum':3.125} => 3.1251
            {'type':'number','exclusiveMinimum':0,'exclusiveMaximum':0.5} => 0
            {'type':'number','exclusiveMinimum':0,'exclusiveMaximum':0.5} => 0.000
            {'type':'number','exclusiveMinimum':0,'exclusiveMaximum':0.5} => 0.5
            {'type':'string','format':'date'} => "2023-02-29"
            {'type':'string','format':'date'} => "1900-02-29"
            {'type':'string','format':'date'} => "2024-04-31"
            {'type':'string','format':'date'} => "2024-13-01"
            {'type':'string','format':'date-time'} => "2026-11-28T24:00:00Z"
            {'type':'string','format':'time'} => "12:00:00"
            {'type':'string','format':'duration'} => "PT"
            {'type':'string','format':'duration'} => "P1W2D"
            {'type':'string','format':'duration'} => "P1H"
            {'type':'string','format':'uuid'} => "123e4567-e89b-12d3-a456-42661417400"
            {'type':'string','format':'ipv4'} => "256.0.0.1"
            {'type':'string','format':'ipv4'} => "01.0.0.1"
            {'type':'string','format':'ipv6'} => "1::2::3"
            {'type':'string','format':'ipv6'} => "1:2:3:4:5:6:7:8:9"
            {'type':'string','format':'hostname'} => "-a.com"
            {'type':'string','format':'email'} => "a..b@example.com"
            {'type':'string','format':'email'} => "a@example"
            {'type':'string','format':'uri'} => "example.com/a"
            {'allOf':[{'type':'integer'},{'minimum':3},{'maximum':5}]} => 6
            {'allOf':[{'type':'integer'},{'minimum':3},{'maximum':5}]} => 4.5
            {'allOf':[{'type':'object','properties':{'a':{'type':'integer'}},'required':['a']},{'properties':{'b':{'type':'string'}},'required':['b']}]} => {"a":1}
            {'allOf':[{'type':'object','properties':{'a':{'type':'integer'}},'additionalProperties':false},{'properties':{'b':{'type':'string'}}}]} => {"b":"x"}
            {'allOf':[{'enum':['a','b',1]},{'type':'string'}]} => 1
            """)
    void refusesInvalidText(String schemaJson, String text) {
        assertFalse(accepts(schemaJson, text), text);
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'string','format':'iri'} => format
            {'type':'string','format':'email','pattern':'^a'} => pattern
            {'type':'string','format':'date','maxLength':5} => maxLength
            {'allOf':[{'type':'string','pattern':'a'},{'pattern':'b'}]} => allOf
            {'allOf':[{'type':'string'},{'type':'integer'}]} => allOf
            {'allOf':[{'properties':{'a':{}},'additionalProperties':false},{'properties':{'b':{}},'required':['b']}]} => allOf
            {'type':'number','minimum':5,'exclusiveMaximum':5} => minimum
            {'type':'number','maximum':1e300} => maximum
            """)
    void refusesWhatCannotBeConstrained(String schemaJson, String keyword) {
        UnsupportedSchemaException e =
                assertThrows(UnsupportedSchemaException.class, () -> JsonSchemaGrammar.forSchema(schema(schemaJson)));
        assertEquals(keyword, e.keyword());
        assertTrue(e.getMessage().contains(keyword), e.getMessage());
    }
}
