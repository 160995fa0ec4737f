package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.errors.BadRequestException;
import com.openai.models.FunctionDefinition;
import com.openai.models.FunctionParameters;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionMessageFunctionToolCall;
import com.openai.models.chat.completions.ChatCompletionStreamOptions;
import com.openai.models.chat.completions.ChatCompletionTokenLogprob;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionCreateParams;
import com.openai.models.models.Model;
import io.restassured.path.json.JsonPath;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The official OpenAI Java client, pointed at Glimmer, does not notice the difference. */
class OpenAiClientTest {
    @RegisterExtension
    static final SdkServer server = new SdkServer(Map.of("server.api-key", "sesame"), "sesame");

    /** What SDK users and agents send: some OpenAI model name, never this server's id. */
    static final String CLIENT_MODEL = "gpt-4o";

    static ChatCompletionCreateParams.Builder hello() {
        return ChatCompletionCreateParams.builder()
                .model(CLIENT_MODEL)
                .addUserMessage("Hello, world! Tell me a story about a fox.")
                .temperature(0.0)
                .maxCompletionTokens(10);
    }

    @Test
    void nonStreamingChat() {
        ChatCompletion c = server.openai().chat().completions().create(hello().build());
        assertEquals(1, c.choices().size());
        assertEquals(
                ChatCompletion.Choice.FinishReason.LENGTH,
                c.choices().getFirst().finishReason());
        assertEquals(10, c.usage().orElseThrow().completionTokens());
        assertEquals(24, c.usage().orElseThrow().promptTokens());
        assertTrue(c.choices().getFirst().message()._additionalProperties().containsKey("reasoning_content"));
        // Whatever name was sent, the answer names the model that served it.
        assertEquals("tiny-f32", c.model());
        assertTrue(
                c.systemFingerprint().orElseThrow().startsWith("fp_"),
                c.systemFingerprint().toString());
    }

    /** Current OpenAI clients send instructions as a developer message: it is the system message. */
    @Test
    void developerMessagesAreSystemMessages() {
        ChatCompletion developer = server.openai()
                .chat()
                .completions()
                .create(ChatCompletionCreateParams.builder()
                        .model(CLIENT_MODEL)
                        .addDeveloperMessage("Answer in one word.")
                        .addUserMessage("Hi")
                        .temperature(0.0)
                        .maxCompletionTokens(6)
                        .build());
        ChatCompletion system = server.openai()
                .chat()
                .completions()
                .create(ChatCompletionCreateParams.builder()
                        .model(CLIENT_MODEL)
                        .addSystemMessage("Answer in one word.")
                        .addUserMessage("Hi")
                        .temperature(0.0)
                        .maxCompletionTokens(6)
                        .build());
        assertEquals(
                system.usage().orElseThrow().promptTokens(),
                developer.usage().orElseThrow().promptTokens());
        assertEquals(
                system.choices().getFirst().message()._additionalProperties().get("reasoning_content"),
                developer.choices().getFirst().message()._additionalProperties().get("reasoning_content"));
    }

    /** A base URL without /v1 (a common client setting): the same routes answer at /chat/completions and /models. */
    @Test
    void baseUrlWithoutV1() {
        OpenAIClient bare = OpenAIOkHttpClient.builder()
                .baseUrl("http://127.0.0.1:" + server.app().port())
                .apiKey("sesame")
                .maxRetries(0)
                .build();
        try {
            ChatCompletion c = bare.chat().completions().create(hello().build());
            assertEquals(
                    server.openai()
                            .chat()
                            .completions()
                            .create(hello().build())
                            .choices()
                            .getFirst()
                            .message()
                            ._additionalProperties()
                            .get("reasoning_content"),
                    c.choices().getFirst().message()._additionalProperties().get("reasoning_content"));
            assertEquals("tiny-f32", bare.models().list().data().getFirst().id());
            assertEquals(
                    6,
                    bare.completions()
                            .create(CompletionCreateParams.builder()
                                    .model(CLIENT_MODEL)
                                    .prompt("Once upon a time")
                                    .maxTokens(6)
                                    .temperature(0.0)
                                    .build())
                            .usage()
                            .orElseThrow()
                            .completionTokens());
        } finally {
            bare.close();
        }
    }

    /** OpenAI clients look for this code to trim a conversation that outgrew the context. */
    @Test
    void promptsOverTheContextSayContextLengthExceeded() {
        BadRequestException e = assertThrows(
                BadRequestException.class,
                () -> server.openai()
                        .chat()
                        .completions()
                        .create(hello().messages(List.of())
                                .addUserMessage("fox ".repeat(1100))
                                .build()));
        assertEquals("context_length_exceeded", e.code().orElseThrow());
        assertEquals("messages", e.param().orElseThrow());
    }

