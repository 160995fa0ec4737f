package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.KernelTimings.KernelTime;
import dev.glimmer.engine.backend.KernelTimings.Profile;
import dev.glimmer.engine.backend.commandlist.ListRunner;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.Dispatch;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Times the graphs of a {@link CudaGraphRunner} kernel by kernel (see {@link KernelTimings}). */
final class CudaProfiler implements ListRunner.Profiler {

    /** Replays of a graph per timing: enough that launch jitter averages out, few enough for a quick bench. */
    private static final int PROFILE_REPLAYS = 20;
    /** Runs of the list dispatch by dispatch in {@link #byDispatch}; each kind's time is the median. */
    private static final int PROFILE_RUNS = 3;

    private final CudaGraphRunner runner;
    private final CudaDriver driver;
    private final MemorySegment stream;

    CudaProfiler(CudaGraphRunner runner) {
        this.runner = runner;
        this.driver = runner.driver;
        this.stream = runner.stream;
    }

    /**
     * Runs the graph once for real, then, with the same StepArgs, times it as captured and times, per kind of
     * dispatch, a graph of the same list without that kind's dispatches: the kind's time is the difference. The
     * dispatches left out leave their outputs as the real run wrote them, so the rest does the same work.
     */
    @Override
    public Profile byLeavingOut(ListRunner.Bound list, int rows) {
        CudaGraphRunner.Graph graph = runner.graph(list);
        double step = runAndTime(graph);
        List<KernelTime> out = new ArrayList<>();
        for (Map.Entry<String, List<Integer>> kind : byKind(graph).entrySet()) {
            boolean[] skip = new boolean[graph.list.dispatches().size()];
            kind.getValue().forEach(d -> skip[d] = true);
            MemorySegment without = graph.capture(skip);
            double rest;
            try {
                rest = timeGraph(without);
            } finally {
                driver.destroyGraph(without);
            }
            // Below the timer's noise a kind can measure a hair negative; it took no measurable time.
            out.add(kernelTime(graph, kind.getKey(), kind.getValue(), rows, Math.max(0, step - rest)));
        }
        return profiled(step, out, timeWithCopies(graph));
    }

    /**
     * Runs the graph once for real, times it as captured, then runs its list dispatch by dispatch with an event after
     * each, {@link #PROFILE_RUNS} times: a kind's time is the sum of its dispatches' (the median of the runs). For a
     * prompt batch, not {@link #byLeavingOut}: how many tiles the experts' kernels run depends on how the tokens are
     * routed, and leaving a kind out changes the data they are routed on (it summed to 2.4x the step); and a prompt
     * batch's dispatches run long enough (0.1 ms on average) that an event between two of them costs little.
     */
    @Override
    public Profile byDispatch(ListRunner.Bound list, int rows) {
        CudaGraphRunner.Graph graph = runner.graph(list);
        double step = runAndTime(graph);
        int n = graph.list.dispatches().size();
        double[][] millis = new double[PROFILE_RUNS][n];
        MemorySegment[] events = new MemorySegment[n + 1];
        try {
            for (int e = 0; e < events.length; e++) {
                events[e] = driver.newEvent();
            }
            for (double[] run : millis) {
                driver.record(events[0], stream);
                for (int d = 0; d < n; d++) {
                    graph.enqueue(d);
                    driver.record(events[d + 1], stream);
                }
                driver.synchronize(stream);
                for (int d = 0; d < n; d++) {
                    run[d] = driver.elapsedMillis(events[d], events[d + 1]);
                }
            }
        } finally {
            for (MemorySegment e : events) {
                if (e != null) {
                    driver.destroyEvent(e);
                }
            }
        }
        List<KernelTime> out = new ArrayList<>();
        for (Map.Entry<String, List<Integer>> kind : byKind(graph).entrySet()) {
            double[] runs = new double[PROFILE_RUNS];
            for (int r = 0; r < PROFILE_RUNS; r++) {
                for (int d : kind.getValue()) {
                    runs[r] += millis[r][d];
                }
            }
            Arrays.sort(runs);
            out.add(kernelTime(graph, kind.getKey(), kind.getValue(), rows, runs[PROFILE_RUNS / 2]));
        }
        return profiled(step, out, Double.NaN);
    }

    /** Runs {@code graph} once for real with the StepArgs written; returns its time as {@link #timeGraph}. */
    private double runAndTime(CudaGraphRunner.Graph graph) {
        runner.device.makeCurrent();
        driver.launchGraph(graph.exec, stream);
        driver.synchronize(stream);
        return timeGraph(graph.exec);
    }

    /** The indices of {@code graph}'s dispatches by {@link #kind}, in the order the kinds first come. */
    private static Map<String, List<Integer>> byKind(CudaGraphRunner.Graph graph) {
        Map<String, List<Integer>> byKind = new LinkedHashMap<>();
        List<Dispatch> dispatches = graph.list.dispatches();
        for (int d = 0; d < dispatches.size(); d++) {
            byKind.computeIfAbsent(kind(dispatches.get(d)), k -> new ArrayList<>())
                    .add(d);
        }
        return byKind;
    }

