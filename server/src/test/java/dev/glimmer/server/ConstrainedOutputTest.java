package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SchemaValidatorsConfig;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.errors.BadRequestException;
import com.openai.models.FunctionDefinition;
import com.openai.models.FunctionParameters;
import com.openai.models.ResponseFormatJsonObject;
import com.openai.models.ResponseFormatJsonSchema;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionMessageFunctionToolCall;
import com.openai.models.chat.completions.ChatCompletionNamedToolChoice;
import com.openai.models.chat.completions.ChatCompletionToolChoiceOption;
import com.openai.models.chat.completions.StructuredChatCompletion;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Replies constrained to JSON schemas and forced tool calls, through the official OpenAI Java client
 * against a real server with the tiny oracle model. Its weights are random, so what it writes is
 * noise; the grammar alone makes it valid, and an independent validator (networknt) checks it.
 */
class ConstrainedOutputTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final int SEEDS = 3;

    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of(), "none");

    /** 34 schemas, every supported keyword and format among them. */
    static final List<String> SCHEMAS = List.of(
            "{'type':'object','properties':{'name':{'type':'string','maxLength':20},'age':{'type':'integer',"
                    + "'minimum':0,'maximum':120}},'required':['name','age'],'additionalProperties':false}",
            "{'type':'string'}",
            "{'type':'string','minLength':5,'maxLength':10}",
            "{'type':'string','pattern':'^[A-Z]{3}-[0-9]{4}$'}",
            "{'type':'string','pattern':'^(north|south|east|west)$'}",
            "{'type':'integer'}",
            "{'type':'integer','minimum':-273,'maximum':1000}",
            "{'type':'number'}",
            "{'type':'boolean'}",
            "{'type':'null'}",
            "{'enum':['low','medium','high',1,true]}",
            "{'const':{'ok':true,'items':[1,'two',null]}}",
            "{'type':['number','string','null'],'maxLength':6}",
            "{'anyOf':[{'type':'integer','minimum':0,'maximum':10},{'type':'array','items':{'type':'boolean'},"
                    + "'maxItems':2}]}",
            "{'oneOf':[{'type':'object','properties':{'cat':{'const':'meow'}},'required':['cat']},"
                    + "{'type':'object','properties':{'dog':{'const':'woof'}},'required':['dog']}]}",
            "{'type':'array','items':{'type':'integer','minimum':1,'maximum':6},'minItems':3,'maxItems':3}",
            "{'type':'array','items':{'type':'string','maxLength':5},'maxItems':4}",
            "{'type':'object','properties':{'title':{'type':'string','maxLength':15},'done':{'type':'boolean'},"
                    + "'priority':{'enum':['p0','p1','p2']},'tags':{'type':'array','items':{'type':'string',"
                    + "'pattern':'^#[a-z]{1,6}$'},'maxItems':3}},'required':['title','done']}",
            "{'type':'object','additionalProperties':{'type':'integer','minimum':0}}",
            "{'type':'object','properties':{'from':{'$ref':'#/$defs/place'},'to':{'$ref':'#/$defs/place'}},"
                    + "'required':['from','to'],'$defs':{'place':{'type':'object','properties':{'city':{'type':"
                    + "'string','maxLength':10},'zip':{'type':'string','pattern':'^[0-9]{5}$'}},'required':['city']}}}",
            "{'$ref':'#/$defs/list','$defs':{'list':{'type':'object','properties':{'head':{'type':'integer',"
                    + "'minimum':0,'maximum':9},'tail':{'anyOf':[{'$ref':'#/$defs/list'},{'type':'null'}]}},"
                    + "'required':['head','tail']}}}",
            "{'type':'object','properties':{'empty':{'type':'object','additionalProperties':false},"
                    + "'none':{'type':'array','maxItems':0}},'required':['empty','none']}",
            "{'type':'string','format':'date-time'}",
            "{'type':'string','format':'date'}",
            "{'type':'string','format':'uuid'}",
            "{'type':'string','format':'email'}",
            "{'type':'string','format':'uri','minLength':1,'maxLength':2083}",
            "{'type':'string','format':'hostname'}",
            "{'type':'array','items':{'type':'string','format':'ipv4'},'maxItems':2}",
            "{'type':'string','format':'ipv6'}",
            "{'type':'number','minimum':0,'maximum':1}",
            "{'type':'number','exclusiveMinimum':-2.5,'exclusiveMaximum':2.5}",
            "{'allOf':[{'type':'object','properties':{'id':{'type':'integer','minimum':1}},'required':['id']},"
                    + "{'properties':{'at':{'type':'string','format':'date-time'}},'required':['at']}]}",
            "{'allOf':[{'$ref':'#/$defs/level'}],'description':'as Pydantic 1 wrote a field of an enum',"
                    + "'$defs':{'level':{'enum':['low','high']}}}");

    // As JsonSchemaGrammarTest's: the engine's test classes are not on this module's test class path.
    static JsonNode schema(String s) {
        try {
            return JSON.readTree(s.replace('\'', '"'));
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
    }

    static void assertValid(JsonNode schema, String text) {
        JsonNode value;
        try {
            value = JSON.readTree(text);
        } catch (Exception e) {
            throw new AssertionError("not JSON: " + text, e);
        }
        Set<ValidationMessage> errors = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012)
                .getSchema(
                        schema,
                        SchemaValidatorsConfig.builder()
                                .formatAssertionsEnabled(true)
                                .build())
                .validate(value);
        assertTrue(errors.isEmpty(), () -> text + " breaks " + schema + ": " + errors);
    }

    static ResponseFormatJsonSchema format(JsonNode schema) {
        ResponseFormatJsonSchema.JsonSchema.Schema.Builder s = ResponseFormatJsonSchema.JsonSchema.Schema.builder();
        schema.properties()
                .forEach(e -> s.putAdditionalProperty(
                        e.getKey(), JsonValue.from(JSON.convertValue(e.getValue(), Object.class))));
        return ResponseFormatJsonSchema.builder()
                .jsonSchema(ResponseFormatJsonSchema.JsonSchema.builder()
                        .name("answer")
                        .schema(s.build())
                        .strict(true)
                        .build())
                .build();
    }

    static ChatCompletionCreateParams.Builder ask(boolean thinking) {
        return ChatCompletionCreateParams.builder()
                .model("tiny-f32")
                .addUserMessage("Describe a fox in JSON.")
                .temperature(1.0)
                .maxCompletionTokens(64)
                .putAdditionalBodyProperty("chat_template_kwargs", JsonValue.from(Map.of("enable_thinking", thinking)));
    }

    @Test
    void everySchemaGivesValidJsonForEverySeed() {
        for (String s : SCHEMAS) {
            JsonNode schema = schema(s);
            for (int seed = 0; seed < SEEDS; seed++) {
                ChatCompletion c = server.openai()
                        .chat()
                        .completions()
                        .create(ask(false)
                                .responseFormat(format(schema))
                                .seed(seed)
                                .build());
                ChatCompletion.Choice choice = c.choices().getFirst();
                assertEquals(ChatCompletion.Choice.FinishReason.STOP, choice.finishReason(), s);
                assertValid(schema, choice.message().content().orElseThrow());
            }
        }
    }

    @Test
    void afterThinkingTheAnswerIsValid() {
        JsonNode schema = schema(SCHEMAS.getFirst());
        for (int seed = 0; seed < SEEDS; seed++) {
            ChatCompletion c = server.openai()
                    .chat()
                    .completions()
                    .create(ask(true).responseFormat(format(schema)).seed(seed).build());
            var message = c.choices().getFirst().message();
            assertTrue(message._additionalProperties().containsKey("reasoning_content"), "the model thought first");
            assertValid(schema, message.content().orElseThrow());
        }
    }

    @Test
    void aStreamedAnswerIsValidToo() {
        JsonNode schema = schema(SCHEMAS.get(17));
        StringBuilder content = new StringBuilder();
        try (StreamResponse<ChatCompletionChunk> stream = server.openai()
                .chat()
                .completions()
                .createStreaming(
                        ask(false).responseFormat(format(schema)).seed(7).build())) {
            stream.stream()
                    .forEach(chunk ->
                            chunk.choices().forEach(ch -> ch.delta().content().ifPresent(content::append)));
        }
        assertValid(schema, content.toString());
    }

    @Test
    void jsonObjectGivesAnObject() {
        for (int seed = 0; seed < SEEDS; seed++) {
            ChatCompletion c = server.openai()
                    .chat()
                    .completions()
                    .create(ask(false)
                            .responseFormat(ResponseFormatJsonObject.builder().build())
                            .seed(seed)
                            .build());
            assertValid(
                    schema("{'type':'object'}"),
                    c.choices().getFirst().message().content().orElseThrow());
        }
    }

    /** The client's structured outputs: it derives the schema from a class and parses the reply into it. */
    record Fox(String name, long age, boolean hungry, List<String> friends) {}

    @Test
    void theClientsStructuredOutputsParse() {
        StructuredChatCompletion<Fox> c = server.openai()
                .chat()
                .completions()
                .create(ask(false).maxCompletionTokens(120).seed(3L).build().toBuilder()
                        .responseFormat(Fox.class)
                        .build());
        Fox fox = c.choices().getFirst().message().content().orElseThrow();
        assertTrue(fox.friends() != null);
    }

    /** What Pydantic 2 writes for a model with the usual field types (EmailStr, UUID, HttpUrl, datetime, timedelta, bounds). */
    static final String PYDANTIC_USER = """
            {"$defs":{"Address":{"properties":{"city":{"title":"City","type":"string","maxLength":12},
            "zip":{"pattern":"^\\\\d{5}$","title":"Zip","type":"string"}},"required":["city","zip"],"title":"Address",
            "type":"object"}},"properties":{"id":{"format":"uuid","title":"Id","type":"string"},
            "email":{"format":"email","title":"Email","type":"string"},
            "homepage":{"anyOf":[{"format":"uri","maxLength":2083,"minLength":1,"type":"string"},{"type":"null"}],
            "default":null,"title":"Homepage"},"born":{"format":"date","title":"Born","type":"string"},
            "created":{"format":"date-time","title":"Created","type":"string"},
            "score":{"maximum":1,"minimum":0,"title":"Score","type":"number"},
            "age":{"exclusiveMaximum":150,"exclusiveMinimum":0,"title":"Age","type":"integer"},
            "address":{"$ref":"#/$defs/Address"},"server":{"format":"ipv4","title":"Server","type":"string"},
            "wait":{"format":"duration","title":"Wait","type":"string"}},
            "required":["id","email","born","created","score","age","address","server"],"title":"User","type":"object"}""";

    /** What zod-to-json-schema writes for an object, an intersection and a union of formats. */
    static final String ZOD_EVENT = """
            {"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":10},
            "contact":{"type":"string","format":"email"},"when":{"type":"string","format":"date-time"},
            "ip":{"anyOf":[{"type":"string","format":"ipv4"},{"type":"string","format":"ipv6"}]},
            "rating":{"type":"number","minimum":1,"maximum":5},
            "owner":{"allOf":[{"type":"object","properties":{"id":{"type":"string","format":"uuid"}},"required":["id"]},
            {"type":"object","properties":{"since":{"type":"string","format":"date"}},"required":["since"]}]}},
            "required":["name","contact","when","ip","rating","owner"],"additionalProperties":false,
            "$schema":"http://json-schema.org/draft-07/schema#"}""";

    @ParameterizedTest
    @CsvSource({"PYDANTIC_USER", "ZOD_EVENT"})
    void pydanticAndZodSchemasAreFollowed(String which) {
        JsonNode schema;
        try {
            schema = JSON.readTree(which.equals("ZOD_EVENT") ? ZOD_EVENT : PYDANTIC_USER);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
        for (int seed = 0; seed < SEEDS; seed++) {
            ChatCompletion c = server.openai()
                    .chat()
                    .completions()
                    .create(ask(false)
                            .maxCompletionTokens(600)
                            .responseFormat(format(schema))
                            .seed(seed)
                            .build());
            ChatCompletion.Choice choice = c.choices().getFirst();
            assertEquals(ChatCompletion.Choice.FinishReason.STOP, choice.finishReason(), which);
            assertValid(schema, choice.message().content().orElseThrow());
        }
    }

    static FunctionDefinition function(String name, String parameters) {
        FunctionParameters.Builder p = FunctionParameters.builder();
        schema(parameters)
                .properties()
                .forEach(e -> p.putAdditionalProperty(
                        e.getKey(), JsonValue.from(JSON.convertValue(e.getValue(), Object.class))));
        return FunctionDefinition.builder().name(name).parameters(p.build()).build();
    }

    static final String WEATHER = "{'type':'object','properties':{'city':{'type':'string','maxLength':12},"
            + "'days':{'type':'integer','minimum':1,'maximum':7},'units':{'type':'string','enum':['C','F']}},"
            + "'required':['city','days']}";
    static final String ALARM = "{'type':'object','properties':{'hour':{'type':'integer','minimum':0,'maximum':23},"
            + "'label':{'type':['string','null'],'maxLength':8},'repeat':{'type':'array','items':{'enum':['mon','tue']},"
            + "'maxItems':2}},'required':['hour','repeat']}";

    static ChatCompletionCreateParams.Builder withTools(boolean thinking) {
        return ask(thinking)
                .addFunctionTool(function("get_weather", WEATHER))
                .addFunctionTool(function("set_alarm", ALARM));
    }

    static void assertCallValid(ChatCompletion c, String expectedName) {
        ChatCompletion.Choice choice = c.choices().getFirst();
        assertEquals(ChatCompletion.Choice.FinishReason.TOOL_CALLS, choice.finishReason());
        List<com.openai.models.chat.completions.ChatCompletionMessageToolCall> calls =
                choice.message().toolCalls().orElseThrow();
        assertEquals(1, calls.size());
        ChatCompletionMessageFunctionToolCall call = calls.getFirst().asFunction();
        String name = call.function().name();
        if (expectedName != null) {
            assertEquals(expectedName, name);
        }
        assertValid(
                schema(name.equals("get_weather") ? WEATHER : ALARM),
                call.function().arguments());
    }

    @Test
    void toolChoiceRequiredForcesAValidCall() {
        for (int seed = 0; seed < 2 * SEEDS; seed++) {
            assertCallValid(
                    server.openai()
                            .chat()
                            .completions()
                            .create(withTools(seed % 2 == 0)
                                    .toolChoice(ChatCompletionToolChoiceOption.Auto.REQUIRED)
                                    .seed(seed)
                                    .build()),
                    null);
        }
    }

    @Test
    void aNamedFunctionIsTheOneCalled() {
        for (int seed = 0; seed < SEEDS; seed++) {
            assertCallValid(
                    server.openai()
                            .chat()
                            .completions()
                            .create(withTools(false)
                                    .toolChoice(ChatCompletionNamedToolChoice.builder()
                                            .function(ChatCompletionNamedToolChoice.Function.builder()
                                                    .name("set_alarm")
                                                    .build())
                                            .build())
                                    .seed(seed)
                                    .build()),
                    "set_alarm");
        }
    }

    @ParameterizedTest
    @CsvSource(delimiterString = " => ", quoteCharacter = '~', textBlock = """
            {'type':'string','format':'iri'} => format
            {'type':'object','properties':{'n':{'type':'number','multipleOf':5}}} => multipleOf
            {'type':'array','items':{'type':'integer'},'uniqueItems':true} => uniqueItems
            {'allOf':[{'type':'string'},{'type':'integer'}]} => allOf
            {'type':'object','properties':{'a':{'not':{'type':'null'}}}} => not
            {'type':'string','pattern':'(?<=a)b'} => pattern
            """)
    void unsupportedKeywordsAre400sThatNameThem(String schema, String keyword) {
        BadRequestException e = assertThrows(
                BadRequestException.class,
                () -> server.openai()
                        .chat()
                        .completions()
                        .create(ask(false)
                                .responseFormat(format(schema(schema)))
                                .build()));
        assertEquals(400, e.statusCode());
        assertTrue(e.getMessage().contains(keyword), e.getMessage());
        assertFalse(e.getMessage().contains("Exception"), e.getMessage());
    }

    @Test
    void anUnsupportedToolSchemaIsA400() {
        BadRequestException e = assertThrows(
                BadRequestException.class,
                () -> server.openai()
                        .chat()
                        .completions()
                        .create(ask(false)
                                .addFunctionTool(function(
                                        "f",
                                        "{'type':'object','properties':{'x':{'type':'string'," + "'format':'iri'}}}"))
                                .toolChoice(ChatCompletionToolChoiceOption.Auto.REQUIRED)
                                .build()));
        assertTrue(e.getMessage().contains("format"), e.getMessage());
    }
}
