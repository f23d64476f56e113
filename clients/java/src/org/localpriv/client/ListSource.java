package org.localpriv.client;

/** Words from an array (the primitive vectors on explicit words); refuses to run past its end. */
public final class ListSource implements WordSource {
    private final long[] words;
    private int used;

    public ListSource(long[] words) {
        this.words = words.clone();
    }

    /** Words consumed so far. */
    public int used() {
        return used;
    }

    @Override
    public int nextWord() {
        if (used >= words.length) {
            throw new IllegalStateException("word list of " + words.length + " words exhausted");
        }
        return (int) words[used++];
    }
}
