package org.localpriv.client;

import java.security.SecureRandom;

/**
 * Words from the platform's CSPRNG, {@link SecureRandom}: the source of real reports. By default the
 * words are read 256 at a time ({@code nextBytes} of 1024 bytes, each 4 bytes a little-endian word),
 * since each call into a {@code SecureRandom} has a fixed cost (on Linux's {@code NativePRNG} a lock
 * and a read of {@code /dev/urandom}); {@code buffered = false} calls {@code nextInt()} per word
 * (taken as unsigned). Both are uniform independent words. Not thread-safe: one source per thread.
 */
public final class SecureRandomSource implements WordSource {
    /** Words read per call of {@code nextBytes}. */
    public static final int BUFFER_WORDS = 256;

    private final SecureRandom random;
    private final byte[] buf;
    private int pos;

    /** A buffered source on a new {@link SecureRandom}. */
    public SecureRandomSource() {
        this(new SecureRandom(), true);
    }

    /**
     * @param random the generator (e.g. {@code SecureRandom.getInstanceStrong()})
     * @param buffered read {@link #BUFFER_WORDS} words per call, else one {@code nextInt()} per word
     */
    public SecureRandomSource(SecureRandom random, boolean buffered) {
        this.random = random;
        this.buf = buffered ? new byte[4 * BUFFER_WORDS] : null;
        this.pos = buffered ? buf.length : 0;
    }

    @Override
    public int nextWord() {
        if (buf == null) {
            return random.nextInt();
        }
        if (pos == buf.length) {
            random.nextBytes(buf);
            pos = 0;
        }
        int w = ChaCha20Source.le32(buf, pos);
        pos += 4;
        return w;
    }
}
