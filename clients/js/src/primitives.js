// The primitives of the portable protocol (docs/clients.md, "Primitives"), on a word source: any
// object whose u32() returns the next uniform 32-bit word as a Number in 0..2^32-1.
import { ClientError } from './errors.js';

const TWO32 = 4294967296;
const TWO53 = 9007199254740992;
const TWO32N = 1n << 32n;
const MAX_UNIFORM = 1n << 1024n;

/** One word. */
export function u32(src) {
  return src.u32();
}

/** `lo + 2^32 hi` from two words, `lo` first (a BigInt). */
export function u64(src) {
  const lo = src.u32();
  const hi = src.u32();
  return BigInt(lo) + (BigInt(hi) << 32n);
}

function bitLength(v) {
  return v === 0n ? 0 : v.toString(2).length;
}

/**
 * Uniform on 0..n-1 by rejection: for n <= 2^32, `w = u32()` until `w < 2^32 - (2^32 mod n)`,
 * return `w mod n`; for larger n the same with L = ceil(bitlength(n-1)/32) words per try (the first
 * the lowest). At least one word, even for n = 1. `n` a Number (a safe integer) or a BigInt, at
 * most 2^1024; the result has the type of `n`.
 */
export function uniformInt(src, n) {
  if (typeof n === 'number') {
    if (!Number.isSafeInteger(n) || n < 1) throw new ClientError(`uniformInt: n must be an integer >= 1, got ${n}`);
    if (n <= TWO32) {
      const lim = TWO32 - (TWO32 % n);
      for (;;) {
        const w = src.u32();
        if (w < lim) return w % n;
      }
    }
    return Number(uniformInt(src, BigInt(n)));
  }
  if (typeof n !== 'bigint' || n < 1n || n > MAX_UNIFORM) throw new ClientError(`uniformInt: n must be in 1..2^1024, got ${n}`);
  if (n <= TWO32N) return BigInt(uniformInt(src, Number(n)));
  const words = Math.max(1, Math.ceil(bitLength(n - 1n) / 32));
  const span = 1n << BigInt(32 * words);
  const lim = span - (span % n);
  for (;;) {
    let w = 0n;
    for (let i = 0; i < words; i++) w |= BigInt(src.u32()) << BigInt(32 * i);
    if (w < lim) return w % n;
  }
}

/**
 * True with probability ceil(p 2^53) / 2^53 for a float64 p in [0, 1]: U = u64() >> 11 (53 bits,
 * exact as a Number), U < p 2^53. Always two words.
 */
export function bernoulli(src, p) {
  if (!(p >= 0 && p <= 1)) throw new ClientError(`bernoulli: p must lie in [0, 1], got ${p}`);
  const lo = src.u32();
  const hi = src.u32();
  return hi * 2097152 + (lo >>> 11) < p * TWO53;
}

/**
 * True with probability exactly a/b (integers 0 <= a <= b, b >= 1; Numbers or BigInts): the words
 * are compared with the base-2^32 digits of a/b, one digit per word.
 */
export function bernoulliRational(src, a, b) {
  a = BigInt(a);
  b = BigInt(b);
  if (!(a >= 0n && a <= b && b >= 1n)) throw new ClientError(`bernoulliRational: need 0 <= a <= b, b >= 1, got ${a}/${b}`);
  if (a === b) return true;
  while (a !== 0n) {
    const t = a << 32n;
    const d = t / b;
    a = t - d * b;
    const w = BigInt(src.u32());
    if (w !== d) return w < d;
  }
  return false;
}

function bernoulliExpUnit(src, a, b) {
  let k = 1n;
  while (bernoulliRational(src, a, b * k)) k += 1n;
  return k % 2n === 1n;
}

/**
 * True with probability exactly exp(-a/b) (integers a >= 0, b >= 1): Canonne, Kamath and Steinke,
 * "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Algorithm 1.
 */
export function bernoulliExp(src, a, b) {
  a = BigInt(a);
  b = BigInt(b);
  if (a < 0n || b < 1n) throw new ClientError(`bernoulliExp: need a >= 0, b >= 1, got ${a}/${b}`);
  const whole = a / b;
  const rest = a % b;
  for (let i = 0n; i < whole; i++) if (!bernoulliExpUnit(src, 1n, 1n)) return false;
  return bernoulliExpUnit(src, rest, b);
}

/**
 * Y with P(Y = y) = (1 - r)/(1 + r) r^|y|, r = exp(-a/b), exactly (integers a, b >= 1, b <= 2^1024):
 * Canonne, Kamath and Steinke (2020), Algorithm 2. Returns a BigInt.
 */
export function discreteLaplace(src, a, b) {
  a = BigInt(a);
  b = BigInt(b);
  if (a < 1n || b < 1n || b > MAX_UNIFORM) throw new ClientError(`discreteLaplace: need a >= 1 and 1 <= b <= 2^1024, got ${a}/${b}`);
  for (;;) {
    const U = uniformInt(src, b);
    if (!bernoulliExp(src, U, b)) continue;
    let V = 0n;
    while (bernoulliExp(src, 1n, 1n)) V += 1n;
    const Y = (U + b * V) / a;
    const neg = bernoulliRational(src, 1n, 2n);
    if (neg && Y === 0n) continue;
    return neg ? -Y : Y;
  }
}

