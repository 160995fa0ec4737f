package dev.glimmer.engine.backend.cpu;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * A fixed set of platform threads that run one parallel operation at a time: {@link #run} hands a
 * {@link Task} to every worker, runs the caller's own share, and returns when all shares are done.
 * A parallel op of the decode path lasts tens of microseconds, so the handoff must be cheaper than
 * that: idle workers spin for a while (the next op usually follows within microseconds) and only
 * then park; nothing is allocated per operation.
 *
 * <p>Shared by every backend with the same thread count ({@link #shared}); {@link #run} is
 * synchronized, so two sequences computed at once take turns for each operation.
 */
final class WorkerPool {

    /** Work split in shares: share {@code worker} of {@code workers}. */
    interface Task {
        void run(int worker, int workers);
    }

    /** How long an idle worker spins before parking (~50 µs at ~2 ns a spin). */
    private static final int SPINS = 25_000;

    private static final WorkerPool[] SHARED = new WorkerPool[256];

    private final int threads;
    private final Worker[] workers;
    private final AtomicInteger pending = new AtomicInteger();
    private volatile long generation;
    private volatile Task task;
    /** The first failure of a worker's share in the current operation, rethrown by {@link #run}. */
    private volatile Throwable failure;

    private WorkerPool(int threads) {
        this.threads = threads;
        this.workers = new Worker[threads - 1];
        for (int i = 0; i < workers.length; i++) {
            workers[i] = new Worker(i + 1);
            workers[i].start();
        }
    }

    /** The process-wide pool of {@code threads} threads (the caller counts as one). */
    static synchronized WorkerPool shared(int threads) {
        if (threads < 1 || threads > SHARED.length) {
            throw new IllegalArgumentException("threads must be 1.." + SHARED.length + ", got " + threads);
        }
        if (SHARED[threads - 1] == null) {
            SHARED[threads - 1] = new WorkerPool(threads);
        }
        return SHARED[threads - 1];
    }

    /**
     * Physical cores: the logical CPUs this JVM may use divided by the hardware threads per core
     * (from Linux's CPU topology; hyperthread siblings share the load/FMA units, which these
     * bandwidth-bound kernels saturate with one thread per core).
     */
    static int physicalCores() {
        int logical = Runtime.getRuntime().availableProcessors();
        int perCore = 1;
        try {
            String siblings = Files.readString(Path.of("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list"))
                    .trim();
            perCore = countCpus(siblings);
        } catch (Exception notLinux) {
            // keep one thread per logical CPU
        }
        return Math.max(1, logical / Math.max(1, perCore));
    }

    /** Number of CPUs in a Linux CPU list such as {@code 0,64} or {@code 0-1}. */
    private static int countCpus(String list) {
        int count = 0;
        for (String part : list.split(",")) {
            String[] range = part.split("-");
            count += range.length == 2 ? Integer.parseInt(range[1]) - Integer.parseInt(range[0]) + 1 : 1;
        }
        return count;
    }

    int threads() {
        return threads;
    }

    /** Runs share 0 of {@code t} on the calling thread and the other shares on the workers; returns when all are done. */
    synchronized void run(Task t) {
        if (threads == 1) {
            t.run(0, 1);
            return;
        }
        task = t;
        pending.set(workers.length);
        generation++;
        for (Worker w : workers) {
            if (w.parked) {
                LockSupport.unpark(w);
            }
        }
        t.run(0, threads);
        int spins = 0;
        while (pending.get() != 0) {
            if (++spins < SPINS) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        task = null;
        Throwable failed = failure;
        if (failed != null) {
            failure = null;
            if (failed instanceof RuntimeException e) {
                throw e;
            }
            if (failed instanceof Error e) {
                throw e;
            }
            throw new IllegalStateException(failed);
        }
    }

    private final class Worker extends Thread {
        private final int index;
        volatile boolean parked;

        Worker(int index) {
            super("glimmer-cpu-" + index);
            this.index = index;
            setDaemon(true);
        }

        @Override
        public void run() {
            long seen = 0;
            while (true) {
                int spins = 0;
                while (generation == seen) {
                    if (++spins < SPINS) {
                        Thread.onSpinWait();
                    } else {
                        parked = true;
                        if (generation == seen) {
                            LockSupport.park(this);
                        }
                        parked = false;
                    }
                }
                seen = generation;
                try {
                    task.run(index, threads);
                } catch (Throwable t) {
                    failure = t;
                } finally {
                    pending.decrementAndGet();
                }
            }
        }
    }
}
