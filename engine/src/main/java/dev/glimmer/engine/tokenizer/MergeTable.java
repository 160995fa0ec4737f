package dev.glimmer.engine.tokenizer;

/**
 * The BPE merge rules keyed by the pair of symbol ids they join: {@code rank(left, right)} is the
 * merge's priority (its line number in {@code tokenizer.ggml.merges}, lower merges first) and
 * {@code merged(rank)} the id of the joined symbol. An open-addressing table of primitive longs, so
 * that a lookup in the merge loop costs one hash and no allocation.
 */
final class MergeTable {
    private static final long EMPTY = -1L;

    private final long[] keys;
    private final int[] ranks;
    private final int mask;
    private final int[] mergedByRank;

    /**
     * @param lefts   left symbol id of each merge, indexed by rank; -1 for a merge that can never apply
     * @param rights  right symbol id of each merge, indexed by rank
     * @param merged  id of the joined symbol, indexed by rank
     */
    MergeTable(int[] lefts, int[] rights, int[] merged) {
        int capacity = Integer.highestOneBit(Math.max(4, lefts.length * 2 - 1)) << 1;
        keys = new long[capacity];
        ranks = new int[capacity];
        mask = capacity - 1;
        java.util.Arrays.fill(keys, EMPTY);
        mergedByRank = merged.clone();
        for (int rank = 0; rank < lefts.length; rank++) {
            if (lefts[rank] >= 0 && rights[rank] >= 0) {
                putIfAbsent(key(lefts[rank], rights[rank]), rank);
            }
        }
    }

    private static long key(int left, int right) {
        return ((long) left << 32) | (right & 0xFFFFFFFFL);
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 29)) & mask;
    }

    /** A pair listed twice keeps its first (lowest) rank, as llama.cpp does. */
    private void putIfAbsent(long key, int rank) {
        int i = slot(key);
        while (keys[i] != EMPTY) {
            if (keys[i] == key) {
                return;
            }
            i = (i + 1) & mask;
        }
        keys[i] = key;
        ranks[i] = rank;
    }

    /** The rank of merging {@code left} then {@code right}, or -1 if no rule joins them. */
    int rank(int left, int right) {
        long key = key(left, right);
        int i = slot(key);
        while (true) {
            long k = keys[i];
            if (k == key) {
                return ranks[i];
            }
            if (k == EMPTY) {
                return -1;
            }
            i = (i + 1) & mask;
        }
    }

    /** The id of the symbol the merge of this rank produces. */
    int merged(int rank) {
        return mergedByRank[rank];
    }
}
