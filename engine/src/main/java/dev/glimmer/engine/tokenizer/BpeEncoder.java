package dev.glimmer.engine.tokenizer;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Byte-level BPE on one word: the word's UTF-8 bytes start as one symbol each; then, repeatedly, the
 * adjacent pair with the lowest merge rank is joined (the leftmost one among equal ranks), until no
 * adjacent pair has a merge rule. The symbols left are the word's tokens.
 *
 * <p>Symbols are ids. A merge result or byte that is not itself a vocabulary entry (possible in an
 * unusual vocabulary) gets a "virtual" id above the vocabulary so merging can go on exactly as with
 * text; if such a symbol survives it is emitted as llama.cpp does: each of its characters that is a
 * single-character token, the rest dropped.
 *
 * <p>Results for short words are cached: natural text repeats its words a lot. The cache is bounded
 * and shared between threads; everything else lives in a per-call {@link Scratch}.
 */
final class BpeEncoder {
    /** Words up to this many bytes are cached; longer ones are rare and cheap to redo. */
    private static final int MAX_CACHED_WORD_BYTES = 48;

    private static final int MAX_CACHE_ENTRIES = 1 << 17;

    private final MergeTable merges;
    private final int[] byteSymbol;
    private final int vocabularySize;
    /** For each virtual symbol (id - vocabularySize): the tokens it falls back to if it survives. */
    private final int[][] virtualFallback;

    private final Map<String, int[]> cache = new ConcurrentHashMap<>();

    BpeEncoder(MergeTable merges, int[] byteSymbol, int vocabularySize, int[][] virtualFallback) {
        this.merges = merges;
        this.byteSymbol = byteSymbol.clone();
        this.vocabularySize = vocabularySize;
        this.virtualFallback = virtualFallback;
    }

    /** Working memory for one encoding call; grows to the longest word seen, never to the text. */
    static final class Scratch {
        byte[] utf8 = new byte[64];
        int[] symbols = new int[64];
        int[] prev = new int[64];
        int[] next = new int[64];
        long[] heap = new long[64];
        final IntList wordTokens = new IntList(16);

        void ensure(int bytes) {
            if (symbols.length < bytes) {
                int n = Math.max(bytes, symbols.length * 2);
                symbols = new int[n];
                prev = new int[n];
                next = new int[n];
                heap = new long[n * 2];
            }
        }

        byte[] utf8(int bytes) {
            if (utf8.length < bytes) {
                utf8 = new byte[Math.max(bytes, utf8.length * 2)];
            }
            return utf8;
        }
    }

    /**
     * Encodes the word {@code text[from..to)} (no unpaired surrogates) and appends its tokens to {@code out}.
     */
    void encodeWord(String text, int from, int to, Scratch s, IntList out) {
        byte[] utf8 = s.utf8((to - from) * 3);
        int n = Utf8.encode(text, from, to, utf8);
        if (n <= MAX_CACHED_WORD_BYTES) {
            String key = text.substring(from, to);
            int[] cached = cache.get(key);
            if (cached == null) {
                s.wordTokens.clear();
                merge(utf8, n, s, s.wordTokens);
                cached = s.wordTokens.toArray();
                if (cache.size() < MAX_CACHE_ENTRIES) {
                    cache.put(key, cached);
                }
            }
            out.addAll(cached);
        } else {
            merge(utf8, n, s, out);
        }
    }

    private void merge(byte[] utf8, int n, Scratch s, IntList out) {
        s.ensure(n);
        int[] sym = s.symbols;
        int[] prev = s.prev;
        int[] next = s.next;
        for (int i = 0; i < n; i++) {
            sym[i] = byteSymbol[utf8[i] & 0xFF];
            prev[i] = i - 1;
            next[i] = i + 1 < n ? i + 1 : -1;
        }
        Heap heap = new Heap(s.heap);
        for (int i = 0; i + 1 < n; i++) {
            offer(heap, sym, i, i + 1);
        }
        while (heap.size > 0) {
            long top = heap.poll();
            int rank = (int) (top >>> 32);
            int left = (int) top;
            int right = next[left];
            // Skip entries made stale by an earlier merge: the pair must still be the one queued.
            if (sym[left] < 0 || right < 0 || merges.rank(sym[left], sym[right]) != rank) {
                continue;
            }
            sym[left] = merges.merged(rank);
            sym[right] = -1;
            int after = next[right];
            next[left] = after;
            if (after >= 0) {
                prev[after] = left;
            }
            if (prev[left] >= 0) {
                offer(heap, sym, prev[left], left);
            }
            if (after >= 0) {
                offer(heap, sym, left, after);
            }
        }
        s.heap = heap.array;
        for (int i = 0; i >= 0; i = next[i]) {
            int id = sym[i];
            if (id < vocabularySize) {
                out.add(id);
            } else {
                out.addAll(virtualFallback[id - vocabularySize]);
            }
        }
    }

    private void offer(Heap heap, int[] sym, int left, int right) {
        int rank = merges.rank(sym[left], sym[right]);
        if (rank >= 0) {
            heap.add(((long) rank << 32) | left);
        }
    }

    /** A binary min-heap of (rank, left position) keys packed in longs: lowest rank first, then leftmost. */
    private static final class Heap {
        long[] array;
        int size;

        Heap(long[] array) {
            this.array = array;
        }

        void add(long v) {
            if (size == array.length) {
                array = Arrays.copyOf(array, size * 2);
            }
            int i = size++;
            while (i > 0) {
                int parent = (i - 1) >>> 1;
                if (array[parent] <= v) {
                    break;
                }
                array[i] = array[parent];
                i = parent;
            }
            array[i] = v;
        }

        long poll() {
            long top = array[0];
            long last = array[--size];
            int i = 0;
            int half = size >>> 1;
            while (i < half) {
                int child = 2 * i + 1;
                if (child + 1 < size && array[child + 1] < array[child]) {
                    child++;
                }
                if (last <= array[child]) {
                    break;
                }
                array[i] = array[child];
                i = child;
            }
            if (size > 0) {
                array[i] = last;
            }
            return top;
        }
    }
}
