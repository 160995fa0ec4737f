package dev.glimmer.server.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MappingIterator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.KubernetesResource;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.autoscaling.v2.HorizontalPodAutoscaler;
import io.fabric8.kubernetes.api.model.gatewayapi.v1.HTTPRoute;
import io.fabric8.kubernetes.api.model.gatewayapi.v1.HTTPRouteRule;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The manifests under {@code deploy/} read into fabric8's typed Kubernetes model (and, for the InferencePool, which
 * fabric8 does not model, into {@link InferencePool}), so that a misspelled field or a wrong type fails the build;
 * then what ties them together: the same labels, ports, names and probe paths, and every {@code GLIMMER_*} variable
 * one the server reads. No cluster runs here (docs/SCALE_OUT.md says what was not run).
 */
class DeployManifestsTest {
    /** The manifests, relative to the server module (Maven runs tests there). */
    static final Path DEPLOY = Path.of("..", "deploy");

    static final ObjectMapper YAML =
            new ObjectMapper(new YAMLFactory()).enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    static final Map<String, Class<?>> KINDS = Map.of(
            "apps/v1 Deployment",
            Deployment.class,
            "v1 Service",
            Service.class,
            "autoscaling/v2 HorizontalPodAutoscaler",
            HorizontalPodAutoscaler.class,
            "gateway.networking.k8s.io/v1 HTTPRoute",
            HTTPRoute.class,
            InferencePool.API_VERSION + " InferencePool",
            InferencePool.class);

    static Map<Class<?>, Object> byKind;

    @BeforeAll
    static void read() throws IOException {
        byKind = new HashMap<>();
        try (Stream<Path> files = Files.list(DEPLOY)) {
            for (Path file :
                    files.filter(f -> f.toString().endsWith(".yaml")).sorted().toList()) {
                for (Object o : parse(Files.readString(file), file.toString())) {
                    assertEquals(
                            null,
                            byKind.put(o.getClass(), o),
                            "two " + o.getClass().getSimpleName() + "s");
                }
            }
        }
        assertEquals(KINDS.size(), byKind.size(), "one of each kind: " + byKind.keySet());
    }

    /** Every document of {@code yaml}, typed by its apiVersion and kind; anything unknown fails, naming {@code where}. */
    static List<Object> parse(String yaml, String where) throws IOException {
        List<Object> out = new ArrayList<>();
        try (MappingIterator<JsonNode> docs = YAML.readerFor(JsonNode.class).readValues(yaml)) {
            while (docs.hasNext()) {
                JsonNode doc = docs.next();
                String type =
                        doc.path("apiVersion").asText() + " " + doc.path("kind").asText();
                Class<?> model = KINDS.get(type);
                if (model == null) {
                    fail(where + ": no model for " + type);
                }
                Object typed = YAML.treeToValue(doc, model);
                noUnknownFields(typed, where + ": " + type);
                if (typed instanceof InferencePool pool) {
                    pool.check();
                }
                out.add(typed);
            }
        }
        return out;
    }

    /**
     * fabric8's classes keep fields they do not know in {@code additionalProperties} rather than failing: walks the
     * object and fails at the first such field, with its path.
     */
    static void noUnknownFields(Object o, String path) {
        if (o == null || o instanceof String || o instanceof Number || o instanceof Boolean || o instanceof Enum<?>) {
            return;
        }
        if (o instanceof List<?> list) {
            for (int i = 0; i < list.size(); i++) {
                noUnknownFields(list.get(i), path + "[" + i + "]");
            }
            return;
        }
        if (o instanceof Map<?, ?> map) {
            map.forEach((k, v) -> noUnknownFields(v, path + "." + k));
            return;
        }
        if (o instanceof Record r) {
            for (var c : r.getClass().getRecordComponents()) {
                noUnknownFields(invoke(c.getAccessor(), r), path + "." + c.getName());
            }
            return;
        }
        if (!(o instanceof KubernetesResource)) {
            return; // Quantity, IntOrString, ...: values, not objects with fields
        }
        for (Method m : o.getClass().getMethods()) {
            if (m.getParameterCount() != 0
                    || Modifier.isStatic(m.getModifiers())
                    || !m.getName().startsWith("get")
                    || m.getDeclaringClass() == Object.class) {
                continue;
            }
            Object value = invoke(m, o);
            if (m.getName().equals("getAdditionalProperties")) {
                if (value instanceof Map<?, ?> extra && !extra.isEmpty()) {
                    fail(path + ": unknown field(s) " + extra.keySet());
                }
                continue;
            }
            String field =
                    Character.toLowerCase(m.getName().charAt(3)) + m.getName().substring(4);
            noUnknownFields(value, path + "." + field);
        }
    }

