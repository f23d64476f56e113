// TEST ONLY: the deterministic word stream of the conformance vectors. Anyone who knows the seed
// string knows every word: never use it for real users. Imported as 'localpriv-client/testing'.
import { ClientError } from './errors.js';

const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const ror = (v, r) => (v >>> r) | (v << (32 - r));

/** SHA-256 (FIPS 180-4) of bytes; 32 bytes out. Synchronous, for keying the test stream. */
export function sha256(bytes) {
  const bitLen = bytes.length * 8;
  const padded = new Uint8Array(((bytes.length + 9 + 63) >> 6) << 6);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bitLen / 4294967296));
  view.setUint32(padded.length - 4, bitLen >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  for (let off = 0; off < padded.length; off += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getUint32(off + 4 * t);
    for (let t = 16; t < 64; t++) {
      const s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >>> 3);
      const s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >>> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let t = 0; t < 64; t++) {
      const t1 = (hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K256[t] + w[t]) >>> 0;
      const t2 = ((ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) ov.setUint32(4 * i, h[i]);
  return out;
}

const rotl = (v, r) => (v << r) | (v >>> (32 - r));

/**
 * The ChaCha20 block function (RFC 8439 section 2.3): 16 output words (Uint32Array), the state
 * after 20 rounds plus the input state. `key` 32 bytes, `counter` 0..2^32-1, `nonce` 12 bytes.
 */
export function chacha20Block(key, counter, nonce) {
  if (key.length !== 32 || nonce.length !== 12 || !(Number.isInteger(counter) && counter >= 0 && counter < 4294967296)) {
    throw new ClientError('chacha20Block needs a 32-byte key, a 12-byte nonce and a counter in 0..2^32-1');
  }
  const kv = new DataView(key.buffer, key.byteOffset, 32);
  const nv = new DataView(nonce.buffer, nonce.byteOffset, 12);
  const init = new Uint32Array(16);
  init[0] = 0x61707865; init[1] = 0x3320646e; init[2] = 0x79622d32; init[3] = 0x6b206574;
  for (let i = 0; i < 8; i++) init[4 + i] = kv.getUint32(4 * i, true);
  init[12] = counter;
  for (let i = 0; i < 3; i++) init[13 + i] = nv.getUint32(4 * i, true);
  const x = Uint32Array.from(init);
  const qr = (a, b, c, d) => {
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
  };
  for (let i = 0; i < 10; i++) {
    qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
    qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
  }
  for (let i = 0; i < 16; i++) x[i] += init[i];
  return x;
}

/**
 * TEST ONLY. The deterministic word stream of the vectors: ChaCha20 keyed by SHA-256(UTF-8 of the
 * seed string), nonce 12 zero bytes, block counter 0, 1, 2, ..., the keystream read as
 * little-endian 32-bit words. At most 2^32 blocks. `used` counts the words read.
 */
export class ChaCha20Source {
  constructor(seed) {
    if (typeof seed !== 'string') throw new ClientError(`a ChaCha20 seed is a string, got ${typeof seed}`);
    this.key = sha256(new TextEncoder().encode(seed));
    this.nonce = new Uint8Array(12);
    this.counter = 0;
    this.buf = new Uint32Array(0);
    this.pos = 0;
    this.used = 0;
  }

  u32() {
    if (this.pos === this.buf.length) {
      if (this.counter >= 4294967296) throw new ClientError('ChaCha20 stream exhausted after 2^32 blocks (2^36 words)');
      this.buf = chacha20Block(this.key, this.counter++, this.nonce);
      this.pos = 0;
    }
    this.used++;
    return this.buf[this.pos++];
  }
}

/** TEST ONLY. Words from a list (the primitive vectors); refuses to run past its end. */
export class ListSource {
  constructor(words) {
    this.words = Array.from(words, (w) => Number(w) >>> 0);
    this.used = 0;
  }

  u32() {
    if (this.used >= this.words.length) throw new ClientError(`word list of ${this.words.length} words exhausted`);
    return this.words[this.used++];
  }
}
