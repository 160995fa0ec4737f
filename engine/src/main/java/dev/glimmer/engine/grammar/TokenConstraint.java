package dev.glimmer.engine.grammar;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

/**
 * Keeps one generated sequence inside an {@link OutputGrammar}: before each token it says which
 * tokens may come next ({@link #allowed}), and it follows the tokens chosen ({@link #accept}).
 *
 * <p>While the model thinks (the grammar starts after {@code </think>}) any token but the end of
 * generation may come. Then the mask of a grammar state is computed by walking the vocabulary's trie
 * ({@link TokenTrie}) with the {@link Matcher}: a prefix the grammar refuses cuts off every token
 * that starts with it. The end-of-generation tokens are allowed where the grammar may end. Each
 * state keeps its mask, so a state met again (inside a long string, say) costs nothing.
 *
 * <p>The output always completes within the token limit: a token is allowed only when, after it,
 * the fewest tokens that finish the grammar ({@link Matcher#fewestTokensToEnd}) and the
 * end-of-generation token still fit in the tokens left; the thinking is closed in time for that too.
 * With random weights, too, the output is valid.
 */
public final class TokenConstraint {
    private static final byte[] THINK_END = "</think>".getBytes(StandardCharsets.UTF_8);

    private final TokenTrie trie;
    private final Matcher matcher;
    private final long[] allowedControl;
    private final int thinkEndToken;
    private final Matcher.State[] walkStates;
    private final long[] budgetMask;
    private boolean thinking;
    /** The last bytes of the thinking, to find {@code </think>} split over tokens. */
    private byte[] thinkingTail = new byte[0];

    private Matcher.State state;

    public TokenConstraint(OutputGrammar grammar, TokenTrie trie) {
        this.trie = trie;
        this.thinking = grammar.thinkingFirst();
        this.allowedControl = new long[TokenTrie.words(trie.vocabularySize)];
        int thinkEnd = -1;
        for (int i = 0; i < trie.controlIds.length; i++) {
            String text = new String(trie.controlBytes[i], StandardCharsets.UTF_8);
            if (grammar.controlTokens().contains(text)) {
                TokenTrie.set(allowedControl, trie.controlIds[i]);
            }
            if (Arrays.equals(trie.controlBytes[i], THINK_END)) {
                thinkEnd = trie.controlIds[i];
            }
        }
        this.thinkEndToken = thinkEnd;
        Set<String> oneToken = new HashSet<>();
        for (int i = 0; i < trie.controlIds.length; i++) {
            if (TokenTrie.allows(allowedControl, trie.controlIds[i])) {
                oneToken.add(new String(trie.controlBytes[i], StandardCharsets.UTF_8));
            }
        }
        this.matcher = new Matcher(grammar.grammar(), oneToken);
        this.state = matcher.start();
        this.walkStates = new Matcher.State[trie.maxDepth + 1];
        this.budgetMask = new long[TokenTrie.words(trie.vocabularySize)];
    }

    /**
     * The tokens that may come next, as a bit mask over the vocabulary (read it with
     * {@link TokenTrie#allows}; do not modify it).
     *
     * @param tokensLeft how many tokens may still be generated, this one included
     */
    public long[] allowed(int tokensLeft) {
        if (thinking) {
            // Room after this token for </think>, the shortest grammar text and the end of generation.
            long afterThinking = matcher.fewestTokensToEnd(matcher.start()) + 2;
            if (thinkEndToken >= 0 && tokensLeft - 1 < afterThinking) {
                Arrays.fill(budgetMask, 0);
                TokenTrie.set(budgetMask, thinkEndToken);
                return budgetMask;
            }
            return trie.allButEndOfGeneration;
        }
        Matcher.State s = state;
        if (s.mask == null) {
            s.mask = new long[budgetMask.length];
            s.maskLongestEnd = walk(s, Long.MAX_VALUE, s.mask);
        }
        // After this token, tokensLeft - 1 remain: the rest of the grammar and the end of generation.
        long room = tokensLeft - 2L;
        if (s.maskLongestEnd <= room) {
            return s.mask;
        }
        walk(s, room, budgetMask);
        for (long word : budgetMask) {
            if (word != 0) {
                return budgetMask;
            }
        }
        return s.mask; // the limit is too small for any complete output: at least stay in the grammar
    }

