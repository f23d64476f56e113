package org.localpriv.client;

/** A refusal of the portable protocol: one line, with its error code (docs/clients.md, "Error codes"). */
public final class PortableException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** The protocol's error code, e.g. {@code spec.syntax}. */
    public final String code;

    public PortableException(String code, String message) {
        super(code + ": " + message, null, false, false);
        this.code = code;
    }

    /** The message without its code. */
    public String detail() {
        String m = getMessage();
        return m.substring(code.length() + 2);
    }
}
