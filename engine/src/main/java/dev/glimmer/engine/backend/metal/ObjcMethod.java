package dev.glimmer.engine.backend.metal;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * One Objective-C method as {@code objc_msgSend} calls it: its selector and the layouts of its
 * arguments and result, without the receiver and selector that every message starts with.
 * {@link MetalMethods} lists every method the Metal backend sends.
 *
 * @param selector the selector, e.g. {@code setKernelBuffer:offset:atIndex:}
 * @param returns  the result's layout; empty for {@code void}
 * @param args     one layout per argument, in order
 */
public record ObjcMethod(String selector, Optional<MemoryLayout> returns, List<MemoryLayout> args) {

    public ObjcMethod {
        args = List.copyOf(args);
        long colons = selector.chars().filter(c -> c == ':').count();
        if (colons != args.size()) {
            throw new IllegalArgumentException(
                    selector + " takes " + colons + " arguments, " + args.size() + " layouts given");
        }
    }

    /** A method returning {@code returns}. */
    public static ObjcMethod of(String selector, MemoryLayout returns, MemoryLayout... args) {
        return new ObjcMethod(selector, Optional.of(returns), List.of(args));
    }

    /** A method returning {@code void}. */
    public static ObjcMethod ofVoid(String selector, MemoryLayout... args) {
        return new ObjcMethod(selector, Optional.empty(), List.of(args));
    }

    /**
     * The C signature of {@code objc_msgSend} for this method: receiver and selector first. Never
     * variadic: on arm64 variadic arguments go on the stack, but the method reads them from registers.
     */
    public FunctionDescriptor descriptor() {
        List<MemoryLayout> all = new ArrayList<>();
        all.add(ValueLayout.ADDRESS);
        all.add(ValueLayout.ADDRESS);
        all.addAll(args);
        MemoryLayout[] a = all.toArray(MemoryLayout[]::new);
        return returns.map(r -> FunctionDescriptor.of(r, a)).orElseGet(() -> FunctionDescriptor.ofVoid(a));
    }
}
