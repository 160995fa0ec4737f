package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.Json;
import dev.glimmer.server.inference.DemoModel;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModelFacts;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.nio.charset.StandardCharsets;

/**
 * {@code GET /v1/models} and {@code GET /v1/models/{id}}: OpenAI's model objects, with the model's
 * facts under {@code meta} (the backend serving it and why, and {@code demo: true} when the weights are random).
 */
public record ModelRoutes(ModelHost host) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.get("/v1/models", this::list).get("/v1/models/{id}", this::one);
    }

    private void list(ServerRequest req, ServerResponse res) {
        ObjectNode root = Json.object();
        root.put("object", "list");
        ArrayNode data = root.putArray("data");
        data.add(model(host.require().facts()));
        send(res, root);
    }

    private void one(ServerRequest req, ServerResponse res) {
        ServedModelFacts facts = host.require().facts();
        String id = req.path().pathParameters().get("id");
        if (!id.equals(facts.id())) {
            throw ApiException.notFound(
                    "the model '" + id + "' does not exist; this server serves '" + facts.id() + "'",
                    "model",
                    "model_not_found");
        }
        send(res, model(facts));
    }

    static ObjectNode model(ServedModelFacts facts) {
        ObjectNode m = Json.object();
        m.put("id", facts.id());
        m.put("object", "model");
        m.put("created", facts.created());
        m.put("owned_by", "glimmer");
        // One put per fact, as GenerateCommand's --json timings: plain JSON building, no shared shape to extract.
        ObjectNode meta = m.putObject("meta");
        meta.put("n_ctx", facts.ctx());
        meta.put("n_params", facts.params());
        meta.put("quant", facts.quant());
        meta.put("demo", facts.demo());
        meta.put("backend", facts.backend());
        meta.put("backend_reason", facts.backendReason());
        if (facts.demo()) {
            meta.put("default_max_tokens", DemoModel.MAX_TOKENS);
            meta.put(
                    "note",
                    "demo model: random weights, its output is meaningless; an answer stops after "
                            + DemoModel.MAX_TOKENS
                            + " tokens unless the request sets max_tokens, and thinks only when asked");
        }
        return m;
    }

    static void send(ServerResponse res, Object body) {
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(Json.write(body).getBytes(StandardCharsets.UTF_8));
    }
}
