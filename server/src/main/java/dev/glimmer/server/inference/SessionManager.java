package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.SequencePool;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * Keeps the KV caches of recent conversations (sequences of the backend's {@link SequencePool})
 * within a memory budget so that a follow-up request
 * processes only its new tokens. A request takes the idle cache whose tokens share the longest
 * prefix with its prompt, truncated to that prefix ({@link #acquire}); when none shares anything it
 * gets a new cache, evicting least recently used idle caches to stay within the budget. A cache in
 * use by a running request is never evicted, matched or shared ({@link Session#inUse}).
 *
 * <p>Thread-safe; the scheduler is the only caller apart from metrics.
 */
public final class SessionManager implements AutoCloseable {

    /** One cached conversation: a KV cache and the tokens it holds. */
    public static final class Session {
        private final SequencePool.Sequence cache;
        private int[] tokens = new int[0];
        private boolean inUse;
        private long lastUsed;

        private Session(SequencePool.Sequence cache) {
            this.cache = cache;
        }

        SequencePool.Sequence cache() {
            return cache;
        }
    }

    /**
     * A session taken for one request.
     *
     * @param session the session, now in use
     * @param reused  prompt tokens already in its cache (the request processes the rest)
     */
    public record Lease(Session session, int reused) {
    }

    private final Supplier<SequencePool.Sequence> newCache;
    private final long cacheBytes;
    private final long budgetBytes;
    private final List<Session> sessions = new ArrayList<>();
    private long clock;

    /**
     * @param newCache    makes an empty cache of the served context size
     * @param cacheBytes  the memory of one cache (host or device)
     * @param budgetBytes the memory all caches may take; raised to {@code minSessions} caches if smaller,
     *                    because every running request needs one
     */
    SessionManager(Supplier<SequencePool.Sequence> newCache, long cacheBytes, long budgetBytes, int minSessions) {
        this.newCache = newCache;
        this.cacheBytes = cacheBytes;
        this.budgetBytes = Math.max(budgetBytes, cacheBytes * minSessions);
    }

    public synchronized Lease acquire(int[] prompt) {
        Session best = null;
        int bestShared = 0;
        for (Session s : sessions) {
            if (!s.inUse) {
                int shared = commonPrefix(s.tokens, prompt);
                if (shared > bestShared) {
                    best = s;
                    bestShared = shared;
                }
            }
        }
        // At least the last prompt token is processed again: its logits choose the first new token.
        int reused = Math.min(bestShared, prompt.length - 1);
        if (best == null || reused == 0) {
            evictFor(1);
            best = new Session(newCache.get());
            sessions.add(best);
            reused = 0;
        }
        best.inUse = true;
        best.cache.truncate(reused);
        best.tokens = Arrays.copyOf(prompt, reused);
        return new Lease(best, reused);
    }

    /** Returns a session after its request; {@code tokens} are what its cache now holds, in order. */
    public synchronized void release(Session session, int[] tokens) {
        if (tokens.length != session.cache.position()) {
            throw new IllegalArgumentException("the cache holds " + session.cache.position() + " positions, not "
                    + tokens.length);
        }
        session.tokens = tokens.clone();
        session.inUse = false;
        session.lastUsed = ++clock;
        evictFor(0);
    }

    /** Drops a session whose cache contents are unknown (its request failed half-way). */
    public synchronized void discard(Session session) {
        sessions.remove(session);
        session.cache.close();
    }

    /** Evicts least recently used idle sessions until {@code extra} more caches fit in the budget. */
    private void evictFor(int extra) {
        while ((sessions.size() + extra) * cacheBytes > budgetBytes) {
            Session lru = null;
            for (Session s : sessions) {
                if (!s.inUse && (lru == null || s.lastUsed < lru.lastUsed)) {
                    lru = s;
                }
            }
            if (lru == null) {
                return; // only running requests' caches are left; they are never evicted
            }
            discard(lru);
        }
    }

    public synchronized int sessions() {
        return sessions.size();
    }

    public synchronized int sessionsInUse() {
        return (int) sessions.stream().filter(s -> s.inUse).count();
    }

    public synchronized long bytesUsed() {
        return sessions.size() * cacheBytes;
    }

    public long budgetBytes() {
        return budgetBytes;
    }

    static int commonPrefix(int[] a, int[] b) {
        int n = Math.min(a.length, b.length);
        int i = 0;
        while (i < n && a[i] == b[i]) {
            i++;
        }
        return i;
    }

    @Override
    public synchronized void close() {
        for (Session s : sessions) {
            s.cache.close();
        }
        sessions.clear();
    }
}
