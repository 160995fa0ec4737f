package dev.glimmer.server.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import picocli.CommandLine.Command;

/** {@code ./glimmer version} (also {@code --version}): the version and the commit this build was made from. */
@Command(
        name = "version",
        description = "print Glimmer's version and the git commit it was built from",
        footer =
                "Also ./glimmer --version. The commit is known when the build ran in a git checkout (./glimmer builds so).")
final class VersionCommand implements Subcommand {

    /** Written by the build from the Maven project version and the git commit (server/pom.xml). */
    private static final String RESOURCE = "version.properties";

    @Override
    public int run(Terminal io) {
        io.out().println(describe());
        return 0;
    }

    /** e.g. {@code glimmer 0.1.0-SNAPSHOT (commit 583fc28)}, without the commit when the build did not know it. */
    static String describe() {
        Properties build = new Properties();
        try (InputStream in = VersionCommand.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(RESOURCE + " is missing from the build");
            }
            build.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String commit = build.getProperty("commit", "").strip();
        return "glimmer " + build.getProperty("version") + (commit.isEmpty() ? "" : " (commit " + commit + ")");
    }
}
