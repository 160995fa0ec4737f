package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.generate.Drafting;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Keeps the KV caches of recent conversations (sequences of the backend's {@link SequencePool})
 * within a memory budget so that a follow-up request
 * processes only its new tokens. A request that continues a conversation (its prompt starts with all
 * the tokens an idle cache holds) takes that cache ({@link #acquire}). Otherwise, when other
 * conversations, idle or running, hold a prefix of the prompt (the same system prompt of another
 * agent conversation), the request gets a new cache with the longest such prefix copied into it
 * ({@link SequencePool#copyPrefix}) instead of computing it, and the other conversation keeps its
 * cache whole; a running request's cache gives the prompt tokens already in it. A new cache evicts least recently used idle caches to stay
 * within the budget; a cache in use by a running request is never evicted or truncated
 * ({@link Session#inUse}).
 *
 * <p>Thread-safe; the scheduler is the only caller apart from metrics.
 */
public final class SessionManager implements AutoCloseable {

    /** One cached conversation: a KV cache and the tokens it holds. */
    public static final class Session {
        private final SequencePool.Sequence cache;
        private int[] tokens = new int[0];
        private boolean inUse;
        /** While in use: the running request's prompt, the first {@code cache.position()} of which are in the cache. */
        private int[] request = new int[0];

        private long lastUsed;
        /** The conversation's speculative decoding (its acceptance, its probes), from its first request on; or null. */
        private Drafting drafting;

        private Session(SequencePool.Sequence cache) {
            this.cache = cache;
        }

        SequencePool.Sequence cache() {
            return cache;
        }

        /**
         * The conversation's speculative decoding, made by {@code make} for its first request: a follow-up goes on
         * with what the earlier turns saw of its acceptance.
         */
        Drafting drafting(Supplier<Drafting> make) {
            if (drafting == null) {
                drafting = make.get();
            }
            return drafting;
        }

        /** Tokens at the start of {@code prompt} whose KV rows this session's cache holds. */
        private int sharedWith(int[] prompt) {
            if (!inUse) {
                return commonPrefix(tokens, prompt);
            }
            return Math.min(commonPrefix(request, prompt), cache.position());
        }
    }

    /**
     * A session taken for one request.
     *
     * @param session the session, now in use
     * @param reused  prompt tokens already in its cache (the request processes the rest)
     * @param copied  of those, the tokens copied from another cache (0: its own, or none)
     * @param from    where the copied tokens came from: {@code conversation} (another one's cache), {@code ram} or
     *                {@code disk} ({@link KvTiers})
     */
    public record Lease(Session session, int reused, int copied, String from) {}

    private static final Logger LOG = Logger.getLogger(SessionManager.class.getName());
    /** {@link #catchUp} copies a prefix only when it saves at least 1/COPY_GAIN of the positions it copies. */
    private static final int COPY_GAIN = 16;

    private final SequencePool pool;
    /** Where evicted conversations go; none when both budgets are 0. */
    private final KvTiers tiers;

    private final long cacheBytes;
    private final long budgetBytes;
    private final List<Session> sessions = new ArrayList<>();
    private long clock;

    /**
     * @param pool        makes the caches (sequences of the served context size) and copies rows between them
     * @param budgetBytes the memory all caches may take; raised to {@code minSessions} caches if smaller,
     *                    because every running request needs one
     */
    SessionManager(SequencePool pool, long budgetBytes, int minSessions) {
        this(pool, budgetBytes, minSessions, null);
    }

    /** @param tiers where evicted conversations go (and are found again), or null */
    SessionManager(SequencePool pool, long budgetBytes, int minSessions, KvTiers tiers) {
        this.pool = pool;
        this.tiers = tiers;
        this.cacheBytes = pool.bytesPerSequence();
        this.budgetBytes = Math.max(budgetBytes, cacheBytes * minSessions);
    }

    /**
     * A session for a request of {@code prompt}, holding as much of its start as any cache here holds. Called between
     * the pool's steps (the caller's thread runs the pool), since it may copy rows.
     */
    public synchronized Lease acquire(int[] prompt) {
        // At least the last prompt token is processed again: its logits choose the first new token.
        int most = prompt.length - 1;
        for (Session s : sessions) {
            int held = s.sharedWith(prompt);
            if (!s.inUse && held == s.tokens.length && held > 0) {
                // the same conversation continued: its own cache, nothing to copy
                return take(s, prompt, Math.min(held, most), null);
            }
        }
        Donor best = longestHolder(prompt, null, 0);
        Session donor = best == null ? null : best.session();
        int donorShared = best == null ? 0 : best.shared();
        int fromConversation = donorShared;
        KvTiers.Hit kept = tiers == null
                ? null
                : tiers.longest(prompt, most)
                        .filter(h -> h.shared() > fromConversation && h.positions() <= pool.capacity())
                        .orElse(null);
        // Another conversation's rows are copied, not cut back: it keeps its own tokens for its own follow-up.
        Session fresh = newSession(donor);
        try {
            if (kept != null) {
                try (Arena mapped = Arena.ofConfined()) {
                    MemorySegment rows = tiers.rows(kept, mapped).orElse(null);
                    if (rows != null) {
                        pool.importPrefix(fresh.cache, rows, kept.positions());
                        return take(fresh, prompt, kept.shared(), kept.source());
                    }
                }
            }
            if (donor != null) {
                pool.copyPrefix(donor.cache, fresh.cache, donorShared);
                return take(fresh, prompt, donorShared, "conversation");
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "could not copy a cached prefix; computing it", e);
        }
        return take(fresh, prompt, 0, null);
    }

    /**
     * Gives a request's cache, before its prompt is computed, the longer start of its prompt that another cache
     * holds by now: requests admitted together whose prompts share a start (agents with one system prompt) find
     * nothing computed when they are admitted, but the scheduler computes prompts one after another, so by the
     * time a request's own turn comes the first one has computed the shared part. It is copied
     * ({@link SequencePool#copyPrefix}), so that the prefix is computed once. Returns the lease with the tokens its
     * cache now holds, or {@code lease} when no other cache holds more.
     */
    public synchronized Lease catchUp(Lease lease, int[] prompt) {
        Session mine = lease.session();
        int held = mine.cache.position();
        Donor best = longestHolder(prompt, mine, held);
        if (best == null || !worthCopying(held, best.shared())) {
            return lease;
        }
        int donorShared = best.shared();
        try {
            pool.copyPrefix(best.session().cache, mine.cache, donorShared);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "could not copy a cached prefix; computing it", e);
            mine.cache.truncate(Math.min(held, mine.cache.position()));
            return lease;
        }
        mine.tokens = Arrays.copyOf(prompt, donorShared);
        return new Lease(mine, donorShared, donorShared, "conversation");
    }

    /**
     * Whether a cache holding {@code held} tokens of a prompt should take the first {@code shared} from another cache:
     * the copy rewrites all {@code shared} positions to save {@code shared - held}, worth it only for a real gain (a
     * position copied through host memory costs about a sixtieth of one computed on the H200).
     */
    static boolean worthCopying(int held, int shared) {
        return shared > held && (long) (shared - held) * COPY_GAIN >= shared;
    }

    /** A session whose cache holds the first {@code shared} tokens of a prompt. */
    private record Donor(Session session, int shared) {}

    /**
     * The session other than {@code except} (null: none excepted) whose cache holds the longest start of
     * {@code prompt}, up to its last token but one (that one is always computed again), or null when none holds
     * more than {@code moreThan} tokens of it.
     */
    private Donor longestHolder(int[] prompt, Session except, int moreThan) {
        Donor best = null;
        for (Session s : sessions) {
            int shared = s == except ? 0 : Math.min(s.sharedWith(prompt), prompt.length - 1);
            if (shared > (best == null ? moreThan : best.shared())) {
                best = new Donor(s, shared);
            }
        }
        return best;
    }

    /** A new session, after evicting idle ones for it (not {@code keep}, the donor of its prefix, when not null). */
    private Session newSession(Session keep) {
        boolean kept = keep != null && !keep.inUse;
        if (kept) {
            keep.inUse = true; // only for the eviction: it is not taken
        }
        try {
            evictFor(1);
        } finally {
            if (kept) {
                keep.inUse = false;
            }
        }
        Session fresh = new Session(pool.open());
        sessions.add(fresh);
        return fresh;
    }

    /** {@code session} for {@code prompt}, its first {@code reused} tokens in the cache, copied from {@code from} (or its own: null). */
    private Lease take(Session session, int[] prompt, int reused, String from) {
        session.inUse = true;
        session.cache.truncate(reused);
        session.tokens = Arrays.copyOf(prompt, reused);
        session.request = prompt;
        return new Lease(session, reused, from == null ? 0 : reused, from);
    }

    /** Returns a session after its request; {@code tokens} are what its cache now holds, in order. */
    public synchronized void release(Session session, int[] tokens) {
        if (tokens.length != session.cache.position()) {
            throw new IllegalArgumentException(
                    "the cache holds " + session.cache.position() + " positions, not " + tokens.length);
        }
        session.tokens = tokens.clone();
        session.request = new int[0];
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
            keep(lru);
            discard(lru);
        }
    }

    /** Hands an idle session's rows to the tiers, where there are tiers (a failure loses only the cache). */
    private void keep(Session s) {
        if (tiers == null || s.tokens.length == 0) {
            return;
        }
        try {
            byte[] rows = new byte[Math.toIntExact(s.tokens.length * pool.bytesPerPosition())];
            pool.exportPrefix(s.cache, s.tokens.length, MemorySegment.ofArray(rows));
            tiers.put(s.tokens, rows);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "a conversation of " + s.tokens.length + " tokens could not be kept", e);
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
            if (!s.inUse) {
                keep(s);
            }
            s.cache.close();
        }
        if (tiers != null) {
            tiers.close();
        }
        sessions.clear();
    }
}
