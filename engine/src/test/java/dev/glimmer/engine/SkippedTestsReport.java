package dev.glimmer.engine;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Says on the console why tests were skipped (the GPU tests without a CUDA device): one line per
 * reason with the number of tests, at the end of each run. Surefire keeps a skipped test's reason in its
 * XML report only and sends the tests' own output to files; the test JVM's native stderr still reaches
 * the console. Registered in {@code META-INF/services}.
 */
public final class SkippedTestsReport implements TestExecutionListener {
    private final Map<String, List<String>> testsByReason = new LinkedHashMap<>();

    @Override
    public void executionSkipped(TestIdentifier test, String reason) {
        add(test, reason);
    }

    /** A failed assumption ends a test as aborted; surefire counts it as skipped. */
    @Override
    public void executionFinished(TestIdentifier test, TestExecutionResult result) {
        if (result.getStatus() == TestExecutionResult.Status.ABORTED) {
            add(
                    test,
                    result.getThrowable()
                            .map(Throwable::getMessage)
                            .orElse("aborted")
                            .replaceFirst("^Assumption failed: ", ""));
        }
    }

    private synchronized void add(TestIdentifier test, String reason) {
        String name = test.getSource()
                .filter(MethodSource.class::isInstance)
                .map(MethodSource.class::cast)
                .map(m -> m.getClassName().substring(m.getClassName().lastIndexOf('.') + 1) + "." + m.getMethodName())
                .orElse(test.getDisplayName());
        testsByReason
                .computeIfAbsent(String.valueOf(reason), r -> new ArrayList<>())
                .add(name);
    }

    @Override
    public synchronized void testPlanExecutionFinished(TestPlan plan) {
        if (testsByReason.isEmpty()) {
            return;
        }
        PrintStream console = new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8);
        testsByReason.forEach((reason, tests) -> console.println("[SKIPPED] " + tests.size() + " test"
                + (tests.size() == 1 ? "" : "s") + " (" + String.join(", ", tests.subList(0, Math.min(3, tests.size())))
                + (tests.size() > 3 ? ", ..." : "") + "): " + reason));
        testsByReason.clear();
    }
}