    /** The time of {@code kind}'s dispatches {@code ds} in a run of {@code rows} rows of {@code graph}. */
    private static KernelTime kernelTime(
            CudaGraphRunner.Graph graph, String kind, List<Integer> ds, int rows, double millis) {
        long bytes = 0;
        long multiplyAdds = 0;
        for (int d : ds) {
            Dispatch dispatch = graph.list.dispatches().get(d);
            bytes += dispatch.weightReads().stream()
                    .mapToLong(Dispatch.WeightRead::bytes)
                    .sum();
            // a dispatch's multiply-adds are those of a full list; a run of fewer rows does its rows' share
            // (all but a prompt list's output mat-vec of the last row, which is small)
            multiplyAdds += dispatch.multiplyAdds() * rows / graph.list.tokens();
        }
        return new KernelTime(kind, ds.size(), millis, bytes, multiplyAdds);
    }

    /** The profile of a step of {@code step} ms from its kinds' times. */
    private Profile profiled(double step, List<KernelTime> kinds, double withCopies) {
        kinds.sort((a, b) -> Double.compare(b.millis(), a.millis()));
        return new Profile(step, kinds, copyBandwidth(), withCopies);
    }

    /**
     * Milliseconds of one replay of {@code graph} with what a decode queues around each step: the StepArgs copied in
     * from pinned memory before it, a greedy token copied out to pinned memory and a fence recorded after it; still
     * back to back (the host waits for none), so the difference from {@link #timeGraph} is what those cost the device.
     */
    private double timeWithCopies(CudaGraphRunner.Graph graph) {
        int stepBuffer = graph.list.buffer(BufferSpec.Kind.STEP);
        long stepBytes = graph.list.buffers().get(stepBuffer).bytes();
        long step = graph.buffers[stepBuffer];
        MemorySegment args = driver.allocHost(stepBytes);
        MemorySegment token = driver.allocHost(4);
        MemorySegment fence = driver.newEvent(false);
        try {
            // the StepArgs the graph runs with, copied back in unchanged before each replay
            driver.copyToHostAsync(args, step, stepBytes, stream);
            driver.synchronize(stream);
            return timeReplays(() -> {
                driver.copyToDeviceAsync(step, args, stepBytes, stream);
                driver.launchGraph(graph.exec, stream);
                driver.copyToHostAsync(token, step, 4, stream);
                driver.record(fence, stream);
            });
        } finally {
            driver.destroyEvent(fence);
            driver.freeHost(token);
            driver.freeHost(args);
        }
    }

    /** Milliseconds of one replay of {@code exec}, as {@link #timeReplays} times it. */
    private double timeGraph(MemorySegment exec) {
        driver.launchGraph(exec, stream);
        return timeReplays(() -> driver.launchGraph(exec, stream));
    }

    /**
     * Milliseconds of one {@code replay} (work it queues on the stream): the median of five timings of
     * {@link #PROFILE_REPLAYS} back-to-back replays.
     */
    private double timeReplays(Runnable replay) {
        MemorySegment start = driver.newEvent();
        MemorySegment end = driver.newEvent();
        try {
            double[] times = new double[5];
            for (int t = 0; t < times.length; t++) {
                driver.record(start, stream);
                for (int r = 0; r < PROFILE_REPLAYS; r++) {
                    replay.run();
                }
                driver.record(end, stream);
                driver.synchronize(stream);
                times[t] = driver.elapsedMillis(start, end) / PROFILE_REPLAYS;
            }
            Arrays.sort(times);
            return times[times.length / 2];
        } finally {
            driver.destroyEvent(start);
            driver.destroyEvent(end);
        }
    }

    /** Bytes read and written per second by a 256 MB device-to-device copy, in GB/s (the median of five). */
    private double copyBandwidth() {
        long bytes = 256L << 20;
        long a = driver.alloc(bytes);
        long b = 0;
        MemorySegment start = driver.newEvent();
        MemorySegment end = driver.newEvent();
        try {
            b = driver.alloc(bytes);
            driver.copyDeviceAsync(b, a, bytes, stream);
            double[] rates = new double[5];
            for (int t = 0; t < rates.length; t++) {
                driver.record(start, stream);
                driver.copyDeviceAsync(b, a, bytes, stream);
                driver.record(end, stream);
                driver.synchronize(stream);
                rates[t] = 2.0 * bytes / (driver.elapsedMillis(start, end) * 1e6);
            }
            Arrays.sort(rates);
            return rates[rates.length / 2];
        } finally {
            driver.destroyEvent(start);
            driver.destroyEvent(end);
            driver.free(a);
            if (b != 0) {
                driver.free(b);
            }
        }
    }

    /** The kernel, and for mat_vec, mat_mat and mat_mat_float the weight it multiplies (the same kernel runs very different shapes). */
    private static String kind(Dispatch d) {
        if (!d.kernel().startsWith("mat_") || d.weightReads().isEmpty()) {
            return d.kernel();
        }
        return d.kernel() + " " + d.weightReads().getFirst().tensor().replaceFirst("^blk\\.\\d+\\.", "");
    }
}
