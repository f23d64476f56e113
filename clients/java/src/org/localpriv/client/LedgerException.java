package org.localpriv.client;

/** A refusal of the privacy ledger (a bad file, a bad release, a budget exceeded); one line. */
public final class LedgerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** @param message the one-line message */
    public LedgerException(String message) {
        super(message.replaceAll("\\s+", " "));
    }
}
