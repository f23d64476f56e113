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
export const MAX_ROUNDS: number;
export interface Run {
  mechanism: Mechanism;
  reports: Report[];
  memos: Memo[];
}
export function perturbValues(spec: string | Mechanism, domain: string | Domain, values: Iterable<string | number>,
  options?: { source?: WordSource; memos?: Memo[]; ledger?: Ledger | null; budget?: number | null; collection?: string; time?: string }): Run;
/** Simulates devices (audits): each value is a new device that reports it `rounds` times (1..MAX_ROUNDS). */
export function perturbDevices(spec: string | Mechanism, domain: string | Domain, values: Iterable<string | number>,
  rounds: number, options?: { source?: WordSource }): { mechanism: Mechanism; reports: Report[] };
export function memoKey(memo: Memo): string;
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
  ledger?: Ledger | null;
  budget?: number | null;
}): Promise<{ reports: number; batches: number; duplicates: number; memos: Memo[] }>;

// ---- the privacy ledger (docs/accounting.md)
export const LEDGER_FORMAT: 'localpriv-ledger';
export const LEDGER_VERSION: 1;
export const MAX_RELEASES: number;
export const MAX_REPORTS: number;
export const MAX_LEDGER_BYTES: number;
export const MAX_LEVEL_PAIRS: number;
export const RELEASE_KEYS: readonly string[];
export interface Release {
  readonly spec: string;
  readonly epsilon: number;
  readonly delta: number;
  readonly reports: number;
  readonly collection: string;
  readonly time: string;
  readonly memo_key: string | null;
  readonly eps_perm: number | null;
  readonly eps_inst: number | null;
  readonly rr_values: number | null;
}
export interface Levels {
  epsilon: number;
  eps_perm: number | null;
  eps_inst: number | null;
  rr_values: number | null;
}
export interface Total {
  epsilon: number;
  delta: number;
  events: number;
}
export interface LedgerStorage {
  load(): string | null | undefined;
  save(text: string): void;
}
export class Ledger {
  constructor(storage: LedgerStorage, options?: { name?: string });
  readonly name: string;
  releases: Release[];
  total(): Total;
  check(budget: number, add?: Array<Partial<Release> & { spec: string; epsilon: number }>): Total;
  record(add: (Partial<Release> & { spec: string; epsilon: number }) | Array<Partial<Release> & { spec: string; epsilon: number }>,
    budget?: number | null): Total;
  text(): string;
}
export function memoryStorage(text?: string | null): LedgerStorage & { readonly text: string | null };
export function parseLedger(text: string, where?: string): Release[];
export function ledgerText(releases: Release[]): string;
export function makeRelease(obj: Partial<Release> & { spec: string; epsilon: number }): Release;
export function releaseOf(mech: Mechanism, reports?: number, options?: { collection?: string; time?: string; memoKey?: string | null }): Release;
export function compose(releases: Iterable<Release>): Total;
export function fsum(values: Iterable<number>): number;
export function formatG(x: number, prec?: number): string;
export function utcNow(): string;
export function levelsOf(mech: Mechanism): Levels;
export function grrChainLevel(l1: number, l2: number, g: number): number;
