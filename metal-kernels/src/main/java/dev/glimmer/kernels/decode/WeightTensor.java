package dev.glimmer.kernels.decode;

/**
 * A weight tensor where it lies in the model file.
 *
 * @param name       the GGUF tensor name
 * @param type       its ggml type id
 * @param fileOffset byte offset of its data from the start of the file
 * @param bytes      size of its data
 */
public record WeightTensor(String name, int type, long fileOffset, long bytes) {}
