package dev.glimmer.server.loadgen;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Ends requests whose server has gone silent: each request {@link #watch watches} its own thread and says
 * when it {@link Watch#heard heard} from the server; a thread that has heard nothing for longer than the
 * timeout is interrupted, which ends a blocked {@code HttpClient.send} or a blocked read of the response
 * body. One mechanism for both phases of a request: before the answer starts and between two of its lines.
 */
final class Watchdog implements AutoCloseable {
    private final long timeoutNanos;
    private final Set<Watch> watches = ConcurrentHashMap.newKeySet();
    private final Thread checker;

    Watchdog(Duration timeout) {
        this.timeoutNanos = timeout.toNanos();
        long checkMillis = Math.clamp(timeout.toMillis() / 10, 10, 250);
        this.checker = Thread.ofPlatform().daemon().name("bench-serve-watchdog").start(() -> {
            try {
                while (true) {
                    Thread.sleep(checkMillis);
                    long now = System.nanoTime();
                    for (Watch watch : watches) {
                        watch.fireIfSilentSince(now - timeoutNanos);
                    }
                }
            } catch (InterruptedException closed) {
                // close() ends the checker.
            }
        });
    }

    /** Starts watching the calling thread; close the watch when the request is over. */
    Watch watch() {
        Watch watch = new Watch(Thread.currentThread());
        watches.add(watch);
        return watch;
    }

    @Override
    public void close() {
        checker.interrupt();
    }

    /** One request's watch. */
    final class Watch implements AutoCloseable {
        private final Thread thread;
        private volatile long lastHeardNanos = System.nanoTime();
        private boolean fired;
        private boolean closed;

        private Watch(Thread thread) {
            this.thread = thread;
        }

        /** The server just sent something. */
        void heard() {
            lastHeardNanos = System.nanoTime();
        }

        /** Whether the request was ended for silence. */
        synchronized boolean fired() {
            return fired;
        }

        private synchronized void fireIfSilentSince(long limitNanos) {
            if (!closed && !fired && lastHeardNanos < limitNanos) {
                fired = true;
                thread.interrupt();
            }
        }

        /** Stops watching; an interrupt this watch sent is not left behind for the thread's next request. */
        @Override
        public synchronized void close() {
            closed = true;
            watches.remove(this);
            if (fired) {
                Thread.interrupted();
            }
        }
    }
}
