package dev.glimmer.server.inference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The RAM and disk tiers on real files: what a restarted server finds, and what it must not load. */
class KvTiersTest {
    static final byte[] MODEL = new byte[32];
    static final byte[] OTHER_MODEL = new byte[32];
    static final String LAYOUT = "test-layout";
    static final int PER_POSITION = 64;

    static {
        MODEL[0] = 1;
        OTHER_MODEL[0] = 2;
    }

    static KvTiers tiers(byte[] model, long ram, Path dir, long disk) {
        return new KvTiers(model, LAYOUT, PER_POSITION, ram, Optional.of(dir), disk);
    }

    static int[] tokens(int first, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = first + i;
        }
        return t;
    }

    static byte[] rows(int n, long seed) {
        byte[] b = new byte[n * PER_POSITION];
        new Random(seed).nextBytes(b);
        return b;
    }

    static List<Path> files(Path dir, String suffix) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> p.toString().endsWith(suffix)).sorted().toList();
        }
    }

    @Test
    void aConversationEvictedFromRamToDiskIsFoundAfterARestart(@TempDir Path dir) {
        int[] a = tokens(100, 50);
        int[] b = tokens(200, 50);
        try (KvTiers t = tiers(MODEL, 50 * PER_POSITION, dir, 1 << 20)) {
            t.put(a, rows(50, 1));
            assertEquals(1, t.ramEntries());
            t.put(b, rows(50, 2)); // a goes to disk
            assertEquals(1, t.ramEntries());
            assertEquals(1, t.diskEntries());
            KvTiers.Hit hit = t.longest(tokens(100, 60), 59).orElseThrow();
            assertEquals("disk", hit.source());
            assertEquals(50, hit.shared());
            assertArrayEquals(rows(50, 1), rowsOf(t, hit).orElseThrow());
            assertEquals("ram", t.longest(tokens(200, 30), 29).orElseThrow().source());
        } // close: b to disk as well
        try (KvTiers restarted = tiers(MODEL, 0, dir, 1 << 20)) {
            assertEquals(2, restarted.diskEntries());
            KvTiers.Hit hit = restarted.longest(tokens(200, 80), 79).orElseThrow();
            assertEquals(50, hit.shared());
            assertArrayEquals(rows(50, 2), rowsOf(restarted, hit).orElseThrow());
        }
    }

    @Test
    void truncatedCorruptAndForeignFilesAreNeverLoaded(@TempDir Path dir) throws IOException {
        try (KvTiers t = tiers(MODEL, 0, dir, 1 << 20)) {
            t.put(tokens(100, 40), rows(40, 1));
            t.put(tokens(200, 40), rows(40, 2));
            t.put(tokens(300, 40), rows(40, 3));
        }
        try (KvTiers other = tiers(OTHER_MODEL, 0, dir, 1 << 20)) {
            other.put(tokens(400, 40), rows(40, 4));
            assertEquals(1, other.diskEntries(), "the other model's files are not its own");
        }
        List<Path> files = files(dir, ".kv");
        assertEquals(4, files.size());
        Path truncated = fileOf(dir, 100);
        try (RandomAccessFile f = new RandomAccessFile(truncated.toFile(), "rw")) {
            f.setLength(f.length() - 100);
        }
        Path corrupt = fileOf(dir, 200);
        try (RandomAccessFile f = new RandomAccessFile(corrupt.toFile(), "rw")) {
            f.seek(f.length() - 500);
            int v = f.read();
            f.seek(f.length() - 500);
            f.write(v ^ 0xff);
        }
        try (KvTiers restarted = tiers(MODEL, 0, dir, 1 << 20)) {
            assertTrue(restarted.longest(tokens(100, 41), 40).isEmpty(), "a truncated file is not even indexed");
            assertTrue(restarted.longest(tokens(400, 41), 40).isEmpty(), "another model's file is ignored");
            KvTiers.Hit hit = restarted.longest(tokens(200, 41), 40).orElseThrow();
            assertTrue(rowsOf(restarted, hit).isEmpty(), "a corrupt file's rows are not loaded");
            assertTrue(restarted.longest(tokens(200, 41), 40).isEmpty(), "nor looked at again");
            assertArrayEquals(
                    rows(40, 3),
                    rowsOf(restarted, restarted.longest(tokens(300, 41), 40).orElseThrow())
                            .orElseThrow());
        }
    }

    /** The file of the conversation whose tokens start at {@code first}, found by the tier that wrote it. */
    private static Path fileOf(Path dir, int first) throws IOException {
        for (Path f : files(dir, ".kv")) {
            Path alone = Files.createTempDirectory("one");
            Files.copy(f, alone.resolve(f.getFileName()));
            try (KvTiers t = tiers(MODEL, 0, alone, 1 << 20)) {
                if (t.longest(tokens(first, 2), 1).isPresent()) {
                    return f;
                }
            } finally {
                try (Stream<Path> s = Files.list(alone)) {
                    for (Path p : s.toList()) {
                        Files.delete(p);
                    }
                }
                Files.delete(alone);
            }
        }
        throw new AssertionError("no file for " + first);
    }

    @Test
    void theDiskBudgetHoldsAndTheLeastRecentlyUsedGoFirst(@TempDir Path dir) throws IOException {
        long budget = 10 * 50 * PER_POSITION; // a little under ten conversations with their headers
        try (KvTiers t = tiers(MODEL, 0, dir, budget)) {
            for (int i = 0; i < 30; i++) {
                t.put(tokens(1000 * (i + 1), 50), rows(50, i));
                if (i == 0) {
                    continue;
                }
                rowsOf(t, t.longest(tokens(1000, 50), 49).orElseThrow()); // the first stays in use
                long used = 0;
                for (Path f : files(dir, ".kv")) {
                    used += Files.size(f);
                }
                assertTrue(used <= budget, used + " bytes on disk");
            }
            assertTrue(t.longest(tokens(1000, 50), 49).isPresent(), "the most recently used is kept");
            assertTrue(t.longest(tokens(2000, 50), 49).isEmpty(), "an old one is gone");
        }
    }

    /** Two tiers over one directory, interleaved: each finds its own, a third finds all that remain, whole. */
    @Test
    void twoServersShareADirectory(@TempDir Path dir) throws IOException {
        long budget = 12 * 50 * PER_POSITION;
        try (KvTiers one = tiers(MODEL, 0, dir, budget);
                KvTiers two = tiers(MODEL, 0, dir, budget)) {
            for (int i = 0; i < 20; i++) {
                one.put(tokens(1000 * (i + 1), 50), rows(50, i));
                two.put(tokens(1000 * (i + 1) + 500, 50), rows(50, 100 + i));
                two.put(tokens(1000 * (i + 1), 50), rows(50, i)); // the same conversation on both: the same file
            }
        }
        try (KvTiers third = tiers(MODEL, 0, dir, budget)) {
            assertTrue(third.diskEntries() > 0);
            for (int i = 0; i < 20; i++) {
                for (int first : new int[] {1000 * (i + 1), 1000 * (i + 1) + 500}) {
                    var hit = third.longest(tokens(first, 50), 49);
                    if (hit.isPresent()) {
                        long seed = first % 1000 == 0 ? i : 100 + i;
                        assertArrayEquals(
                                rows(50, seed), rowsOf(third, hit.get()).orElseThrow());
                    }
                }
            }
        }
    }

    /**
     * A disk that fills up (a 256 KiB tmpfs, mounted where the test may: as root) fails the write that does not fit
     * with a log line; what was written before stays whole and no partial file is left.
     */
    @Test
    void aFullDiskLosesNothingAlreadyWritten(@TempDir Path dir) throws Exception {
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir.toString())
                .redirectErrorStream(true)
                .start();
        Assumptions.assumeTrue(mount.waitFor() == 0, "mounting a tmpfs needs root");
        try {
            try (KvTiers t = tiers(MODEL, 0, dir, 1L << 30)) { // a budget the disk cannot hold
                for (int i = 0; i < 4; i++) {
                    t.put(tokens(1000 * (i + 1), 1000), rows(1000, i)); // 64 KB each: the fourth does not fit
                }
                assertEquals(3, t.diskEntries());
                assertTrue(files(dir, ".tmp").isEmpty(), "the failed write's temporary file is removed");
            }
            try (KvTiers after = tiers(MODEL, 0, dir, 1L << 30)) {
                assertEquals(3, after.diskEntries());
                for (int i = 0; i < 3; i++) {
                    assertArrayEquals(
                            rows(1000, i),
                            rowsOf(
                                            after,
                                            after.longest(tokens(1000 * (i + 1), 1000), 999)
                                                    .orElseThrow())
                                    .orElseThrow());
                }
            }
        } finally {
            new ProcessBuilder("umount", dir.toString()).start().waitFor();
        }
    }

    /** A process killed while it writes leaves no file under a final name that is not whole. */
    @Test
    void aKillDuringAWriteLeavesNoPartialFile(@TempDir Path dir, @TempDir Path logs) throws Exception {
        Path log = logs.resolve("writer.log");
        Process writer = new ProcessBuilder(
                        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "-cp",
                        System.getProperty("java.class.path"),
                        KvTiersWriter.class.getName(),
                        dir.toString())
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (files(dir, ".kv").size() < 3 && System.nanoTime() < deadline && writer.isAlive()) {
            Thread.sleep(5);
        }
        writer.destroyForcibly(); // SIGKILL
        writer.waitFor();
        assertTrue(files(dir, ".kv").size() >= 3, Files.readString(log));
        try (KvTiers after = tiers(MODEL, 0, dir, 1L << 30)) {
            for (int i = 0; i < 1000; i++) {
                var hit = after.longest(tokens(1000 * (i + 1), 2000), 1999);
                if (hit.isPresent()) {
                    assertArrayEquals(rows(2000, i), rowsOf(after, hit.get()).orElseThrow());
                }
            }
        }
    }

    /** The rows of {@code hit} in {@code tiers}, copied out of their mapping. */
    static Optional<byte[]> rowsOf(KvTiers tiers, KvTiers.Hit hit) {
        try (Arena arena = Arena.ofConfined()) {
            return tiers.rows(hit, arena).map(rows -> rows.toArray(ValueLayout.JAVA_BYTE));
        }
    }
}