    @Test
    void streamingChatWithUsageGivesTheSameText() {
        ChatCompletion whole = server.openai().chat().completions().create(hello().build());
        String wholeText = whole.choices()
                        .getFirst()
                        .message()
                        ._additionalProperties()
                        .get("reasoning_content")
                        .asString()
                        .orElseThrow()
                + whole.choices().getFirst().message().content().orElse("");
        StringBuilder text = new StringBuilder();
        List<ChatCompletionChunk> chunks = new ArrayList<>();
        try (StreamResponse<ChatCompletionChunk> stream = server.openai()
                .chat()
                .completions()
                .createStreaming(hello().streamOptions(ChatCompletionStreamOptions.builder()
                                .includeUsage(true)
                                .build())
                        .build())) {
            stream.stream().forEach(chunk -> {
                chunks.add(chunk);
                for (ChatCompletionChunk.Choice choice : chunk.choices()) {
                    JsonValue reasoning = choice.delta()._additionalProperties().get("reasoning_content");
                    if (reasoning != null) {
                        text.append(reasoning.asString().orElseThrow());
                    }
                    choice.delta().content().ifPresent(text::append);
                }
            });
        }
        assertEquals(wholeText, text.toString());
        ChatCompletionChunk last = chunks.getLast();
        assertTrue(last.choices().isEmpty());
        assertEquals(10, last.usage().orElseThrow().completionTokens());
        assertEquals(
                ChatCompletionChunk.Choice.FinishReason.LENGTH,
                chunks.get(chunks.size() - 2)
                        .choices()
                        .getFirst()
                        .finishReason()
                        .orElseThrow());
    }

    /**
     * A tool call forced by logit_bias and a repetition penalty: {@code <tool_call>} gets the largest
     * bias, the tool's one-token name the next, {@code </tool_call>} the next and {@code <|observation|>}
     * (end of generation) the smallest. Greedy picks the largest biased token not yet used; the penalty
     * (logit / 8 for used tokens) pushes used ones below the next. The user message is long enough to
     * keep the tool block's tokens out of the 64-token penalty window.
     */
    @Test
    void toolCallForcedByLogitBias() {
        List<Integer> tags = tokens("<tool_call></tool_call><|observation|>");
        List<Integer> name = tokens("z");
        assertEquals(3, tags.size());
        assertEquals(1, name.size());
        String longMessage = "Please tell me what the weather is like today, and then tell me once more, in a long"
                + " and polite answer with many words, as long as possible, with details about the clouds, the rain,"
                + " the sun, the temperature, the humidity, the wind and what people should wear when they go out.";
        ChatCompletionCreateParams params = ChatCompletionCreateParams.builder()
                .model(CLIENT_MODEL)
                .addUserMessage(longMessage)
                .temperature(0.0)
                .maxCompletionTokens(20)
                .addFunctionTool(FunctionDefinition.builder()
                        .name("z")
                        .description("the weather")
                        .parameters(FunctionParameters.builder()
                                .putAdditionalProperty("type", JsonValue.from("object"))
                                .putAdditionalProperty("properties", JsonValue.from(Map.of()))
                                .build())
                        .build())
                .logitBias(ChatCompletionCreateParams.LogitBias.builder()
                        .putAdditionalProperty(tags.get(0).toString(), JsonValue.from(100))
                        .putAdditionalProperty(name.getFirst().toString(), JsonValue.from(70))
                        .putAdditionalProperty(tags.get(1).toString(), JsonValue.from(40))
                        .putAdditionalProperty(tags.get(2).toString(), JsonValue.from(25))
                        .build())
                .putAdditionalBodyProperty("repeat_penalty", JsonValue.from(8))
                .putAdditionalBodyProperty("chat_template_kwargs", JsonValue.from(Map.of("enable_thinking", false)))
                .build();
        ChatCompletion c = server.openai().chat().completions().create(params);
        ChatCompletion.Choice choice = c.choices().getFirst();
        assertEquals(ChatCompletion.Choice.FinishReason.TOOL_CALLS, choice.finishReason());
        ChatCompletionMessageFunctionToolCall call =
                choice.message().toolCalls().orElseThrow().getFirst().asFunction();
        assertEquals("z", call.function().name());
        assertEquals("{}", call.function().arguments());
        assertEquals(4, c.usage().orElseThrow().completionTokens());
    }

