package org.localpriv.client;

import java.math.BigInteger;

/**
 * The primitives of the portable protocol (docs/clients.md, "Primitives") on a {@link WordSource}.
 * Integer arithmetic is exact: {@code long} read as unsigned where a value may reach 2^63, and
 * {@link BigInteger} only where it may exceed 64 bits (the exact rationals of a float64 {@code eps}).
 */
public final class Primitives {
    static final BigInteger TWO32 = BigInteger.ONE.shiftLeft(32);
    private static final BigInteger MAX_UNIFORM = BigInteger.ONE.shiftLeft(1024);
    private static final long LONG_TWO31 = 1L << 31;

    private Primitives() {
    }

    /** One word, in 0..2^32-1. */
    public static long u32(WordSource src) {
        return Integer.toUnsignedLong(src.nextWord());
    }

    /** {@code lo + 2^32 hi} (two words, {@code lo} first), as the bits of a {@code long} (read it unsigned). */
    public static long u64(WordSource src) {
        long lo = u32(src);
        return lo | (u32(src) << 32);
    }

    /**
     * Uniform on 0..n-1 by rejection, for 1 &lt;= n &lt;= 2^63-1: one word per try up to 2^32
     * ({@code w < 2^32 - (2^32 mod n)}), else {@link #u64} per try ({@code w < 2^64 - (2^64 mod n)}).
     */
    public static long uniformInt(WordSource src, long n) {
        if (n < 1) {
            throw new IllegalArgumentException("uniform_int: n must be >= 1, got " + n);
        }
        if (n <= (1L << 32)) {
            long lim = (1L << 32) - ((1L << 32) % n);
            while (true) {
                long w = u32(src);
                if (w < lim) {
                    return w % n;
                }
            }
        }
        long rem = (Long.remainderUnsigned(-1L, n) + 1) % n; // 2^64 mod n
        long lim = -rem; // 2^64 - rem as unsigned bits (0 means 2^64: every w is accepted)
        while (true) {
            long w = u64(src);
            if (rem == 0 || Long.compareUnsigned(w, lim) < 0) {
                return Long.remainderUnsigned(w, n);
            }
        }
    }

    /**
     * Uniform on 0..n-1 for 1 &lt;= n &lt;= 2^1024: {@code L = max(1, ceil(bitlength(n-1)/32))} words per
     * try, the first the lowest, accepted below {@code 2^(32L) - (2^(32L) mod n)}.
     */
    public static BigInteger uniformInt(WordSource src, BigInteger n) {
        if (n.signum() < 1 || n.compareTo(MAX_UNIFORM) > 0) {
            throw new IllegalArgumentException("uniform_int: n must be in 1..2^1024, got " + n);
        }
        if (n.bitLength() < 63) {
            return BigInteger.valueOf(uniformInt(src, n.longValue()));
        }
        int words = Math.max(1, (n.subtract(BigInteger.ONE).bitLength() + 31) / 32);
        BigInteger span = BigInteger.ONE.shiftLeft(32 * words);
        BigInteger lim = span.subtract(span.mod(n));
        while (true) {
            BigInteger w = BigInteger.ZERO;
            for (int i = 0; i < words; i++) {
                w = w.or(BigInteger.valueOf(u32(src)).shiftLeft(32 * i));
            }
            if (w.compareTo(lim) < 0) {
                return w.mod(n);
            }
        }
    }

    /** True with probability {@code ceil(p 2^53) / 2^53}: {@code U = u64() >>> 11}, {@code U < p 2^53}. Two words. */
    public static boolean bernoulli(WordSource src, double p) {
        if (!(p >= 0.0 && p <= 1.0)) {
            throw new IllegalArgumentException("bernoulli: p must lie in [0, 1], got " + p);
        }
        long u = u64(src) >>> 11;
        return Math.scalb(p, 53) > (double) u; // both exact doubles
    }

    /**
     * True with probability exactly {@code a / b} (0 &lt;= a &lt;= b, b &gt;= 1): the base-2^32 digits of
     * {@code a / b} compared with words, digit by digit.
     */
    public static boolean bernoulliRational(WordSource src, long a, long b) {
        if (!(a >= 0 && a <= b && b >= 1)) {
            throw new IllegalArgumentException("bernoulli_rational: need 0 <= a <= b, b >= 1");
        }
        if (a == b) {
            return true;
        }
        if (b > LONG_TWO31) {
            return bernoulliRational(src, BigInteger.valueOf(a), BigInteger.valueOf(b));
        }
        while (a != 0) {
            long t = a << 32; // a < b <= 2^31: no overflow
            long d = t / b;
            a = t - d * b;
            long w = u32(src);
            if (w != d) {
                return w < d;
            }
        }
        return false;
    }

