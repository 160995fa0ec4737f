package dev.glimmer.server.inference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.server.EngineTestData;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The session manager over real sequences of the CPU's pool on the tiny model. */
class SessionManagerTest {
    static final int CTX = 64;
    private static GlmModel model;
    private static SequencePool pool;

    @BeforeAll
    static void open() throws IOException {
        model = GlmModel.open(EngineTestData.model("tiny-f32"));
        pool = new CpuSequencePool(model, new CpuBackend(1), 8, CTX, KvCacheType.F32, 16);
    }

    @AfterAll
    static void close() {
        pool.close();
        model.close();
    }

    static SessionManager manager(int budgetCaches, int minSessions) {
        long bytes = pool.bytesPerSequence();
        return new SessionManager(pool, budgetCaches * bytes, minSessions);
    }

    /** Runs the rest of {@code tokens} into the lease's cache, as a request does, and returns the session. */
    static void finish(SessionManager m, SessionManager.Lease lease, int[] tokens) {
        SequencePool.Sequence cache = lease.session().cache();
        int held = cache.position();
        if (tokens.length > held) {
            pool.prompt(cache, tokens, held, tokens.length - held, SequencePool.Readout.LOGITS);
        }
        m.release(lease.session(), tokens);
    }

    @Test
    void aConversationContinuedTakesItsOwnCache() {
        try (SessionManager m = manager(4, 1)) {
            SessionManager.Lease a = m.acquire(new int[] {1, 2, 3, 4});
            assertEquals(0, a.reused());
            finish(m, a, new int[] {1, 2, 3, 4, 5, 6});
            SessionManager.Lease b = m.acquire(new int[] {9, 9});
            assertEquals(0, b.reused());
            finish(m, b, new int[] {9, 9, 9});
            SessionManager.Lease c = m.acquire(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
            assertSame(a.session(), c.session());
            assertEquals(6, c.reused());
            assertEquals(0, c.copied());
            assertEquals(6, c.session().cache().position());
        }
    }

    /**
     * A prompt that shares the start of another conversation, idle or running, gets a new cache with that prefix
     * copied: the other conversation keeps its cache whole, and the copy continues as the computed rows would.
     */
    @Test
    void aSharedPrefixOfAnotherConversationIsCopiedNotCut() {
        try (SessionManager m = manager(4, 1)) {
            SessionManager.Lease a = m.acquire(new int[] {1, 2, 3, 4, 5, 6});
            pool.prompt(a.session().cache(), new int[] {1, 2, 3, 4, 5, 6}, 0, 6, SequencePool.Readout.LOGITS);
            // a is still running: the prompt tokens in its cache are shared
            SessionManager.Lease b = m.acquire(new int[] {1, 2, 3, 4, 9});
            assertNotSame(a.session(), b.session());
            assertEquals(4, b.reused());
            assertEquals(4, b.copied());
            assertEquals(4, b.session().cache().position());
            float[] continued = pool.prompt(b.session().cache(), new int[] {9}, 0, 1, SequencePool.Readout.LOGITS)
                    .logits()
                    .clone();
            try (SequencePool.Sequence computed = pool.open()) {
                assertArrayEquals(
                        pool.prompt(computed, new int[] {1, 2, 3, 4, 9}, 0, 5, SequencePool.Readout.LOGITS)
                                .logits(),
                        continued);
            }
            m.release(b.session(), new int[] {1, 2, 3, 4, 9});
            finish(m, a, new int[] {1, 2, 3, 4, 5, 6, 7});
            // idle now: a's first five tokens are copied rather than its cache cut back
            SessionManager.Lease c = m.acquire(new int[] {1, 2, 3, 4, 5, 8});
            assertEquals(5, c.copied());
            assertNotSame(a.session(), c.session());
            assertEquals(7, a.session().cache().position(), "the donor keeps its rows");
            assertEquals(3, m.sessions());
        }
    }

    /**
     * A conversation evicted from the budget goes to the RAM tier and comes back from it for its follow-up, whose
     * logits are those of computing it all; the RAM tier's overflow goes to disk.
     */
    @Test
    void anEvictedConversationComesBackFromTheTiers(@TempDir Path dir) {
        int[] a = {5, 6, 7, 8, 9, 10};
        try (SessionManager m = new SessionManager(
                pool,
                pool.bytesPerSequence(),
                1,
                new KvTiers(
                        new byte[32],
                        pool.kvLayout(),
                        pool.bytesPerPosition(),
                        6 * pool.bytesPerPosition(),
                        Optional.of(dir),
                        1 << 20))) {
            finish(m, m.acquire(a), a);
            int[] b = {20, 21, 22, 23, 24, 25};
            finish(m, m.acquire(b), b); // a goes to RAM
            int[] c = {30, 31, 32, 33, 34, 35};
            finish(m, m.acquire(c), c); // b goes to RAM, a to disk
            SessionManager.Lease fromDisk = m.acquire(new int[] {5, 6, 7, 8, 9, 10, 11}); // c goes to RAM, b to disk
            assertEquals("disk", fromDisk.from());
            assertEquals(6, fromDisk.reused());
            float[] continued = pool.prompt(
                            fromDisk.session().cache(), new int[] {11}, 0, 1, SequencePool.Readout.LOGITS)
                    .logits()
                    .clone();
            try (SequencePool.Sequence computed = pool.open()) {
                assertArrayEquals(
                        pool.prompt(computed, new int[] {5, 6, 7, 8, 9, 10, 11}, 0, 7, SequencePool.Readout.LOGITS)
                                .logits(),
                        continued);
            }
            m.release(fromDisk.session(), new int[] {5, 6, 7, 8, 9, 10, 11});
            SessionManager.Lease fromRam = m.acquire(new int[] {30, 31, 32, 33, 99});
            assertEquals("ram", fromRam.from());
            assertEquals(4, fromRam.copied());
        }
    }

    @Test
    void atLeastTheLastPromptTokenIsProcessedAgain() {
        try (SessionManager m = manager(4, 1)) {
            SessionManager.Lease a = m.acquire(new int[] {1, 2, 3});
            finish(m, a, new int[] {1, 2, 3, 4});
            SessionManager.Lease again = m.acquire(new int[] {1, 2, 3});
            assertEquals(2, again.reused());
        }
    }

    @Test
    void aSessionInUseIsNeverSharedOrEvicted() {
        try (SessionManager m = manager(1, 1)) {
            SessionManager.Lease a = m.acquire(new int[] {1, 2, 3});
            SessionManager.Lease b = m.acquire(new int[] {1, 2, 3});
            assertNotSame(a.session(), b.session());
            assertEquals(0, b.reused());
            assertEquals(2, m.sessions(), "over budget while both run: running caches are not evicted");
            finish(m, a, new int[] {1, 2, 3});
            assertEquals(1, m.sessions(), "back within the budget once one is idle");
            finish(m, b, new int[] {1, 2, 3});
            assertEquals(1, m.sessions());
            assertEquals(0, m.sessionsInUse());
        }
    }

    @Test
    void leastRecentlyUsedSessionsAreEvictedFirst() {
        try (SessionManager m = manager(2, 1)) {
            SessionManager.Lease a = m.acquire(new int[] {1, 1});
            finish(m, a, new int[] {1, 1});
            SessionManager.Lease b = m.acquire(new int[] {2, 2});
            finish(m, b, new int[] {2, 2});
            SessionManager.Lease a2 = m.acquire(new int[] {1, 1, 5});
            assertSame(a.session(), a2.session());
            finish(m, a2, new int[] {1, 1, 5});
            SessionManager.Lease c = m.acquire(new int[] {3, 3});
            finish(m, c, new int[] {3, 3});
            assertEquals(2, m.sessions());
            // b was the least recently used: its conversation is gone, a's is still there.
            assertEquals(0, m.acquire(new int[] {2, 2, 2}).reused());
        }
    }
}
