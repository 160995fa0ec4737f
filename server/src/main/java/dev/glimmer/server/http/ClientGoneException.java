package dev.glimmer.server.http;

/** The client closed the connection: a write to it failed, nothing more can be sent, and its work can stop. */
public final class ClientGoneException extends RuntimeException {
    public ClientGoneException() {
        super("the client closed the connection", null, false, false);
    }
}
