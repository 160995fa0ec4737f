package dev.glimmer.engine.grammar;

import dev.glimmer.engine.tokenizer.TokenType;
import dev.glimmer.engine.tokenizer.Tokenizer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * A model's vocabulary arranged for computing token masks: the text tokens' bytes as a trie, laid
 * out in preorder in flat arrays, so that a walk reads each shared prefix once and skips the whole
 * subtree of a prefix the grammar refuses; besides it the end-of-generation tokens and the other
 * control tokens. Built once per model and shared (immutable).
 */
public final class TokenTrie {
    final int vocabularySize;
    /** Per trie node (preorder): its byte, its depth (1 for a first byte) and the index after its subtree. */
    final byte[] label;
    final int[] depth;
    final int[] subtreeEnd;
    /** The tokens whose bytes end at node i: {@code tokens[tokensFrom[i] .. tokensFrom[i+1])}. */
    final int[] tokensFrom;
    final int[] tokens;
    final int maxDepth;
    final int[] endOfGeneration;
    /** Non-end-of-generation control tokens and their texts. */
    final int[] controlIds;
    final byte[][] controlBytes;
    /** Every token that is not end-of-generation (the mask while the model thinks). */
    final long[] allButEndOfGeneration;
    private final long[] endOfGenerationMask;
    /** Each token's bytes, as the server's detokenizer prints them (control tokens as their text). */
    private final byte[][] pieces;

    private TokenTrie(Tokenizer tokenizer) {
        vocabularySize = tokenizer.vocabularySize();
        List<byte[]> texts = new ArrayList<>();
        List<Integer> ids = new ArrayList<>();
        List<Integer> eog = new ArrayList<>();
        List<Integer> controls = new ArrayList<>();
        allButEndOfGeneration = new long[words(vocabularySize)];
        endOfGenerationMask = new long[words(vocabularySize)];
        pieces = new byte[vocabularySize][];
        long totalBytes = 0;
        for (int id = 0; id < vocabularySize; id++) {
            byte[] bytes = tokenizer.piece(id, true);
            pieces[id] = bytes;
            TokenType type = tokenizer.tokenType(id);
            if (tokenizer.isEndOfGeneration(id)) {
                eog.add(id);
                set(endOfGenerationMask, id);
                continue;
            }
            if (bytes.length == 0 || type == TokenType.UNKNOWN) {
                continue; // prints nothing (or a placeholder): never a step forward
            }
            set(allButEndOfGeneration, id);
            if (type == TokenType.CONTROL) {
                controls.add(id);
            } else {
                texts.add(bytes);
                ids.add(id);
                totalBytes += bytes.length;
            }
        }
        Integer[] order = new Integer[texts.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, Comparator.comparing(texts::get, Arrays::compareUnsigned));

        int capacity = (int) Math.min(Integer.MAX_VALUE - 8, totalBytes + 1);
        byte[] label = new byte[capacity];
        int[] depth = new int[capacity];
        int[] end = new int[capacity];
        int[] from = new int[capacity + 1];
        int[] tokenList = new int[texts.size()];
        int nodes = 0;
        int listed = 0;
        int deepest = 0;
        int[] path = new int[64]; // path[d]: the open node at depth d (1-based)
        byte[] previous = new byte[0];
        for (int k : order) {
            byte[] t = texts.get(k);
            int common = 0;
            while (common < t.length && common < previous.length && t[common] == previous[common]) {
                common++;
            }
            // Nodes deeper than the shared prefix are complete: their subtrees end here.
            for (int d = common + 1; d <= previous.length; d++) {
                end[path[d]] = nodes;
            }
            for (int d = common; d < t.length; d++) {
                if (d + 1 >= path.length) {
                    path = Arrays.copyOf(path, path.length * 2);
                }
                label[nodes] = t[d];
                depth[nodes] = d + 1;
                from[nodes] = listed;
                path[d + 1] = nodes;
                nodes++;
            }
            tokenList[listed++] = ids.get(k);
            deepest = Math.max(deepest, t.length);
            previous = t;
        }
        for (int d = 1; d <= previous.length; d++) {
            end[path[d]] = nodes;
        }
        from[nodes] = listed;
        this.label = Arrays.copyOf(label, nodes);
        this.depth = Arrays.copyOf(depth, nodes);
        this.subtreeEnd = Arrays.copyOf(end, nodes);
        this.tokensFrom = Arrays.copyOf(from, nodes + 1);
        this.tokens = tokenList;
        this.maxDepth = deepest;
        this.endOfGeneration = eog.stream().mapToInt(Integer::intValue).toArray();
        this.controlIds = controls.stream().mapToInt(Integer::intValue).toArray();
        this.controlBytes = new byte[controlIds.length][];
        for (int i = 0; i < controlIds.length; i++) {
            controlBytes[i] = pieces[controlIds[i]];
        }
    }

    public static TokenTrie of(Tokenizer tokenizer) {
        return new TokenTrie(tokenizer);
    }

    public int vocabularySize() {
        return vocabularySize;
    }

    /** Trie nodes (distinct token prefixes), for statistics. */
    public int nodeCount() {
        return label.length;
    }

    byte[] piece(int token) {
        return pieces[token];
    }

    boolean isEndOfGeneration(int token) {
        return allows(endOfGenerationMask, token);
    }

    static int words(int bits) {
        return (bits + 63) >>> 6;
    }

    static void set(long[] mask, int token) {
        mask[token >>> 6] |= 1L << token;
    }

    /** Whether {@code token} is set in {@code mask} (a mask made by {@link TokenConstraint}). */
    public static boolean allows(long[] mask, int token) {
        return (mask[token >>> 6] & 1L << token) != 0;
    }
}