    @Test
    void logprobs() {
        // Thinking off: every token is the reply's (the reasoning's have none: ChoicesPrefillLogprobsTest).
        ChatCompletion c = server.openai()
                .chat()
                .completions()
                .create(hello().logprobs(true)
                        .topLogprobs(2)
                        .putAdditionalBodyProperty(
                                "chat_template_kwargs", JsonValue.from(Map.of("enable_thinking", false)))
                        .build());
        List<ChatCompletionTokenLogprob> content =
                c.choices().getFirst().logprobs().orElseThrow().content().orElseThrow();
        assertEquals(10, content.size());
        for (ChatCompletionTokenLogprob lp : content) {
            assertEquals(2, lp.topLogprobs().size());
            assertEquals(lp.topLogprobs().getFirst().logprob(), lp.logprob(), 0.0);
        }
    }

    @Test
    void completions() {
        Completion c = server.openai()
                .completions()
                .create(CompletionCreateParams.builder()
                        .model(CLIENT_MODEL)
                        .prompt("Once upon a time")
                        .maxTokens(6)
                        .temperature(0.0)
                        .build());
        assertEquals(6, c.usage().orElseThrow().completionTokens());
        JsonPath raw = given().port(server.app().port())
                .header("Authorization", "Bearer sesame")
                .contentType("application/json")
                .body("{\"prompt\": \"Once upon a time\", \"max_tokens\": 6, \"temperature\": 0}")
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
        assertEquals(raw.getString("choices[0].text"), c.choices().getFirst().text());
    }

    /** A list of prompts: one choice each, in order, each the text that prompt alone gets. */
    @Test
    void completionsOfSeveralPrompts() {
        List<String> prompts = List.of("Once upon a time", "The fox", "Hello, world!");
        Completion batch = server.openai()
                .completions()
                .create(CompletionCreateParams.builder()
                        .model(CLIENT_MODEL)
                        .prompt(CompletionCreateParams.Prompt.ofArrayOfStrings(prompts))
                        .maxTokens(5)
                        .temperature(0.0)
                        .build());
        assertEquals(prompts.size(), batch.choices().size());
        long promptTokens = 0;
        for (int i = 0; i < prompts.size(); i++) {
            Completion one = server.openai()
                    .completions()
                    .create(CompletionCreateParams.builder()
                            .model(CLIENT_MODEL)
                            .prompt(prompts.get(i))
                            .maxTokens(5)
                            .temperature(0.0)
                            .build());
            assertEquals(i, batch.choices().get(i).index());
            assertEquals(one.choices().getFirst().text(), batch.choices().get(i).text());
            promptTokens += one.usage().orElseThrow().promptTokens();
        }
        assertEquals(promptTokens, batch.usage().orElseThrow().promptTokens());
        assertEquals(3 * 5, batch.usage().orElseThrow().completionTokens());
        // Streamed: each chunk names its prompt's choice; every choice gets its finish_reason.
        StringBuilder[] texts = {new StringBuilder(), new StringBuilder(), new StringBuilder()};
        List<String> finishes = new ArrayList<>();
        try (StreamResponse<Completion> stream = server.openai()
                .completions()
                .createStreaming(CompletionCreateParams.builder()
                        .model(CLIENT_MODEL)
                        .prompt(CompletionCreateParams.Prompt.ofArrayOfStrings(prompts))
                        .maxTokens(5)
                        .temperature(0.0)
                        .build())) {
            stream.stream()
                    .forEach(chunk -> chunk.choices().forEach(choice -> {
                        texts[(int) choice.index()].append(choice.text());
                        // Null until a choice's last chunk (the SDK's getter insists on a value).
                        choice._finishReason().asKnown().ifPresent(f -> finishes.add(choice.index() + ":" + f));
                    }));
        }
        for (int i = 0; i < prompts.size(); i++) {
            assertEquals(batch.choices().get(i).text(), texts[i].toString());
        }
        assertEquals(List.of("0:length", "1:length", "2:length"), finishes);
    }

    @Test
    void models() {
        List<Model> models = server.openai().models().list().data();
        assertEquals(1, models.size());
        assertEquals("tiny-f32", models.getFirst().id());
        assertEquals("tiny-f32", server.openai().models().retrieve("tiny-f32").id());
    }

    static List<Integer> tokens(String text) {
        return tokens(text, server.app().port());
    }

    /** The token ids of {@code text} (special tokens parsed) from the server on {@code port} (key "sesame"). */
    static List<Integer> tokens(String text, int port) {
        return given().port(port)
                .header("Authorization", "Bearer sesame")
                .contentType("application/json")
                .body(Map.of("content", text))
                .post("/tokenize")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath()
                .getList("tokens", Integer.class);
    }
}
