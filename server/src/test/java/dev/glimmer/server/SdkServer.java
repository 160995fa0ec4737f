package dev.glimmer.server;

import com.anthropic.client.AnthropicClient;
import com.anthropic.client.okhttp.AnthropicOkHttpClient;
import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import java.util.Map;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A test server on the tiny model for one test class, with the official OpenAI and Anthropic clients
 * pointed at it (never retrying):
 * {@code @RegisterExtension static final SdkServer server = new SdkServer(Map.of(), "none");}
 */
public final class SdkServer implements BeforeAllCallback, AfterAllCallback {
    private final Map<String, String> overrides;
    private final String apiKey;
    private GlimmerApp app;
    private OpenAIClient openai;
    private AnthropicClient anthropic;

    /**
     * @param overrides configuration keys for {@link TestServer#start}
     * @param apiKey    the key the clients send
     */
    public SdkServer(Map<String, String> overrides, String apiKey) {
        this.overrides = overrides;
        this.apiKey = apiKey;
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        app = TestServer.start(overrides);
        openai = OpenAIOkHttpClient.builder()
                .baseUrl("http://127.0.0.1:" + app.port() + "/v1")
                .apiKey(apiKey)
                .maxRetries(0)
                .build();
        // Anthropic's client adds /v1 to its paths itself.
        anthropic = AnthropicOkHttpClient.builder()
                .baseUrl("http://127.0.0.1:" + app.port())
                .apiKey(apiKey)
                .maxRetries(0)
                .build();
    }

    @Override
    public void afterAll(ExtensionContext context) {
        openai.close();
        anthropic.close();
        app.close();
    }

    public GlimmerApp app() {
        return app;
    }

    public OpenAIClient openai() {
        return openai;
    }

    public AnthropicClient anthropic() {
        return anthropic;
    }
}