    private static Object invoke(Method m, Object o) {
        try {
            return m.invoke(o);
        } catch (IllegalAccessException | InvocationTargetException e) {
            throw new IllegalStateException(m.toString(), e);
        }
    }

    @SuppressWarnings("unchecked")
    static <T> T the(Class<T> kind) {
        return (T) byKind.get(kind);
    }

    @Test
    void aMisspelledFieldFails() {
        String deployment = """
                apiVersion: apps/v1
                kind: Deployment
                metadata: {name: x}
                spec:
                  template:
                    spec:
                      containers:
                        - name: x
                          readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSecond: 2}
                """;
        AssertionError e = assertThrows(AssertionError.class, () -> parse(deployment, "test"));
        assertTrue(e.getMessage().contains("readinessProbe: unknown field(s) [periodSecond]"), e.getMessage());
        String pool = """
                apiVersion: inference.networking.k8s.io/v1
                kind: InferencePool
                metadata: {name: x}
                spec:
                  selector: {matchLabels: {app: x}}
                  targetPortNumber: 8080
                """;
        assertThrows(IOException.class, () -> parse(pool, "test"), "an InferencePool field of an older version");
        String badMode = pool.replace("targetPortNumber: 8080", """
                targetPorts: [{number: 8080}]
                  endpointPickerRef: {name: epp, port: {number: 9002}, failureMode: FailSoft}""");
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> parse(badMode, "test"));
        assertTrue(bad.getMessage().contains("failureMode"), bad.getMessage());
    }

    @Test
    void theManifestsAgreeWithEachOtherAndWithTheServer() {
        Deployment deployment = the(Deployment.class);
        Map<String, String> podLabels =
                deployment.getSpec().getTemplate().getMetadata().getLabels();
        assertEquals(deployment.getSpec().getSelector().getMatchLabels(), podLabels);
        Container glimmer =
                deployment.getSpec().getTemplate().getSpec().getContainers().getFirst();
        int port = glimmer.getPorts().getFirst().getContainerPort();
        assertEquals("/health", glimmer.getLivenessProbe().getHttpGet().getPath());
        assertEquals("/health", glimmer.getStartupProbe().getHttpGet().getPath());
        assertEquals("/ready", glimmer.getReadinessProbe().getHttpGet().getPath());
        assertTrue(glimmer.getResources().getLimits().containsKey("nvidia.com/gpu"));
        assertTrue(deployment
                .getSpec()
                .getTemplate()
                .getSpec()
                .getSecurityContext()
                .getRunAsNonRoot());

        Service service = the(Service.class);
        assertEquals(podLabels, service.getSpec().getSelector());
        assertEquals(
                glimmer.getPorts().getFirst().getName(),
                service.getSpec().getPorts().getFirst().getTargetPort().getStrVal());

        InferencePool pool = the(InferencePool.class);
        assertTrue(podLabels
                .entrySet()
                .containsAll(pool.spec().selector().matchLabels().entrySet()));
        assertEquals(port, pool.spec().targetPorts().getFirst().number());

        HTTPRoute route = the(HTTPRoute.class);
        HTTPRouteRule rule = route.getSpec().getRules().getFirst();
        assertEquals(pool.metadata().getName(), rule.getBackendRefs().getFirst().getName());
        assertEquals("InferencePool", rule.getBackendRefs().getFirst().getKind());
        assertEquals(
                "inference.networking.k8s.io", rule.getBackendRefs().getFirst().getGroup());

        HorizontalPodAutoscaler hpa = the(HorizontalPodAutoscaler.class);
        assertEquals(
                deployment.getMetadata().getName(),
                hpa.getSpec().getScaleTargetRef().getName());
        assertEquals("Deployment", hpa.getSpec().getScaleTargetRef().getKind());

        // Every GLIMMER_* variable is one the server reads (one it does not know would be ignored: it must change
        // the configuration), and the drain fits in the pod's grace period after the preStop pause.
        Map<String, String> env = new HashMap<>();
        for (EnvVar v : glimmer.getEnv()) {
            assertTrue(v.getName().startsWith("GLIMMER_"), v.getName());
            env.put(v.getName(), v.getValue());
            ServerConfig without = ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of());
            ServerConfig with = ServerConfigLoader.load(Optional.empty(), Map.of(v.getName(), v.getValue()), Map.of());
            assertFalse(without.equals(with), v.getName() + " changes nothing: not a Glimmer setting (or the default)");
        }
        ServerConfig config = ServerConfigLoader.load(Optional.empty(), env, Map.of());
        long preStop = glimmer.getLifecycle().getPreStop().getSleep().getSeconds();
        assertTrue(
                preStop + config.drainSeconds()
                        < deployment.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds(),
                "the drain must end before the pod is killed");
    }
}
