package org.localpriv.client;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * The test-only deterministic word stream of the vectors: ChaCha20 (RFC 8439 section 2.3) keyed by
 * SHA-256 of the UTF-8 seed string, nonce 12 zero bytes, block counter 0, 1, 2, ...; the words are the
 * blocks' output words in order. Never for real users: anyone who knows the seed knows every word.
 */
public final class ChaCha20Source implements WordSource {
    private final int[] key = new int[8];
    private final int[] nonce = new int[3];
    private long counter;
    private final int[] block = new int[16];
    private int pos = 16;
    private long used;

    public ChaCha20Source(String seed) {
        byte[] k;
        try {
            k = MessageDigest.getInstance("SHA-256").digest(seed.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing", e);
        }
        for (int i = 0; i < 8; i++) {
            key[i] = le32(k, 4 * i);
        }
    }

    static int le32(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }

    /** Words consumed so far. */
    public long used() {
        return used;
    }

    @Override
    public int nextWord() {
        if (pos == 16) {
            if (counter >= (1L << 32)) {
                throw new IllegalStateException("ChaCha20 stream exhausted after 2^32 blocks (2^36 words)");
            }
            block(key, (int) counter, nonce, block);
            counter++;
            pos = 0;
        }
        used++;
        return block[pos++];
    }

    /**
     * The ChaCha20 block function (RFC 8439 section 2.3): 20 rounds on the state
     * {@code constants | key | counter | nonce}, then the input state added word by word.
     *
     * @param key 8 words (the 32 key bytes read little-endian)
     * @param counter the block counter (unsigned)
     * @param nonce 3 words
     * @param out receives the 16 output words
     */
    public static void block(int[] key, int counter, int[] nonce, int[] out) {
        int[] s = new int[16];
        s[0] = 0x61707865;
        s[1] = 0x3320646e;
        s[2] = 0x79622d32;
        s[3] = 0x6b206574;
        System.arraycopy(key, 0, s, 4, 8);
        s[12] = counter;
        System.arraycopy(nonce, 0, s, 13, 3);
        int[] x = s.clone();
        for (int i = 0; i < 10; i++) {
            quarter(x, 0, 4, 8, 12);
            quarter(x, 1, 5, 9, 13);
            quarter(x, 2, 6, 10, 14);
            quarter(x, 3, 7, 11, 15);
            quarter(x, 0, 5, 10, 15);
            quarter(x, 1, 6, 11, 12);
            quarter(x, 2, 7, 8, 13);
            quarter(x, 3, 4, 9, 14);
        }
        for (int i = 0; i < 16; i++) {
            out[i] = x[i] + s[i];
        }
    }

    private static void quarter(int[] s, int a, int b, int c, int d) {
        s[a] += s[b];
        s[d] = Integer.rotateLeft(s[d] ^ s[a], 16);
        s[c] += s[d];
        s[b] = Integer.rotateLeft(s[b] ^ s[c], 12);
        s[a] += s[b];
        s[d] = Integer.rotateLeft(s[d] ^ s[a], 8);
        s[c] += s[d];
        s[b] = Integer.rotateLeft(s[b] ^ s[c], 7);
    }
}
