package dev.glimmer.server.cli;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.choice.SelfTest;
import dev.glimmer.kernels.emulator.EmulatorBuild;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer selftest}: checks a GPU decode path against the CPU backend on built-in tiny
 * models (the check {@code serve} also runs before it trusts Metal). Exit code 1 when it disagrees.
 */
@Command(
        name = "selftest",
        description =
                "check the GPU decode step and prompt command list (Metal, CUDA, or the CPU emulator) against the CPU backend",
        footer = """
                Decodes a fixed token sequence on tiny built-in models (F32, F16, Q8_0, Q4_0 weights) on the GPU path and
                on the CPU backend, token by token (the decode step) and as one prompt (the prompt command list), and
                prints per model and check the largest logit difference, its limit and where it occurred (for a decode
                step on Metal also the first layer that is off and its kernels).
                emulated runs the same kernels and command list on the CPU kernel emulator (needs clang-19).
                Exit code 0 when every check passes, 1 when one fails, 2 when the backend cannot run here.""")
final class SelftestCommand implements Subcommand {

    @Option(
            names = "--backend",
            paramLabel = "B",
            description = "auto (default: metal on macOS/Apple Silicon, cuda where"
                    + " an NVIDIA GPU is, else emulated), metal, cuda or emulated")
    String backendName = "auto";

    @Override
    public int run(Terminal io) {
        BackendKind backend;
        try {
            backend = BackendKind.parse(backendName, BackendKind.SELF_TEST);
        } catch (InvalidInputException e) {
            throw new UsageException(
                    "--backend must be one of " + BackendKind.names(BackendKind.SELF_TEST) + ", got " + backendName);
        }
        if (Backends.selfTestTarget(backend) == BackendKind.EMULATED && !EmulatorBuild.compilerFound()) {
            // A missing prerequisite, said before anything starts: exit 2, one line.
            throw new InvalidInputException("the emulated self-test (the GPU kernels run on the CPU, what selftest runs"
                    + " without Metal or an NVIDIA GPU) needs clang-19, which is not on the PATH: "
                    + EmulatorBuild.INSTALL_COMPILER);
        }
        io.err()
                .println(
                        "selftest: decoding built-in tiny models on the GPU path and on the CPU (about a minute on the emulator)");
        SelfTest.Report report = Backends.selfTest(backend);
        io.out().print(report.text());
        return report.passed() ? 0 : 1;
    }
}
