package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Serves only requests whose {@code Host} header names this server: the defence against DNS rebinding.
 * A hostile page can make the browser send requests to 127.0.0.1 under the page's own name (its DNS
 * record re-pointed at 127.0.0.1), which makes the page same-origin with the server, so CORS no longer
 * stops it from reading the answers; but the browser still sends that name as the {@code Host}, and
 * this filter refuses it with a 403, on every route (API, web chat, metrics, static files).
 *
 * <p>Which names: while the server listens on a loopback address, {@code localhost}, {@code 127.0.0.1},
 * {@code [::1]} and the names given with {@code --allowed-hosts} (any port). Listening on another address
 * ({@code --host 0.0.0.0}) the user has chosen to be reachable under names this server cannot know:
 * then only the names given are checked (plus the loopback ones), and without any the filter is not
 * installed. {@code *} among the names turns the check off. A request without a {@code Host} header
 * (HTTP/1.0 tools) is served: browsers always send one.
 */
public final class HostFilter implements Filter {
    private final Set<String> allowed;

    private HostFilter(Set<String> allowed) {
        this.allowed = allowed;
    }

    /**
     * The filter for a server bound to {@code bindHost} with {@code allowedHosts} configured, or empty
     * where no name is to be checked.
     */
    public static Optional<HostFilter> forServer(String bindHost, List<String> allowedHosts) {
        if (allowedHosts.contains("*") || allowedHosts.isEmpty() && !isLoopbackAddress(bindHost)) {
            return Optional.empty();
        }
        Set<String> allowed = new LinkedHashSet<>(HostNames.LOOPBACK);
        allowedHosts.forEach(h -> allowed.add(HostNames.name(h)));
        return Optional.of(new HostFilter(Set.copyOf(allowed)));
    }

    private static boolean isLoopbackAddress(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false; // the server could not bind it anyway
        }
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        Optional<String> host = req.headers().first(HeaderNames.HOST);
        if (host.isEmpty() || allowed.contains(HostNames.name(host.get()))) {
            chain.proceed();
            return;
        }
        ErrorResponses.send(
                req,
                res,
                ApiException.forbidden(
                        "this server does not answer to the host '"
                                + host.get().strip()
                                + "' (it answers localhost, 127.0.0.1, [::1] and the names given with"
                                + " --allowed-hosts)",
                        "host_not_allowed"));
    }
}