    /** Follows the token that was chosen. */
    public void accept(int token) {
        byte[] bytes = trie.piece(token);
        if (thinking) {
            byte[] joined = new byte[thinkingTail.length + bytes.length];
            System.arraycopy(thinkingTail, 0, joined, 0, thinkingTail.length);
            System.arraycopy(bytes, 0, joined, thinkingTail.length, bytes.length);
            int at = indexOf(joined, THINK_END);
            if (at < 0) {
                thinkingTail =
                        Arrays.copyOfRange(joined, Math.max(0, joined.length - THINK_END.length + 1), joined.length);
                return;
            }
            thinking = false;
            bytes = Arrays.copyOfRange(joined, at + THINK_END.length, joined.length);
        }
        if (!trie.isEndOfGeneration(token)) {
            state = matcher.next(state, bytes);
        }
    }

    /** True once the output is complete: nothing but the end of generation may follow. */
    public boolean complete() {
        return !thinking && state.accepting() && state.closed();
    }

    /** How many grammar states the matcher has met so far. */
    public int stateCount() {
        return matcher.stateCount();
    }

    /**
     * Sets in {@code mask} the tokens allowed in {@code s} after which at most {@code room} tokens
     * finish the grammar; returns the largest such distance among them.
     */
    private long walk(Matcher.State s, long room, long[] mask) {
        Arrays.fill(mask, 0);
        long longest = 0;
        Matcher.State dead = matcher.dead;
        Matcher.State[] states = walkStates;
        states[0] = s;
        byte[] label = trie.label;
        int[] depth = trie.depth;
        int[] subtreeEnd = trie.subtreeEnd;
        int[] from = trie.tokensFrom;
        int[] tokens = trie.tokens;
        int n = label.length;
        int i = 0;
        while (i < n) {
            int d = depth[i];
            Matcher.State parent = states[d - 1];
            int b = label[i] & 0xFF;
            Matcher.State next = parent.next[b];
            if (next == null) {
                next = matcher.next(parent, b);
            }
            if (next == dead) {
                i = subtreeEnd[i];
                continue;
            }
            states[d] = next;
            if (next == parent && loopsBelow(next, i)) {
                // Every byte below leads back here (a string's characters): the whole subtree is allowed as is.
                long toEnd = matcher.fewestTokensToEnd(next);
                if (toEnd <= room) {
                    longest = Math.max(longest, toEnd);
                    for (int k = from[i]; k < from[subtreeEnd[i]]; k++) {
                        TokenTrie.set(mask, tokens[k]);
                    }
                }
                i = subtreeEnd[i];
                continue;
            }
            if (from[i] != from[i + 1]) {
                long toEnd = matcher.fewestTokensToEnd(next);
                if (toEnd <= room) {
                    longest = Math.max(longest, toEnd);
                    for (int k = from[i]; k < from[i + 1]; k++) {
                        TokenTrie.set(mask, tokens[k]);
                    }
                }
            }
            i++;
        }
        for (int c = 0; c < trie.controlIds.length; c++) {
            int id = trie.controlIds[c];
            if (TokenTrie.allows(allowedControl, id)) {
                Matcher.State next = matcher.next(s, trie.controlBytes[c]);
                long toEnd = matcher.fewestTokensToEnd(next);
                if (next != dead && toEnd <= room) {
                    longest = Math.max(longest, toEnd);
                    TokenTrie.set(mask, id);
                }
            }
        }
        if (s.accepting()) {
            for (int id : trie.endOfGeneration) {
                TokenTrie.set(mask, id);
            }
        }
        return longest;
    }

    /** Whether every byte below trie node {@code node} leads from {@code s} back to {@code s}. */
    private boolean loopsBelow(Matcher.State s, int node) {
        long[] loop = matcher.loopBytes(s);
        long[] below = trie.below;
        int at = 4 * node;
        return (below[at] & ~loop[0]) == 0
                && (below[at + 1] & ~loop[1]) == 0
                && (below[at + 2] & ~loop[2]) == 0
                && (below[at + 3] & ~loop[3]) == 0;
    }

    private static int indexOf(byte[] haystack, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= haystack.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }
}
