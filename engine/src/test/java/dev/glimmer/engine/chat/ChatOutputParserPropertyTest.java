package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The same generated text cut into pieces at any boundaries gives the same result, and the deltas
 * streamed on the way join up to it.
 */
class ChatOutputParserPropertyTest {

    record Sample(boolean startInReasoning, String text) {}

    static final List<Sample> SAMPLES = List.of(
            new Sample(true, "I should greet.\n</think>Hello, <b>world</b>! 😀 café"),
            new Sample(false, "No thinking </think> here <tool_calls> <tool_ <"),
            new Sample(
                    true,
                    "Check weather.</think>Sure.<tool_call>get_weather<arg_key>city</arg_key>"
                            + "<arg_value>São Paulo \"SP\"\n</arg_value><arg_key>days</arg_key><arg_value> 3 </arg_value></tool_call>"),
            new Sample(
                    false,
                    "<tool_call>get_time</tool_call>\n\n<tool_call> get_weather \n<arg_key> city </arg_key>\n"
                            + "<arg_value>Oslo</arg_value>\n</tool_call>  "),
            new Sample(
                    false,
                    "<tool_call>write_file<arg_key>path</arg_key><arg_value>x.md</arg_value><arg_key>content"
                            + "</arg_key><arg_value># Title\n</arg <arg_value> \\ \t 👨‍👩‍👧 </arg_valu</arg_value></tool_call>after"),
            new Sample(
                    false,
                    "<tool_call>configure<arg_key>ratio</arg_key><arg_value>1e-5</arg_value><arg_key>limits"
                            + "</arg_key><arg_value>{\"a\": [1, {\"b\": null}]}</arg_value><arg_key>count</arg_key><arg_value>x1"
                            + "</arg_value><arg_key>tags</arg_key><arg_value>[]</arg_value></tool_call>"),
            new Sample(false, "<tool_call>get_weatherman<arg_key>a</arg_key><arg_value>b</arg_value></tool_call>x"),
            new Sample(
                    false,
                    "<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call><tool_call>get_time</tool_call>"),
            new Sample(false, "<tool_call>get_weather<arg_key>city<arg_value>Paris</arg_value></tool_call>"),
            new Sample(
                    true,
                    "thinking<tool_call>get_time</tool_call></think><tool_call>get_weather<arg_key>city</arg_key>"
                            + "<arg_value>Pa"),
            new Sample(
                    false,
                    "Text <tool_call>get_time</tool_call> and text after <tool_call><tool_call>get_time</tool_call>"),
            new Sample(false, "<tool_call>get_time</tool_call>  <tool_ca"));

    static ChatOutputParser parser(Sample sample) {
        AtomicInteger counter = new AtomicInteger();
        return new ChatOutputParser(
                sample.startInReasoning(), ChatOutputParserTest.tools(), () -> "call_" + counter.getAndIncrement());
    }

    /** Feeds the pieces between {@code cuts}; checks the streamed deltas against the parser's result. */
    static ChatResult parseInPieces(Sample sample, int... cuts) {
        ChatOutputParser parser = parser(sample);
        ChatResult.Builder streamed = new ChatResult.Builder();
        int from = 0;
        for (int cut : cuts) {
            streamed.addAll(parser.accept(sample.text().substring(from, cut)));
            from = cut;
        }
        streamed.addAll(parser.accept(sample.text().substring(from)));
        streamed.addAll(parser.finish());
        ChatResult result = parser.result();
        assertEquals(result, streamed.build(result.ending()), "streamed deltas join up to the result");
        return result;
    }

    @Test
    void oneCutAtEveryPositionGivesTheSameResult() {
        for (Sample sample : SAMPLES) {
            ChatResult whole = parseInPieces(sample);
            for (int cut = 0; cut <= sample.text().length(); cut++) {
                assertEquals(whole, parseInPieces(sample, cut), "cut at " + cut + " of " + sample.text());
            }
        }
    }

    @Test
    void twoCutsAtEveryPairOfPositionsGiveTheSameResult() {
        for (Sample sample : SAMPLES) {
            ChatResult whole = parseInPieces(sample);
            int n = sample.text().length();
            for (int a = 0; a <= n; a++) {
                for (int b = a; b <= n; b++) {
                    ChatResult r = parseInPieces(sample, a, b);
                    if (!whole.equals(r)) {
                        fail("cuts at " + a + ", " + b + " of " + sample.text() + ": " + r + " != " + whole);
                    }
                }
            }
        }
    }

    @Test
    void oneCharacterAtATimeAndRandomPiecesGiveTheSameResult() {
        Random random = new Random(47);
        for (Sample sample : SAMPLES) {
            ChatResult whole = parseInPieces(sample);
            int n = sample.text().length();
            int[] everyChar = new int[n];
            for (int i = 0; i < n; i++) {
                everyChar[i] = i;
            }
            assertEquals(whole, parseInPieces(sample, everyChar));
            for (int trial = 0; trial < 200; trial++) {
                List<Integer> cuts = new ArrayList<>();
                for (int at = random.nextInt(6); at < n; at += 1 + random.nextInt(6)) {
                    cuts.add(at);
                }
                assertEquals(
                        whole,
                        parseInPieces(
                                sample,
                                cuts.stream().mapToInt(Integer::intValue).toArray()),
                        "cuts " + cuts);
            }
        }
    }

    @Test
    void toolCallArgumentsAreJsonObjects() throws Exception {
        ObjectMapper json = new ObjectMapper();
        for (Sample sample : SAMPLES) {
            for (ChatResult.ParsedToolCall call : parseInPieces(sample).toolCalls()) {
                assertEquals(true, json.readTree(call.arguments()).isObject(), call.arguments());
            }
        }
    }

    @Test
    void textOutsideCompleteToolCallsIsNeverLost() {
        for (Sample sample : SAMPLES) {
            ChatResult r = parseInPieces(sample);
            if (!r.toolCalls().isEmpty()) {
                continue;
            }
            String rebuilt = sample.startInReasoning() && sample.text().contains("</think>")
                    ? r.reasoning() + "</think>" + r.content()
                    : r.reasoning() + r.content();
            assertEquals(sample.text(), rebuilt);
        }
    }

    @Test
    void theSamplesCoverEveryEnding() {
        List<OutputEnding> endings =
                SAMPLES.stream().map(s -> parseInPieces(s).ending()).distinct().toList();
        for (OutputEnding ending : OutputEnding.values()) {
            assertEquals(true, endings.contains(ending), "no sample ends with " + ending + ": " + endings);
        }
    }
}
