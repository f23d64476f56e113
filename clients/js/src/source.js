// Real reports draw their words from the platform's CSPRNG: crypto.getRandomValues (globalThis.crypto
// in browsers and Node 20; node:crypto's webcrypto where the global is missing).
import { ClientError } from './errors.js';

const webcrypto = globalThis.crypto?.getRandomValues
  ? globalThis.crypto
  : (await import('node:crypto')).webcrypto;

/** Words read per call of getRandomValues (1 KiB). */
export const WORDS_PER_READ = 256;

/** The word source of real reports: uniform 32-bit words from crypto.getRandomValues. */
export class CryptoSource {
  constructor() {
    if (!webcrypto?.getRandomValues) throw new ClientError('no crypto.getRandomValues on this platform: cannot draw real reports');
    this.buf = new Uint32Array(WORDS_PER_READ);
    this.pos = WORDS_PER_READ;
  }

  u32() {
    if (this.pos === WORDS_PER_READ) {
      webcrypto.getRandomValues(this.buf);
      this.pos = 0;
    }
    return this.buf[this.pos++];
  }
}

/** 16 random bytes from the CSPRNG as 32 lowercase hex digits (a batch id). */
export function randomHex16() {
  const b = new Uint8Array(16);
  webcrypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
