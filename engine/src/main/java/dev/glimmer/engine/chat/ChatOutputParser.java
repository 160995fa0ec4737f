package dev.glimmer.engine.chat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Splits GLM-4.7-Flash output text into reasoning, content and tool calls while it streams in.
 *
 * <p>The text is fed in pieces of any size ({@link #accept}) and {@link #finish} is called at the
 * end of generation. The parser is a state machine:
 * <pre>
 *   REASONING --&lt;/think&gt;--&gt; CONTENT --&lt;tool_call&gt;--&gt; CALL_NAME --&gt; BEFORE_ARGUMENT
 *   BEFORE_ARGUMENT --&lt;arg_key&gt;--&gt; ARGUMENT_KEY --&lt;/arg_key&gt;--&gt; BEFORE_VALUE
 *   BEFORE_VALUE --&lt;arg_value&gt;--&gt; ARGUMENT_VALUE --&lt;/arg_value&gt;--&gt; BEFORE_ARGUMENT
 *   BEFORE_ARGUMENT --&lt;/tool_call&gt;--&gt; AFTER_CALL --&lt;tool_call&gt;--&gt; CALL_NAME, or other text --&gt; CONTENT
 * </pre>
 * Text is passed on as soon as it cannot be part of a tag; only a tail that could still become
 * one is held back, so a tag split over several pieces is still recognised. Whitespace between the
 * parts of a tool call is layout and dropped. A string argument's value streams as pieces of a
 * JSON string; other values are read whole as JSON (see {@link ArgumentJson}).
 *
 * <p>No text is lost: a {@code <tool_call>} naming a tool the request did not offer, one that
 * breaks the format, or one cut off by the end of generation is given back as content (the
 * started call then never gets its {@link ChatDelta.ToolCallEnd}) and {@link ChatResult#ending()}
 * says which of these happened.
 */
public final class ChatOutputParser {

    static final String THINK_END = "</think>";
    static final String CALL_START = "<tool_call>";
    static final String CALL_END = "</tool_call>";
    static final String KEY_START = "<arg_key>";
    static final String KEY_END = "</arg_key>";
    static final String VALUE_START = "<arg_value>";
    static final String VALUE_END = "</arg_value>";
    private static final List<String> CALL_TAGS =
            List.of(CALL_START, CALL_END, KEY_START, KEY_END, VALUE_START, VALUE_END);

    private enum State {
        REASONING,
        CONTENT,
        CALL_NAME,
        BEFORE_ARGUMENT,
        ARGUMENT_KEY,
        BEFORE_VALUE,
        ARGUMENT_VALUE,
        AFTER_CALL
    }

    private final Map<String, ToolSpec> tools = new LinkedHashMap<>();
    private final Supplier<String> ids;
    private final ChatResult.Builder result = new ChatResult.Builder();
    /** Text received and not yet passed on. */
    private final StringBuilder pending = new StringBuilder();
    /** The raw text of the tool call being read, given back as content if the call goes wrong. */
    private final StringBuilder block = new StringBuilder();

    private State state;
    private OutputEnding ending = OutputEnding.NORMAL;
    private boolean finished;
    /** The tool of the call being read, once its name is known and offered. */
    private ToolSpec currentTool;

    private int callIndex;
    private int argumentCount;
    private String argumentKey;
    private boolean valueIsString;
    /** The deltas of the current {@link #accept} or {@link #finish} call. */
    private List<ChatDelta> out;

    /**
     * @param startInReasoning true when the prompt ends with {@code <think>} (thinking on)
     * @param tools            the tools the request offered; calls to others are returned as content
     */
    public ChatOutputParser(boolean startInReasoning, List<ToolSpec> tools) {
        this(startInReasoning, tools, ChatOutputParser::randomCallId);
    }

    /** @param ids makes the id of each tool call, e.g. a counter in tests */
    public ChatOutputParser(boolean startInReasoning, List<ToolSpec> tools, Supplier<String> ids) {
        this.state = startInReasoning ? State.REASONING : State.CONTENT;
        this.ids = ids;
        for (ToolSpec tool : tools) {
            this.tools.putIfAbsent(tool.name(), tool);
        }
    }

    /** The parser for the output of {@code request}'s prompt. */
    public static ChatOutputParser forRequest(ChatRequest request) {
        return new ChatOutputParser(request.startsInReasoning(), request.tools());
    }

    /** Feeds the next piece of generated text; returns what can be passed on now. */
    public List<ChatDelta> accept(String text) {
        if (finished) {
            throw new IllegalStateException("accept after finish");
        }
        out = new ArrayList<>();
        pending.append(text);
        while (step(false)) {
            // each step consumes text or changes state
        }
        return publish();
    }

    /**
     * Whether the text so far is all reasoning: the {@code </think>} that ends it has not come yet. A
     * token read while this holds is part of the reasoning (or is its end), not of the reply.
     */
    public boolean inReasoning() {
        return state == State.REASONING;
    }

    /** Ends the output: passes on everything held back. */
    public List<ChatDelta> finish() {
        if (finished) {
            throw new IllegalStateException("finish called twice");
        }
        finished = true;
        out = new ArrayList<>();
        while (step(true)) {
            // as in accept, but nothing is held back for text still to come
        }
        switch (state) {
            case REASONING, CONTENT -> {
                // step(true) passed everything on
            }
            case AFTER_CALL -> {
                if (!PythonText.strip(pending.toString()).isEmpty()) {
                    emit(new ChatDelta.Content(pending.toString()));
                }
            }
            default -> {
                noteProblem(OutputEnding.UNTERMINATED_TOOL_CALL);
                emit(new ChatDelta.Content(block.toString() + pending));
            }
        }
        pending.setLength(0);
        return publish();
    }

    /** The whole output, after {@link #finish}. */
    public ChatResult result() {
        if (!finished) {
            throw new IllegalStateException("result before finish");
        }
        return result.build(ending);
    }

    /** Parses a complete output at once. */
    public ChatResult parse(String text) {
        accept(text);
        finish();
        return result();
    }

    /** One move of the state machine; false when it must wait for more text. */
    private boolean step(boolean atEnd) {
        return switch (state) {
            case REASONING -> {
                boolean ended = passTextUntil(THINK_END, ChatDelta.Reasoning::new, atEnd);
                if (ended) {
                    state = State.CONTENT;
                }
                yield ended;
            }
            case CONTENT -> {
                boolean callStarts = passTextUntil(CALL_START, ChatDelta.Content::new, atEnd);
                if (callStarts) {
                    startBlock();
                }
                yield callStarts;
            }
            case CALL_NAME -> readCallName();
            case BEFORE_ARGUMENT -> beforeArgument();
            case ARGUMENT_KEY -> readArgumentKey();
            case BEFORE_VALUE -> beforeValue();
            case ARGUMENT_VALUE -> readArgumentValue();
            case AFTER_CALL -> afterCall();
        };
    }

    /**
     * Passes on text up to {@code tag} and consumes the tag (true), or, when the tag has not come
     * (false), passes on all but a tail that could be its beginning.
     */
    private boolean passTextUntil(String tag, Function<String, ChatDelta> kind, boolean atEnd) {
        int at = pending.indexOf(tag);
        int upTo = at >= 0 ? at : pending.length() - (atEnd ? 0 : possibleTagStart(List.of(tag)));
        if (upTo > 0) {
            emit(kind.apply(pending.substring(0, upTo)));
            pending.delete(0, upTo);
        }
        if (at < 0) {
            return false;
        }
        pending.delete(0, tag.length());
        return true;
    }

    private void startBlock() {
        block.setLength(0);
        block.append(CALL_START);
        state = State.CALL_NAME;
    }

    private boolean readCallName() {
        List<String> ends = List.of(KEY_START, CALL_END);
        int at = earliest(ends);
        String nameText = pending.substring(0, at >= 0 ? at : pending.length() - possibleTagStart(ends));
        if (at < 0) {
            if (couldBeToolName(nameText)) {
                return false;
            }
            abandonCall(OutputEnding.UNKNOWN_TOOL);
            return true;
        }
        ToolSpec tool = tools.get(PythonText.strip(nameText));
        if (tool == null) {
            abandonCall(OutputEnding.UNKNOWN_TOOL);
            return true;
        }
        consume(at);
        currentTool = tool;
        argumentCount = 0;
        emit(new ChatDelta.ToolCallStart(callIndex, ids.get(), tool.name()));
        emit(new ChatDelta.ToolCallArguments(callIndex, "{"));
        state = State.BEFORE_ARGUMENT;
        return true;
    }

    /** Whether {@code text} (what follows {@code <tool_call>} so far) can still become an offered tool's name. */
    private boolean couldBeToolName(String text) {
        String name = PythonText.strip(text);
        boolean complete = !name.isEmpty() && PythonText.isSpace(text.charAt(text.length() - 1));
        if (complete) {
            return tools.containsKey(name);
        }
        return tools.keySet().stream().anyMatch(n -> n.startsWith(name));
    }

    private boolean beforeArgument() {
        int spaces = leadingSpaces();
        String rest = pending.substring(spaces);
        if (rest.startsWith(KEY_START)) {
            consume(spaces + KEY_START.length());
            state = State.ARGUMENT_KEY;
            return true;
        }
        if (rest.startsWith(CALL_END)) {
            consume(spaces + CALL_END.length());
            emit(new ChatDelta.ToolCallArguments(callIndex, "}"));
            emit(new ChatDelta.ToolCallEnd(callIndex));
            callIndex++;
            currentTool = null;
            block.setLength(0);
            state = State.AFTER_CALL;
            return true;
        }
        return waitForTag(spaces, rest, KEY_START, CALL_END);
    }

    private boolean readArgumentKey() {
        int at = earliest(CALL_TAGS);
        if (at < 0) {
            return false;
        }
        String key = PythonText.strip(pending.substring(0, at));
        if (!pending.substring(at).startsWith(KEY_END) || key.isEmpty()) {
            abandonCall(OutputEnding.MALFORMED_TOOL_CALL);
            return true;
        }
        consume(at + KEY_END.length());
        argumentKey = key;
        state = State.BEFORE_VALUE;
        return true;
    }

    private boolean beforeValue() {
        int spaces = leadingSpaces();
        String rest = pending.substring(spaces);
        if (rest.startsWith(VALUE_START)) {
            consume(spaces + VALUE_START.length());
            valueIsString = currentTool.isStringParameter(argumentKey);
            if (valueIsString) {
                emit(new ChatDelta.ToolCallArguments(
                        callIndex, argumentSeparator() + ArgumentJson.quote(argumentKey) + ":\""));
            }
            state = State.ARGUMENT_VALUE;
            return true;
        }
        return waitForTag(spaces, rest, VALUE_START);
    }

    private boolean readArgumentValue() {
        int at = pending.indexOf(VALUE_END);
        if (valueIsString) {
            // Stream the value as it comes, as the inside of a JSON string.
            int upTo = at >= 0 ? at : pending.length() - possibleTagStart(List.of(VALUE_END));
            if (upTo > 0) {
                emit(new ChatDelta.ToolCallArguments(callIndex, ArgumentJson.escape(pending.substring(0, upTo))));
                consume(upTo);
            }
            if (at < 0) {
                return false;
            }
            consume(VALUE_END.length());
            emit(new ChatDelta.ToolCallArguments(callIndex, "\""));
        } else {
            // A number, object, ... can only be read whole.
            if (at < 0) {
                return false;
            }
            String raw = pending.substring(0, at);
            consume(at + VALUE_END.length());
            emit(new ChatDelta.ToolCallArguments(
                    callIndex, argumentSeparator() + ArgumentJson.quote(argumentKey) + ":" + ArgumentJson.typed(raw)));
        }
        state = State.BEFORE_ARGUMENT;
        return true;
    }

    private boolean afterCall() {
        int spaces = leadingSpaces();
        String rest = pending.substring(spaces);
        if (rest.startsWith(CALL_START)) {
            pending.delete(0, spaces + CALL_START.length());
            startBlock();
            return true;
        }
        if (rest.isEmpty() || CALL_START.startsWith(rest)) {
            return false; // perhaps another call follows
        }
        state = State.CONTENT; // text after the calls (with the whitespace before it) is content
        return true;
    }

    /**
     * Inside a call where only whitespace and one of {@code tags} may come: waits while
     * {@code rest} may still become one, else the call is malformed.
     */
    private boolean waitForTag(int spaces, String rest, String... tags) {
        for (String tag : tags) {
            if (tag.startsWith(rest)) {
                consume(spaces);
                return false;
            }
        }
        abandonCall(OutputEnding.MALFORMED_TOOL_CALL);
        return true;
    }

    /** Gives the call's text so far back as content and reads on as content. */
    private void abandonCall(OutputEnding problem) {
        noteProblem(problem);
        emit(new ChatDelta.Content(block.toString()));
        block.setLength(0);
        if (currentTool != null) {
            callIndex++; // the started call stays without an end; the next one gets a new index
            currentTool = null;
        }
        state = State.CONTENT;
    }

    private void noteProblem(OutputEnding problem) {
        if (ending == OutputEnding.NORMAL) {
            ending = problem;
        }
    }

    private String argumentSeparator() {
        return argumentCount++ == 0 ? "" : ",";
    }

    /** Moves {@code n} characters of pending text into the current call's raw text. */
    private void consume(int n) {
        block.append(pending, 0, n);
        pending.delete(0, n);
    }

    private int leadingSpaces() {
        int n = 0;
        while (n < pending.length() && PythonText.isSpace(pending.charAt(n))) {
            n++;
        }
        return n;
    }

    /** Position of the first of {@code tags} in the pending text, or -1. */
    private int earliest(List<String> tags) {
        int first = -1;
        for (String tag : tags) {
            int at = pending.indexOf(tag);
            if (at >= 0 && (first < 0 || at < first)) {
                first = at;
            }
        }
        return first;
    }

    /** Length of the longest tail of the pending text that is the beginning of one of {@code tags}. */
    private int possibleTagStart(List<String> tags) {
        int longest = 0;
        for (String tag : tags) {
            for (int n = Math.min(tag.length() - 1, pending.length()); n > longest; n--) {
                if (pending.substring(pending.length() - n).equals(tag.substring(0, n))) {
                    longest = n;
                    break;
                }
            }
        }
        return longest;
    }

    /** Adds a delta, joining it to the previous one when both are text of the same kind. */
    private void emit(ChatDelta delta) {
        if (!out.isEmpty()) {
            ChatDelta last = out.getLast();
            ChatDelta joined = switch (delta) {
                case ChatDelta.Reasoning r
                when last instanceof ChatDelta.Reasoning l -> new ChatDelta.Reasoning(l.text() + r.text());
                case ChatDelta.Content c
                when last instanceof ChatDelta.Content l -> new ChatDelta.Content(l.text() + c.text());
                case ChatDelta.ToolCallArguments a
                when last instanceof ChatDelta.ToolCallArguments l && l.index() == a.index() ->
                    new ChatDelta.ToolCallArguments(a.index(), l.text() + a.text());
                default -> null;
            };
            if (joined != null) {
                out.set(out.size() - 1, joined);
                return;
            }
        }
        boolean emptyText = switch (delta) {
            case ChatDelta.Reasoning r -> r.text().isEmpty();
            case ChatDelta.Content c -> c.text().isEmpty();
            case ChatDelta.ToolCallArguments a -> a.text().isEmpty();
            default -> false;
        };
        if (!emptyText) {
            out.add(delta);
        }
    }

    private List<ChatDelta> publish() {
        List<ChatDelta> deltas = List.copyOf(out);
        result.addAll(deltas);
        out = null;
        return deltas;
    }

    private static String randomCallId() {
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        StringBuilder id = new StringBuilder("call_");
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int i = 0; i < 24; i++) {
            id.append(alphabet.charAt(random.nextInt(alphabet.length())));
        }
        return id.toString();
    }
}
