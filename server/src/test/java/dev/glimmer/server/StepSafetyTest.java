package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.server.inference.BackendChooser;
import dev.glimmer.server.inference.Scheduler;
import dev.glimmer.server.inference.ServedModel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/**
 * What the scheduler does around a forward step on a GPU-style pool (the real kernels on the CPU
 * emulator, wrapped to hold a step in flight or fail it): shutdown never frees the pool, the backend
 * or the weights while a step may still touch them, and an {@link Error} in a step ends serving
 * visibly instead of being swallowed.
 */
class StepSafetyTest {
    static final String CHAT = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 8}";

    /** What happened, in order: step start/end, pool closed, backend closed. */
    static final class Events {
        private final List<String> events = new ArrayList<>();

        synchronized void add(String event) {
            events.add(event);
            notifyAll();
        }

        synchronized List<String> list() {
            return List.copyOf(events);
        }

        synchronized void await(String event, Duration timeout) throws InterruptedException {
            long end = System.nanoTime() + timeout.toNanos();
            while (!events.contains(event)) {
                long left = end - System.nanoTime();
                assertTrue(left > 0, "no '" + event + "' within " + timeout + ": " + events);
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        }
    }

    /** An emulated pool whose runs report to {@code events} and run {@code beforeStep} first (to hold or fail them). */
    record Watched(SequencePool pool, Events events, Runnable beforeStep) implements SequencePool {
        @Override
        public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
            events.add("step start");
            beforeStep.run();
            Next next = pool.prompt(sequence, tokens, from, count, readout);
            events.add("step end");
            return next;
        }

        /** The step runs here and now, between its events. */
        @Override
        public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
            events.add("step start");
            beforeStep.run();
            Next[] next = pool.step(sequences, tokens, readouts);
            events.add("step end");
            return () -> next;
        }

        // From here, plain delegation to the watched pool.
        @Override
        public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
            return pool.promptLogits(sequence, tokens, from, count);
        }

        @Override
        public Sequence open() {
            return pool.open();
        }

        @Override
        public int slots() {
            return pool.slots();
        }

        @Override
        public int capacity() {
            return pool.capacity();
        }

        @Override
        public long bytesPerSequence() {
            return pool.bytesPerSequence();
        }

        @Override
        public int inUse() {
            return pool.inUse();
        }

        @Override
        public long bytes() {
            return pool.bytes();
        }

        @Override
        public long bytesPerPosition() {
            return pool.bytesPerPosition();
        }

        @Override
        public String kvLayout() {
            return pool.kvLayout();
        }

        @Override
        public void exportPrefix(Sequence sequence, int n, java.lang.foreign.MemorySegment into) {
            pool.exportPrefix(sequence, n, into);
        }

        @Override
        public void importPrefix(Sequence sequence, java.lang.foreign.MemorySegment from, int n) {
            pool.importPrefix(sequence, from, n);
        }

        @Override
        public void close() {
            events.add("pool closed");
            pool.close();
        }
    }

    static BackendChooser watched(Events events, Runnable beforeStep) {
        return (requested, model, cpu) -> new BackendChoice(
                BackendKind.EMULATED, "watched emulated pools", Optional.empty(), new SequencePools() {
                    @Override
                    public SequencePool pool(int slots, int capacity) {
                        return new Watched(EmulatorRunner.pool(model, slots, capacity), events, beforeStep);
                    }

                    @Override
                    public long bytesPerSequence(int capacity) {
                        return EmulatorRunner.pools(model).bytesPerSequence(capacity);
                    }

                    @Override
                    public void close() {
                        events.add("backend closed");
                    }
                });
    }

    /** Log records of one logger while a test runs. */
    static final class Records extends Handler implements AutoCloseable {
        final List<LogRecord> records = new ArrayList<>();
        private final Logger logger;

        Records(Class<?> source) {
            logger = Logger.getLogger(source.getName());
            logger.addHandler(this);
        }

        @Override
        public synchronized void publish(LogRecord record) {
            records.add(record);
            notifyAll();
        }

        synchronized LogRecord await(String text, Duration timeout) throws InterruptedException {
            long end = System.nanoTime() + timeout.toNanos();
            while (true) {
                for (LogRecord r : records) {
                    if (r.getMessage().contains(text)) {
                        return r;
                    }
                }
                long left = end - System.nanoTime();
                assertTrue(left > 0, "no log record with '" + text + "' within " + timeout);
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {
            logger.removeHandler(this);
        }
    }

    /**
     * A step held in flight while the server closes: close gives up waiting for it (here after 300 ms,
     * 30 s in real life) and frees nothing; when the step returns, the scheduler's thread frees the
     * pool and the backend itself, after the last step's end and with no step after it.
     */
    @Test
    void closeNeverFreesWhatARunningStepMayTouch() throws Exception {
        Events events = new Events();
        CountDownLatch inStep = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        GlimmerApp app = TestServer.start(Map.of("model.ctx", "256"), watched(events, () -> {
            inStep.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try (Records log = new Records(ServedModel.class);
                HttpClient http = HttpClient.newHttpClient()) {
            List<String> before = events.list();
            http.sendAsync(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + app.port() + "/v1/chat/completions"))
                            .header("Content-Type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofString(CHAT))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertTrue(inStep.await(30, TimeUnit.SECONDS), "the request's first step never started");

            CompletableFuture<Void> closing = CompletableFuture.runAsync(() -> app.close(Duration.ofMillis(300)));
            log.await("a forward step is still running", Duration.ofSeconds(10));
            List<String> whileRunning =
                    events.list().subList(before.size(), events.list().size());
            assertEquals(List.of("step start"), whileRunning, "freed under a running step");

            release.countDown();
            closing.get(30, TimeUnit.SECONDS);
            events.await("backend closed", Duration.ofSeconds(10));
            // The turn the held step was part of may run one more step; then the frees, and nothing after them.
            List<String> after =
                    events.list().subList(before.size(), events.list().size());
            int frees = after.indexOf("pool closed");
            assertEquals(
                    List.of("pool closed", "backend closed"), after.subList(frees, after.size()), after.toString());
            List<String> steps = after.subList(0, frees);
            assertEquals(
                    steps.size() / 2, steps.stream().filter("step end"::equals).count(), "a step cut short: " + after);
            assertEquals("step end", steps.getLast(), after.toString());
        }
    }

    /**
     * An {@link OutOfMemoryError} in a step: its request fails (500), later requests and /health get
     * 503 saying why, the log has the error with its stack trace, and the memory is freed.
     */
    @Test
    void anErrorInAStepStopsServingVisibly() throws Exception {
        Events events = new Events();
        try (Records log = new Records(Scheduler.class)) {
            GlimmerApp app = TestServer.start(Map.of("model.ctx", "256"), watched(events, () -> {
                throw new OutOfMemoryError("no room for the step (test)");
            }));
            try {
                given().port(app.port())
                        .contentType("application/json")
                        .body(CHAT)
                        .post("/v1/chat/completions")
                        .then()
                        .statusCode(500)
                        .body("error.message", containsString("OutOfMemoryError"));
                given().port(app.port())
                        .contentType("application/json")
                        .body(CHAT)
                        .post("/v1/chat/completions")
                        .then()
                        .statusCode(503)
                        .body("error.message", containsString("generation stopped after an internal error"))
                        .body("error.message", containsString("no room for the step (test)"));
                given().port(app.port())
                        .get("/health")
                        .then()
                        .statusCode(503)
                        .body("error.message", containsString("the server must be restarted"));

                LogRecord severe = log.await("generation stopped after", Duration.ofSeconds(5));
                assertEquals(Level.SEVERE, severe.getLevel());
                assertNotNull(severe.getThrown(), "the log keeps the stack trace");
                assertTrue(severe.getThrown() instanceof OutOfMemoryError, String.valueOf(severe.getThrown()));
                events.await("backend closed", Duration.ofSeconds(10));
                assertFalse(events.list().contains("step end"));
            } finally {
                app.close();
            }
        }
    }
}
