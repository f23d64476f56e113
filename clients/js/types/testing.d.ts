// TEST ONLY: the deterministic word stream of the conformance vectors. Never for real users.
import type { WordSource } from './index.js';

export function sha256(bytes: Uint8Array): Uint8Array;
export function chacha20Block(key: Uint8Array, counter: number, nonce: Uint8Array): Uint32Array;

/** ChaCha20 keyed by SHA-256(UTF-8 of the seed), nonce 0, counter 0, 1, ...; `used` counts words read. */
export class ChaCha20Source implements WordSource {
  constructor(seed: string);
  readonly used: number;
  u32(): number;
}

/** Words from a list; refuses to run past its end. */
export class ListSource implements WordSource {
  constructor(words: Iterable<number>);
  readonly used: number;
  u32(): number;
}
