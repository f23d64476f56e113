// localpriv-client: local differential privacy on the device, by the portable protocol of localpriv
// (docs/clients.md). Reports drawn here from crypto.getRandomValues are the same functions of the
// words as the Python reference's; only the report leaves the device.
export { ERROR_CODES, PortableError, ClientError } from './errors.js';
export {
  u32, u64, uniformInt, bernoulli, bernoulliRational, bernoulliExp, discreteLaplace, categoricalBisect,
  uniformOpen, xxh64Le64, xxh64Bytes, bitsHex,
} from './primitives.js';
export { parseDomain, encodeValue, pyFloat, PORTABLE_KEYS } from './spec.js';
export {
  parseMechanism, sampleIndex, drawMemo, reportJSON, exactRatio, PORTABLE_MECHANISMS, MEMOIZED_MECHANISMS, MAX_SPEC_SIZE,
} from './mechanisms.js';
export { CryptoSource } from './source.js';
export { perturbValues, perturbDevices, groupJSON, memoKey, MAX_VALUES, MAX_ROUNDS } from './client.js';
export {
  Ledger, memoryStorage, parseLedger, ledgerText, makeRelease, releaseOf, compose, fsum, formatG, utcNow, LEDGER_FORMAT, LEDGER_VERSION,
  MAX_RELEASES, MAX_REPORTS, MAX_LEDGER_BYTES, RELEASE_KEYS,
} from './ledger.js';
export { levelsOf, grrChainLevel, MAX_LEVEL_PAIRS } from './levels.js';
export { submit, postBatch, newBatchId, batchBody, isRetryStatus, MAX_BATCH } from './submit.js';

/** The protocol version this client implements (its vectors are vectors-v1.json). */
export const PROTOCOL_VERSION = 1;
