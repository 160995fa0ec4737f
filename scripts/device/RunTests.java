import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

import java.io.PrintWriter;
import java.util.Arrays;
import java.util.List;

/**
 * Runs test classes with the JUnit launcher where there is no Maven (the GPU machines of
 * {@code scripts/device-kit.sh}): one line per test with its result, then the summary and the failures.
 * Exit code 0 when tests ran and none failed or was skipped: on a GPU machine a GPU test skipped for
 * want of a device is a failure.
 */
public final class RunTests {

    public static void main(String[] classes) {
        List<DiscoverySelector> selectors = Arrays.stream(classes).map(c -> (DiscoverySelector) DiscoverySelectors.selectClass(c)).toList();
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(selectors).build();
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        TestExecutionListener each = new TestExecutionListener() {
            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult result) {
                if (id.isTest()) {
                    System.out.println(result.getStatus() + " " + id.getUniqueId()
                            + result.getThrowable().map(t -> " " + t).orElse(""));
                }
            }

            @Override
            public void executionSkipped(TestIdentifier id, String reason) {
                System.out.println("SKIPPED " + id.getUniqueId() + " " + reason);
            }
        };
        launcher.execute(request, summary, each);
        TestExecutionSummary result = summary.getSummary();
        PrintWriter out = new PrintWriter(System.out, true);
        result.printTo(out);
        result.printFailuresTo(out, 30);
        boolean passed = result.getTestsFoundCount() > 0 && result.getTotalFailureCount() == 0
                && result.getTestsAbortedCount() == 0 && result.getTestsSkippedCount() == 0;
        System.exit(passed ? 0 : 1);
    }
}
