package org.localpriv.client;

/** A stream of independent uniform unsigned 32-bit words, each returned as an int (read it unsigned). */
public interface WordSource {
    /** The next word; {@code Integer.toUnsignedLong(w)} is its value in 0..2^32-1. */
    int nextWord();
}
