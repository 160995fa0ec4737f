package dev.glimmer.server.inference;

import java.nio.file.Path;

/** Writes conversations of 2,000 positions to the disk tier in {@code args[0]} until it is killed (KvTiersTest). */
public final class KvTiersWriter {
    public static void main(String[] args) {
        try (KvTiers t = KvTiersTest.tiers(KvTiersTest.MODEL, 0, Path.of(args[0]), 1L << 30)) {
            for (int i = 0; i < 1000; i++) {
                t.put(KvTiersTest.tokens(1000 * (i + 1), 2000), KvTiersTest.rows(2000, i));
            }
        }
    }
}
