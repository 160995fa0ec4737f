package dev.glimmer.server.deploy;

import io.fabric8.kubernetes.api.model.ObjectMeta;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The Gateway API Inference Extension's {@code InferencePool} ({@code inference.networking.k8s.io/v1}), typed after
 * its API reference: fabric8 has no model of it. Read with unknown fields failing, and {@link #check()} applies
 * the reference's validations, so that a misspelled or out-of-range field fails as the API server would fail it.
 */
record InferencePool(String apiVersion, String kind, ObjectMeta metadata, Spec spec) {
    static final String API_VERSION = "inference.networking.k8s.io/v1";
    private static final Pattern DNS_SUBDOMAIN =
            Pattern.compile("^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    private static final Pattern KIND = Pattern.compile("^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$");

    record Spec(LabelSelector selector, List<Port> targetPorts, EndpointPickerRef endpointPickerRef) {}

    /** Only {@code matchLabels}: the pool's selector is deliberately simpler than Kubernetes' own. */
    record LabelSelector(Map<String, String> matchLabels) {}

    record Port(Integer number) {}

    record EndpointPickerRef(String group, String kind, String name, Port port, String failureMode) {}

    /** @throws IllegalArgumentException naming the first field the API reference would refuse */
    void check() {
        require(API_VERSION.equals(apiVersion), "apiVersion must be " + API_VERSION + ", is " + apiVersion);
        require("InferencePool".equals(kind), "kind must be InferencePool, is " + kind);
        require(metadata != null && metadata.getName() != null, "metadata.name is required");
        require(spec != null, "spec is required");
        require(
                spec.selector() != null && spec.selector().matchLabels() != null,
                "spec.selector.matchLabels is required");
        int labels = spec.selector().matchLabels().size();
        require(labels >= 1 && labels <= 64, "spec.selector.matchLabels needs 1 to 64 labels, has " + labels);
        require(
                spec.targetPorts() != null && spec.targetPorts().size() == 1,
                "spec.targetPorts takes exactly one port");
        checkPort(spec.targetPorts().getFirst(), "spec.targetPorts[0]");
        EndpointPickerRef epp = spec.endpointPickerRef();
        require(epp != null, "spec.endpointPickerRef is required");
        require(
                epp.name() != null && !epp.name().isEmpty() && epp.name().length() <= 253,
                "spec.endpointPickerRef.name is required (1 to 253 characters)");
        require(epp.group() == null || DNS_SUBDOMAIN.matcher(epp.group()).matches(), "spec.endpointPickerRef.group");
        require(epp.kind() == null || KIND.matcher(epp.kind()).matches(), "spec.endpointPickerRef.kind");
        require(
                epp.failureMode() == null || List.of("FailOpen", "FailClose").contains(epp.failureMode()),
                "spec.endpointPickerRef.failureMode must be FailOpen or FailClose, is " + epp.failureMode());
        // A Service (the default kind) needs its port.
        if (epp.kind() == null || epp.kind().equals("Service")) {
            require(epp.port() != null, "spec.endpointPickerRef.port is required for a Service");
            checkPort(epp.port(), "spec.endpointPickerRef.port");
        }
    }

    private static void checkPort(Port port, String where) {
        require(
                port != null && port.number() != null && port.number() >= 1 && port.number() <= 65535,
                where + ".number must be in [1, 65535]");
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new IllegalArgumentException("InferencePool: " + what);
        }
    }
}
