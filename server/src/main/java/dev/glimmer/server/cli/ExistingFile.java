package dev.glimmer.server.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.ITypeConverter;

/** An option's value as a file that exists and can be read ({@code converter = ExistingFile.class}). */
final class ExistingFile implements ITypeConverter<Path> {

    @Override
    public Path convert(String value) {
        Path path = Path.of(value);
        if (!Files.exists(path)) {
            throw new UsageException("no such file: " + path);
        }
        if (Files.isDirectory(path)) {
            throw new UsageException("is a directory, not a file: " + path);
        }
        if (!Files.isReadable(path)) {
            throw new UsageException("cannot read " + path + " (permission denied)");
        }
        return path;
    }
}
