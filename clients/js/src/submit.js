// Posting reports to a collector (docs/service.md): batches with client-chosen ids, retried with the
// same id on a network error, 429 or 5xx (the server counts a batch once whatever happened to an
// earlier attempt); any other refusal is final.
import { ClientError } from './errors.js';
import { perturbValues } from './client.js';
import { reportJSON } from './mechanisms.js';
import { CryptoSource, randomHex16 } from './source.js';

/** The most reports in one batch this client posts. */
export const MAX_BATCH = 1_000_000;
const BATCH_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A new batch id: 128 bits from the CSPRNG, in hex. */
export function newBatchId() {
  return randomHex16();
}

/** Whether a status is retried with the same batch id. */
export function isRetryStatus(status) {
  return status === 429 || (status >= 500 && status <= 599);
}

function groupText(group) {
  if (!group || typeof group.mechanism !== 'string' || !Array.isArray(group.reports)) {
    throw new ClientError('a group is {mechanism: canonical spec, reports: [...]}');
  }
  const floats = { report: /^\s*pm\s*\(/.test(group.mechanism) ? 'float' : 'index' };
  return `{"mechanism":${JSON.stringify(group.mechanism)},"reports":[${group.reports.map((r) => reportJSON(floats, r)).join(',')}]}`;
}

/** The body of one batch: `{"batch_id": id, "groups": [...]}` (big integers written in full). */
export function batchBody(groups, batchId) {
  return `{"batch_id":${JSON.stringify(batchId)},"groups":[${groups.map(groupText).join(',')}]}`;
}

const wait = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const POST_KEYS = ['url', 'collection', 'token', 'batchId', 'retries', 'backoff', 'maxBackoff', 'timeout', 'fetch', 'onAttempt'];
const SUBMIT_KEYS = ['url', 'collection', 'token', 'spec', 'domain', 'values', 'batchSize', 'source', 'memos', 'retries', 'backoff',
  'maxBackoff', 'timeout', 'fetch', 'onAttempt'];

/** Unknown option names are refused (a misspelt option would otherwise be ignored). */
export function checkKeys(what, options, allowed) {
  if (!options || typeof options !== 'object') throw new ClientError(`${what} takes one options object`);
  const unknown = Object.keys(options).filter((key) => !allowed.includes(key));
  if (unknown.length) throw new ClientError(`${what}: unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')}; accepted: ${allowed.join(', ')}`);
}

/**
 * Post one batch (a group or a list of groups) to `collection`, retrying with the same id until the
 * server acknowledges it. Returns the server's answer `{status: "accepted" | "duplicate", ...}`.
 * Options: `retries` (attempts after the first, default 8), `backoff` (seconds before the first
 * retry, doubled up to `maxBackoff`, default 0.25 and 8), `timeout` (seconds per attempt, 30),
 * `fetch` (default globalThis.fetch), `onAttempt` (called before each attempt with its number).
 */
export async function postBatch(options) {
  checkKeys('postBatch', options, [...POST_KEYS, 'groups']);
  const { url, collection, token, groups, batchId = newBatchId(), retries = 8, backoff = 0.25, maxBackoff = 8, timeout = 30,
    fetch = globalThis.fetch, onAttempt = undefined } = options;
  if (typeof url !== 'string' || typeof collection !== 'string' || typeof token !== 'string') {
    throw new ClientError('postBatch needs url, collection and token (strings)');
  }
  if (!(backoff >= 0 && maxBackoff >= 0 && timeout > 0)) throw new ClientError('backoff and maxBackoff must be >= 0 seconds, timeout > 0');
  if (!BATCH_ID.test(batchId)) throw new ClientError('a batch id is 1-128 characters of A-Z a-z 0-9 . _ : -');
  if (!(Number.isInteger(retries) && retries >= 0 && retries <= 1000)) throw new ClientError('retries must be an integer in 0..1000');
  const list = Array.isArray(groups) ? groups : [groups];
  const body = batchBody(list, batchId);
  const target = `${String(url).replace(/\/+$/, '')}/v1/collections/${encodeURIComponent(collection)}/batches`;
  let delay = backoff;
  let last = '';
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (onAttempt) onAttempt(attempt);
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeout * 1000);
    let resp = null;
    let text = '';
    try {
      resp = await fetch(target, {
        method: 'POST', body, signal: abort.signal,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      });
      text = await resp.text();
    } catch (exc) { // refused, cut, timed out: the batch may or may not be in
      last = `${exc?.name ?? 'Error'}: ${exc?.message ?? exc}`;
      resp = null;
    } finally {
      clearTimeout(timer);
    }
    if (resp !== null) {
      if (!isRetryStatus(resp.status)) {
        let answer = null;
        try { answer = JSON.parse(text); } catch { answer = null; }
        if (resp.status >= 400) {
          const msg = answer && typeof answer.error === 'string' ? answer.error : text;
          throw new ClientError(`server refused (${resp.status}): ${msg}`);
        }
        return answer ?? {};
      }
      last = `HTTP ${resp.status}`;
    }
    if (attempt < retries) {
      await wait(delay * 1000);
      delay = Math.min(2 * delay, maxBackoff);
    }
  }
  throw new ClientError(`POST ${target} failed after ${retries + 1} attempts: ${last}`);
}

/**
 * Perturb `values` of `domain` here with `spec` (the CSPRNG unless `source` is given) and post the
 * reports to `collection` in batches of `batchSize` (default 10,000), each with a new batch id.
 * Memoized mechanisms take and return the caller's `memos`. Returns `{reports, batches, duplicates,
 * memos}` (duplicates: batches the server had already counted when a retry arrived).
 */
export async function submit(options) {
  checkKeys('submit', options, SUBMIT_KEYS);
  const { url, collection, token, spec, domain, values, batchSize = 10_000, source = undefined, memos = [], ...post } = options;
  if (!(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= MAX_BATCH)) throw new ClientError(`batchSize must be an integer in 1..${MAX_BATCH}`);
  const run = perturbValues(spec, domain, values, { source: source ?? new CryptoSource(), memos });
  let batches = 0;
  let duplicates = 0;
  for (let s = 0; s < run.reports.length; s += batchSize) {
    const part = run.reports.slice(s, s + batchSize);
    const res = await postBatch({ url, collection, token, groups: { mechanism: run.mechanism.canonical, reports: part }, ...post });
    batches += 1;
    if (res.status === 'duplicate') duplicates += 1;
  }
  return { reports: run.reports.length, batches, duplicates, memos: run.memos };
}
