// Type declarations of localpriv-client (hand-written; the package ships JavaScript, no build step).

/** A stream of independent uniform 32-bit words: u32() returns an integer in 0..2^32-1. */
export interface WordSource {
  u32(): number;
}

/** A report in the collector's wire format: an index (bigint from 2^53 on), pm's float, or a hex bit vector. */
export type Report = number | bigint | string;

export type ErrorCode =
  | 'spec.syntax' | 'spec.unknown_mechanism' | 'spec.unknown_key' | 'spec.duplicate_key' | 'spec.missing_key'
  | 'spec.bad_value' | 'domain.syntax' | 'value.out_of_domain' | 'memo.invalid';

export const ERROR_CODES: Readonly<Record<ErrorCode, string>>;
export const PROTOCOL_VERSION: 1;

/** A refusal of the portable protocol; `message` is `CODE: text` on one line. */
export class PortableError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  constructor(code: ErrorCode, text: string);
}

/** A refusal outside the protocol's codes (bounds of this library, transport failures, server refusals). */
export class ClientError extends Error {
  constructor(text: string);
}

// ---- primitives
export function u32(src: WordSource): number;
export function u64(src: WordSource): bigint;
export function uniformInt(src: WordSource, n: number): number;
export function uniformInt(src: WordSource, n: bigint): bigint;
export function bernoulli(src: WordSource, p: number): boolean;
export function bernoulliRational(src: WordSource, a: number | bigint, b: number | bigint): boolean;
export function bernoulliExp(src: WordSource, a: number | bigint, b: number | bigint): boolean;
export function discreteLaplace(src: WordSource, a: number | bigint, b: number | bigint): bigint;
export function categoricalBisect(src: WordSource, n: number, weight: (lo: number, hi: number) => number): number;
export function uniformOpen(src: WordSource): number;
export function xxh64Le64(key: bigint | number, seed: bigint | number): bigint;
export function xxh64Bytes(bytes: Uint8Array, seed?: bigint | number): bigint;
export function bitsHex(bits: ArrayLike<boolean>): string;

// ---- domains and specs
export type Domain =
  | { readonly kind: 'range'; readonly lo: bigint; readonly hi: bigint; readonly size: number; readonly text: string }
  | { readonly kind: 'labels'; readonly labels: readonly string[]; readonly index: ReadonlyMap<string, number>; readonly size: number; readonly text: string };

export function parseDomain(text: string): Domain;
export function encodeValue(domain: Domain, value: string | number): number;
/** Python's repr of a float64 (1.0, 0.1, 1e-05): the canonical spec's numbers. */
export function pyFloat(v: number): string;
export const PORTABLE_KEYS: Readonly<Record<string, Readonly<Record<string, 'int' | 'number' | 'word'>>>>;

/** A checked portable mechanism. `params` holds the float64 parameters of its sampler. */
export interface Mechanism {
  readonly name: string;
  readonly k: number;
  readonly canonical: string;
  readonly report: 'index' | 'bits' | 'float';
  readonly memoized?: boolean;
  readonly params: Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/** The memo of a memoized mechanism, kept by the caller per user and value. */
export interface Memo {
  mechanism: string;
  index: number;
  memo: Record<string, number | string>;
}

export const PORTABLE_MECHANISMS: readonly string[];
export const MEMOIZED_MECHANISMS: readonly string[];
/** The cap on a spec's input and output spaces (the Python reference's default). */
export const MAX_SPEC_SIZE: number;
export function parseMechanism(spec: string, domain?: Domain | string | null): Mechanism;
export function sampleIndex(mech: Mechanism, x: number, src: WordSource, memo?: Memo | null): Report;
export function drawMemo(mech: Mechanism, x: number, src: WordSource): Memo;
export function reportJSON(mech: Pick<Mechanism, 'report'>, report: Report): string;
export function exactRatio(x: number): [bigint, bigint];

/** Real reports' words: crypto.getRandomValues, 256 words per call. */
export class CryptoSource implements WordSource {
  constructor();
  u32(): number;
}

export const MAX_VALUES: number;
export interface Run {
  mechanism: Mechanism;
  reports: Report[];
  memos: Memo[];
}
export function perturbValues(spec: string | Mechanism, domain: string | Domain, values: Iterable<string | number>,
  options?: { source?: WordSource; memos?: Memo[] }): Run;
export function groupJSON(mech: Mechanism, reports: Report[], separators?: [string, string]): string;

// ---- the collector
export interface Group {
  mechanism: string;
  reports: Report[];
}
export interface PostOptions {
  url: string;
  collection: string;
  token: string;
  batchId?: string;
  retries?: number;
  backoff?: number;
  maxBackoff?: number;
  timeout?: number;
  fetch?: typeof globalThis.fetch;
  onAttempt?: (attempt: number) => void;
}
export const MAX_BATCH: number;
export function newBatchId(): string;
export function isRetryStatus(status: number): boolean;
export function batchBody(groups: Group[], batchId: string): string;
export function postBatch(options: PostOptions & { groups: Group | Group[] }): Promise<{ status?: string; reports?: number; counts_version?: number }>;
export function submit(options: Omit<PostOptions, 'batchId'> & {
  spec: string;
  domain: string;
  values: Iterable<string | number>;
  batchSize?: number;
  source?: WordSource;
  memos?: Memo[];
}): Promise<{ reports: number; batches: number; duplicates: number; memos: Memo[] }>;
