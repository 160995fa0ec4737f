package dev.glimmer.server.inference;

import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

class SessionManagerTest {
    static final int CTX = 64;

    static SessionManager<CpuStepRunner.HostCache> manager(int budgetCaches, int minSessions) {
        KvCache probe = new KvCache(2, 8, CTX, KvCacheType.F32);
        long bytes = probe.bytes();
        probe.close();
        return new SessionManager<>(() -> new CpuStepRunner.HostCache(new KvCache(2, 8, CTX, KvCacheType.F32)), bytes,
                budgetCaches * bytes, minSessions);
    }

    /** Pretends a request filled its cache with {@code tokens} and returns the session. */
    static void finish(SessionManager<CpuStepRunner.HostCache> m, SessionManager.Lease<CpuStepRunner.HostCache> lease, int[] tokens) {
        lease.session().cache().kv().advance(tokens.length - lease.session().cache().size());
        m.release(lease.session(), tokens);
    }

    @Test
    void theLongestCommonPrefixIsReusedAndTruncated() {
        try (SessionManager<CpuStepRunner.HostCache> m = manager(4, 1)) {
            SessionManager.Lease<CpuStepRunner.HostCache> a = m.acquire(new int[]{1, 2, 3, 4});
            assertEquals(0, a.reused());
            finish(m, a, new int[]{1, 2, 3, 4, 5, 6});
            SessionManager.Lease<CpuStepRunner.HostCache> b = m.acquire(new int[]{9, 9});
            assertEquals(0, b.reused());
            finish(m, b, new int[]{9, 9, 9});
            SessionManager.Lease<CpuStepRunner.HostCache> c = m.acquire(new int[]{1, 2, 3, 4, 5, 7, 8});
            assertSame(a.session(), c.session());
            assertEquals(5, c.reused());
            assertEquals(5, c.session().cache().size());
        }
    }

    @Test
    void atLeastTheLastPromptTokenIsProcessedAgain() {
        try (SessionManager<CpuStepRunner.HostCache> m = manager(4, 1)) {
            SessionManager.Lease<CpuStepRunner.HostCache> a = m.acquire(new int[]{1, 2, 3});
            finish(m, a, new int[]{1, 2, 3, 4});
            SessionManager.Lease<CpuStepRunner.HostCache> again = m.acquire(new int[]{1, 2, 3});
            assertEquals(2, again.reused());
        }
    }

    @Test
    void aSessionInUseIsNeverSharedOrEvicted() {
        try (SessionManager<CpuStepRunner.HostCache> m = manager(1, 1)) {
            SessionManager.Lease<CpuStepRunner.HostCache> a = m.acquire(new int[]{1, 2, 3});
            SessionManager.Lease<CpuStepRunner.HostCache> b = m.acquire(new int[]{1, 2, 3});
            assertNotSame(a.session(), b.session());
            assertEquals(0, b.reused());
            assertEquals(2, m.sessions(), "over budget while both run: running caches are not evicted");
            finish(m, a, new int[]{1, 2, 3});
            assertEquals(1, m.sessions(), "back within the budget once one is idle");
            finish(m, b, new int[]{1, 2, 3});
            assertEquals(1, m.sessions());
            assertEquals(0, m.sessionsInUse());
        }
    }

    @Test
    void leastRecentlyUsedSessionsAreEvictedFirst() {
        try (SessionManager<CpuStepRunner.HostCache> m = manager(2, 1)) {
            SessionManager.Lease<CpuStepRunner.HostCache> a = m.acquire(new int[]{1, 1});
            finish(m, a, new int[]{1, 1});
            SessionManager.Lease<CpuStepRunner.HostCache> b = m.acquire(new int[]{2, 2});
            finish(m, b, new int[]{2, 2});
            SessionManager.Lease<CpuStepRunner.HostCache> a2 = m.acquire(new int[]{1, 1, 5});
            assertSame(a.session(), a2.session());
            finish(m, a2, new int[]{1, 1, 5});
            SessionManager.Lease<CpuStepRunner.HostCache> c = m.acquire(new int[]{3, 3});
            finish(m, c, new int[]{3, 3});
            assertEquals(2, m.sessions());
            // b was the least recently used: its conversation is gone, a's is still there.
            assertEquals(0, m.acquire(new int[]{2, 2, 2}).reused());
        }
    }
}