/**
 * An index of 0..n-1 drawn with probability proportional to its weight by bisection: while
 * hi - lo > 1, go to [lo, mid) with probability min(1, W(lo, mid) / W(lo, hi)). W is a closed form.
 */
export function categoricalBisect(src, n, weight) {
  let lo = 0;
  let hi = n;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (bernoulli(src, Math.min(1, weight(lo, mid) / weight(lo, hi)))) hi = mid;
    else lo = mid;
  }
  return lo;
}

/** A float64 in (0, 1]: ((u64() >> 11) + 1) 2^-53 (exact). */
export function uniformOpen(src) {
  const lo = src.u32();
  const hi = src.u32();
  return (hi * 2097152 + (lo >>> 11) + 1) * 2 ** -53;
}

/** A float64 in [0, 1): (u64() >> 11) 2^-53 (exact). */
export function uniformHalfOpen(src) {
  const lo = src.u32();
  const hi = src.u32();
  return (hi * 2097152 + (lo >>> 11)) * 2 ** -53;
}

// ---- XXH64 of the 8 little-endian bytes of a 64-bit key (docs/hashing.md)
const M64 = (1n << 64n) - 1n;
const P1 = 0x9E3779B185EBCA87n;
const P2 = 0xC2B2AE3D27D4EB4Fn;
const P3 = 0x165667B19E3779F9n;
const P4 = 0x85EBCA77C2B2AE63n;
const P5 = 0x27D4EB2F165667C5n;
const rotl64 = (v, r) => ((v << r) | (v >> (64n - r))) & M64;

/**
 * XXH64 of the 8 little-endian bytes of the unsigned 64-bit `key` with the 64-bit `seed` (Collet's
 * specification for an 8-byte input, arithmetic mod 2^64). Arguments and result are BigInts.
 */
export function xxh64Le64(key, seed) {
  key = BigInt(key) & M64;
  seed = BigInt(seed) & M64;
  let acc = (seed + P5 + 8n) & M64;
  acc ^= (rotl64((key * P2) & M64, 31n) * P1) & M64;
  acc = (rotl64(acc, 27n) * P1 + P4) & M64;
  acc ^= acc >> 33n;
  acc = (acc * P2) & M64;
  acc ^= acc >> 29n;
  acc = (acc * P3) & M64;
  return acc ^ (acc >> 32n);
}

/**
 * XXH64 of arbitrary bytes (Uint8Array) with a 64-bit seed: the general algorithm (stripes of 32
 * bytes, then 8-, 4- and 1-byte tails), for the hashing page's string vectors. Returns a BigInt.
 */
export function xxh64Bytes(bytes, seed = 0n) {
  seed = BigInt(seed) & M64;
  const n = bytes.length;
  const rd64 = (i) => { let v = 0n; for (let j = 7; j >= 0; j--) v = (v << 8n) | BigInt(bytes[i + j]); return v; };
  const rd32 = (i) => BigInt((bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >>> 0);
  const round = (acc, lane) => (rotl64((acc + lane * P2) & M64, 31n) * P1) & M64;
  let i = 0;
  let acc;
  if (n >= 32) {
    const v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64];
    for (; i + 32 <= n; i += 32) for (let l = 0; l < 4; l++) v[l] = round(v[l], rd64(i + 8 * l));
    acc = (rotl64(v[0], 1n) + rotl64(v[1], 7n) + rotl64(v[2], 12n) + rotl64(v[3], 18n)) & M64;
    for (let l = 0; l < 4; l++) acc = (((acc ^ round(0n, v[l])) * P1) + P4) & M64;
  } else {
    acc = (seed + P5) & M64;
  }
  acc = (acc + BigInt(n)) & M64;
  for (; i + 8 <= n; i += 8) acc = (rotl64(acc ^ round(0n, rd64(i)), 27n) * P1 + P4) & M64;
  if (i + 4 <= n) { acc = (rotl64(acc ^ ((rd32(i) * P1) & M64), 23n) * P2 + P3) & M64; i += 4; }
  for (; i < n; i++) acc = (rotl64(acc ^ ((BigInt(bytes[i]) * P5) & M64), 11n) * P1) & M64;
  acc ^= acc >> 33n;
  acc = (acc * P2) & M64;
  acc ^= acc >> 29n;
  acc = (acc * P3) & M64;
  return acc ^ (acc >> 32n);
}

// ---- bit vectors (the wire format: bit y is bit 7 - y mod 8 of byte y div 8)
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** The wire form of a bit vector (an array of booleans): lowercase hex, most significant bit first. */
export function bitsHex(bits) {
  const out = new Uint8Array((bits.length + 7) >> 3);
  for (let y = 0; y < bits.length; y++) if (bits[y]) out[y >> 3] |= 0x80 >> (y & 7);
  return bytesHex(out);
}

/** Lowercase hex of bytes. */
export function bytesHex(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]];
  return s;
}
