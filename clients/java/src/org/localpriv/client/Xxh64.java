package org.localpriv.client;

/** XXH64 (Collet's specification), all arithmetic mod 2^64 on {@code long}. */
public final class Xxh64 {
    private static final long P1 = 0x9E3779B185EBCA87L;
    private static final long P2 = 0xC2B2AE3D27D4EB4FL;
    private static final long P3 = 0x165667B19E3779F9L;
    private static final long P4 = 0x85EBCA77C2B2AE63L;
    private static final long P5 = 0x27D4EB2F165667C5L;

    private Xxh64() {
    }

    /** XXH64 of the 8 little-endian bytes of {@code key} with the 64-bit {@code seed}. */
    public static long le64(long key, long seed) {
        long acc = seed + P5 + 8;
        acc ^= Long.rotateLeft(key * P2, 31) * P1;
        acc = Long.rotateLeft(acc, 27) * P1 + P4;
        return avalanche(acc);
    }

    private static long avalanche(long acc) {
        acc ^= acc >>> 33;
        acc *= P2;
        acc ^= acc >>> 29;
        acc *= P3;
        return acc ^ (acc >>> 32);
    }

    private static long round(long acc, long lane) {
        acc += lane * P2;
        return Long.rotateLeft(acc, 31) * P1;
    }

    private static long merge(long acc, long v) {
        acc ^= round(0, v);
        return acc * P1 + P4;
    }

    private static long le64(byte[] b, int off) {
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (b[off + i] & 0xffL);
        }
        return v;
    }

    /** XXH64 of a byte string with the 64-bit {@code seed}. */
    public static long hash(byte[] data, long seed) {
        int n = data.length;
        int i = 0;
        long acc;
        if (n >= 32) {
            long v1 = seed + P1 + P2;
            long v2 = seed + P2;
            long v3 = seed;
            long v4 = seed - P1;
            for (; i + 32 <= n; i += 32) {
                v1 = round(v1, le64(data, i));
                v2 = round(v2, le64(data, i + 8));
                v3 = round(v3, le64(data, i + 16));
                v4 = round(v4, le64(data, i + 24));
            }
            acc = Long.rotateLeft(v1, 1) + Long.rotateLeft(v2, 7) + Long.rotateLeft(v3, 12) + Long.rotateLeft(v4, 18);
            acc = merge(acc, v1);
            acc = merge(acc, v2);
            acc = merge(acc, v3);
            acc = merge(acc, v4);
        } else {
            acc = seed + P5;
        }
        acc += n;
        for (; i + 8 <= n; i += 8) {
            acc ^= round(0, le64(data, i));
            acc = Long.rotateLeft(acc, 27) * P1 + P4;
        }
        if (i + 4 <= n) {
            long w = (data[i] & 0xffL) | (data[i + 1] & 0xffL) << 8 | (data[i + 2] & 0xffL) << 16 | (data[i + 3] & 0xffL) << 24;
            acc ^= w * P1;
            acc = Long.rotateLeft(acc, 23) * P2 + P3;
            i += 4;
        }
        for (; i < n; i++) {
            acc ^= (data[i] & 0xffL) * P5;
            acc = Long.rotateLeft(acc, 11) * P1;
        }
        return avalanche(acc);
    }
}
