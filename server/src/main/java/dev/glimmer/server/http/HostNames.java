package dev.glimmer.server.http;

import java.util.Locale;
import java.util.Set;

/**
 * Host names as the Host header and the configuration give them: {@code name}, {@code name:port},
 * {@code [v6]:port}, and the names of this machine's loopback interface: the one list of them for the
 * Host check ({@link HostFilter}) and CORS ({@link CorsFilter}).
 */
public final class HostNames {
    /** The names a browser uses for this machine: a page of another site can never be served under them. */
    public static final Set<String> LOOPBACK = Set.of("localhost", "127.0.0.1", "[::1]");

    /**
     * The host part of {@code authority} in lower case, without its port and a final dot: {@code Localhost.:8080}
     * is {@code localhost}, {@code [::1]:80} is {@code [::1]}; an IPv6 address without brackets gets them.
     */
    public static String name(String authority) {
        String a = authority.strip().toLowerCase(Locale.ROOT);
        String name;
        if (a.startsWith("[")) {
            int end = a.indexOf(']');
            name = end < 0 ? a : a.substring(0, end + 1);
        } else if (a.indexOf(':') != a.lastIndexOf(':')) {
            name = "[" + a + "]";
        } else {
            int colon = a.indexOf(':');
            name = colon < 0 ? a : a.substring(0, colon);
        }
        return name.endsWith(".") ? name.substring(0, name.length() - 1) : name;
    }

    public static boolean isLoopback(String name) {
        return LOOPBACK.contains(name);
    }

    private HostNames() {}
}
