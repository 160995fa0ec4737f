package dev.glimmer.engine.backend.cpu;

import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The pool's handoff: every unit of every operation is done exactly once, whether the worker takes
 * part or is withdrawn (operations of a few units, which the caller often finishes before the worker
 * has woken, and long ones, which both threads share), and a worker's failure comes back to the caller.
 */
class WorkerPoolTest {
    /** Counts, per unit, how often it was done; units are claimed from a counter as the backend's tasks do. */
    private static final class CountingTask implements WorkerPool.Task {
        final AtomicInteger next = new AtomicInteger();
        final int[] done;
        final int[] byWorker = new int[2];
        volatile int units;

        CountingTask(int maxUnits) {
            done = new int[maxUnits];
        }

        @Override
        public void run(int worker, int workers) {
            for (int u = next.getAndIncrement(); u < units; u = next.getAndIncrement()) {
                done[u]++;
                byWorker[worker]++;
                if (units > 1000) {
                    Thread.onSpinWait(); // long enough for the worker to join in
                }
            }
        }
    }

    @Test
    void everyUnitIsDoneOnceWhetherTheWorkerJoinsOrIsWithdrawn() {
        WorkerPool pool = WorkerPool.shared(2);
        CountingTask task = new CountingTask(100_000);
        int operations = 20_000;
        for (int op = 0; op < operations; op++) {
            task.units = op % 100 == 0 ? 100_000 : 1 + op % 7;
            java.util.Arrays.fill(task.done, 0, task.units, 0);
            task.next.set(0);
            pool.run(task);
            for (int u = 0; u < task.units; u++) {
                assertEquals(1, task.done[u], "operation " + op + " unit " + u);
            }
        }
        assertTrue(task.byWorker[1] > 0, "the worker took part in some operations");
    }

    @Test
    void aWorkersFailureIsRethrownByTheCaller() {
        WorkerPool pool = WorkerPool.shared(2);
        IllegalStateException failure = new IllegalStateException("unit failed");
        AtomicInteger next = new AtomicInteger();
        WorkerPool.Task failing = (worker, workers) -> {
            // Every unit fails on the worker; the caller waits for it by spinning on its own unit.
            for (int u = next.getAndIncrement(); u < 2; u = next.getAndIncrement()) {
                if (worker == 1) {
                    throw failure;
                }
                long until = System.nanoTime() + 200_000_000L;
                while (next.get() < 2 && System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
            }
        };
        boolean thrown = false;
        for (int attempt = 0; attempt < 50 && !thrown; attempt++) {
            next.set(0);
            try {
                pool.run(failing);
            } catch (IllegalStateException e) {
                assertSame(failure, e);
                thrown = true;
            }
        }
        assertTrue(thrown, "the worker's failure reached the caller");
        // The pool still works afterwards.
        CountingTask task = new CountingTask(10);
        task.units = 10;
        pool.run(task);
        assertEquals(10, java.util.Arrays.stream(task.done).sum());
        assertThrows(IllegalArgumentException.class, () -> WorkerPool.shared(0));
    }
}