    /** {@link #bernoulliRational(WordSource, long, long)} on exact integers of any size. */
    public static boolean bernoulliRational(WordSource src, BigInteger a, BigInteger b) {
        if (a.signum() < 0 || a.compareTo(b) > 0 || b.signum() < 1) {
            throw new IllegalArgumentException("bernoulli_rational: need 0 <= a <= b, b >= 1");
        }
        if (a.equals(b)) {
            return true;
        }
        if (b.bitLength() <= 31) {
            return bernoulliRational(src, a.longValue(), b.longValue());
        }
        while (a.signum() != 0) {
            BigInteger[] qr = a.shiftLeft(32).divideAndRemainder(b);
            a = qr[1];
            long d = qr[0].longValue();
            long w = u32(src);
            if (w != d) {
                return w < d;
            }
        }
        return false;
    }

    /**
     * True with probability exactly {@code exp(-a/b)} (a &gt;= 0, b &gt;= 1): Canonne, Kamath and Steinke,
     * "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Algorithm 1.
     */
    public static boolean bernoulliExp(WordSource src, BigInteger a, BigInteger b) {
        if (a.signum() < 0 || b.signum() < 1) {
            throw new IllegalArgumentException("bernoulli_exp: need a >= 0, b >= 1");
        }
        BigInteger[] qr = a.divideAndRemainder(b);
        for (BigInteger i = BigInteger.ZERO; i.compareTo(qr[0]) < 0; i = i.add(BigInteger.ONE)) {
            if (!expUnit(src, BigInteger.ONE, BigInteger.ONE)) {
                return false;
            }
        }
        return expUnit(src, qr[1], b);
    }

    private static boolean expUnit(WordSource src, BigInteger a, BigInteger b) {
        if (b.bitLength() <= 20 && a.bitLength() <= 20) {
            long la = a.longValue();
            long lb = b.longValue();
            long k = 1;
            while (lb * k <= LONG_TWO31 ? bernoulliRational(src, la, lb * k)
                    : bernoulliRational(src, a, b.multiply(BigInteger.valueOf(k)))) {
                k++;
            }
            return (k & 1) == 1;
        }
        long k = 1;
        while (bernoulliRational(src, a, b.multiply(BigInteger.valueOf(k)))) {
            k++;
        }
        return (k & 1) == 1;
    }

    /**
     * {@code Y} with {@code P(Y = y) = (1 - r)/(1 + r) r^|y|}, {@code r = exp(-a/b)} (a, b &gt;= 1):
     * Canonne, Kamath and Steinke (2020), Algorithm 2.
     */
    public static BigInteger discreteLaplace(WordSource src, BigInteger a, BigInteger b) {
        if (a.signum() < 1 || b.signum() < 1 || b.compareTo(MAX_UNIFORM) > 0) {
            throw new IllegalArgumentException("discrete_laplace: need a >= 1 and 1 <= b <= 2^1024");
        }
        while (true) {
            BigInteger u = uniformInt(src, b);
            if (!bernoulliExp(src, u, b)) {
                continue;
            }
            long v = 0;
            while (bernoulliExp(src, BigInteger.ONE, BigInteger.ONE)) {
                v++;
            }
            BigInteger y = u.add(b.multiply(BigInteger.valueOf(v))).divide(a);
            boolean neg = bernoulliRational(src, 1, 2);
            if (neg && y.signum() == 0) {
                continue;
            }
            return neg ? y.negate() : y;
        }
    }

    /** The float64 weight of the indices lo..hi-1 of a categorical choice. */
    @FunctionalInterface
    public interface Weight {
        double of(long lo, long hi);
    }

    /**
     * An index of 0..n-1 with probability proportional to its weight, by bisection: go to
     * {@code [lo, mid)} if {@code bernoulli(min(1, W(lo, mid) / W(lo, hi)))}, else to {@code [mid, hi)}.
     */
    public static long categoricalBisect(WordSource src, long n, Weight w) {
        long lo = 0;
        long hi = n;
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (bernoulli(src, Math.min(1.0, w.of(lo, mid) / w.of(lo, hi)))) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        return lo;
    }

    /** {@code ((u64() >>> 11) + 1) 2^-53}, a float64 in (0, 1] (exact). */
    public static double uniformOpen(WordSource src) {
        return ((u64(src) >>> 11) + 1) * 0x1.0p-53;
    }

    /** The exact rational {@code a / b} of a finite double {@code x > 0} (b a power of two, reduced): Python's {@code as_integer_ratio}. */
    public static BigInteger[] exactRatio(double x) {
        long bits = Double.doubleToRawLongBits(x);
        int e = (int) ((bits >>> 52) & 0x7ff);
        long m = bits & ((1L << 52) - 1);
        int ex;
        if (e == 0) {
            ex = -1074;
        } else {
            m |= 1L << 52;
            ex = e - 1075;
        }
        int tz = Long.numberOfTrailingZeros(m);
        if (ex >= 0) {
            return new BigInteger[] {BigInteger.valueOf(m).shiftLeft(ex), BigInteger.ONE};
        }
        int t = Math.min(tz, -ex);
        return new BigInteger[] {BigInteger.valueOf(m >>> t), BigInteger.ONE.shiftLeft(-ex - t)};
    }
}
