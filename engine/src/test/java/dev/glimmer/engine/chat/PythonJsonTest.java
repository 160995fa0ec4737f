package dev.glimmer.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

/**
 * Expected strings are what python3 (3.11) printed here for {@code json.dumps(x)} /
 * {@code json.dumps(obj, ensure_ascii=False)} on the same values.
 */
class PythonJsonTest {

    @Test
    void floatsArePrintedLikePythonRepr() {
        double[] values = {
            1.0,
            1e-05,
            1e+20,
            1e16,
            1e15,
            0.0001,
            0.1,
            -2.5e-08,
            123456789.125,
            1.0 / 3,
            5e-324,
            1.7976931348623157e308,
            -0.0,
            100.0,
            0.1 + 0.2,
            9007199254740992.0,
            1234567890123456.7,
            12345678901234567.0
        };
        String[] python = {
            "1.0",
            "1e-05",
            "1e+20",
            "1e+16",
            "1000000000000000.0",
            "0.0001",
            "0.1",
            "-2.5e-08",
            "123456789.125",
            "0.3333333333333333",
            "5e-324",
            "1.7976931348623157e+308",
            "-0.0",
            "100.0",
            "0.30000000000000004",
            "9007199254740992.0",
            "1234567890123456.8",
            "1.2345678901234568e+16"
        };
        for (int i = 0; i < values.length; i++) {
            assertEquals(python[i], PythonJson.floatRepr(values[i]), "repr of " + values[i]);
        }
    }

    @Test
    void objectsKeepKeyOrderSeparatorsAndNonAscii() throws Exception {
        String json =
                "{\"a\": [1, 2.5, true, null, {}, []], \"é\": \"x\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\\u2028😀\","
                        + " \"n\": 12345678901234567890123}";
        String python =
                "{\"a\": [1, 2.5, true, null, {}, []], \"é\": \"x\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\u007f\u2028😀\","
                        + " \"n\": 12345678901234567890123}";
        assertEquals(python, PythonJson.dumps(new ObjectMapper().readTree(json)));
    }

    @Test
    void numbersWrittenAsFloatsInJsonStayFloats() throws Exception {
        // json.dumps(json.loads('[1E5, 0.50, 1e-7, 3, -0]')) == '[100000.0, 0.5, 1e-07, 3, 0]'
        assertEquals(
                "[100000.0, 0.5, 1e-07, 3, 0]",
                PythonJson.dumps(new ObjectMapper().readTree("[1E5, 0.50, 1e-7, 3, -0]")));
    }
}
