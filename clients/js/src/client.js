// The client's contract: values of a domain in, one report each out (docs/clients.md, "The client
// command"), with the memos of memoized mechanisms kept by the caller.
import { ClientError, PortableError } from './errors.js';
import { Ledger, makeRelease, releaseOf, utcNow } from './ledger.js';
import { drawMemo, parseMechanism, reportJSON, sampleIndex } from './mechanisms.js';
import { xxh64Bytes } from './primitives.js';
import { CryptoSource } from './source.js';
import { encodeValue, parseDomain, pyFloat } from './spec.js';

/** The most values perturbed by one call of perturbValues (reports are held in memory). */
export const MAX_VALUES = 1_000_000;
/** The most reports of one simulated device in perturbDevices. */
export const MAX_ROUNDS = 1_000;

/**
 * The ledger key of a stored memo: `memo-` and the XXH64 (seed 0) of the UTF-8 JSON of [mechanism,
 * index, memo] in hex. Reports drawn from one memo share it; a memo drawn again gets another key.
 */
export function memoKey(memo) {
  const text = JSON.stringify([memo.mechanism, memo.index, memo.memo]);
  return `memo-${xxh64Bytes(new TextEncoder().encode(text), 0n).toString(16).padStart(16, '0')}`;
}

const PERTURB_KEYS = ['source', 'memos', 'ledger', 'budget', 'collection', 'time'];

/**
 * Perturb `values` (strings or numbers of `domain`, one per user or per round) with the portable
 * sampler of `spec`. Every value is checked before any report is drawn. Memoized mechanisms reuse
 * the memo of (canonical spec, index) from `memos` and add the memos they draw.
 *
 * With `ledger` (a Ledger), the run is recorded there before any report is drawn: one release of all
 * reports, or for a memoized mechanism one release per memo with its key (memoKey); with `budget`, a
 * run that would take the ledger's total past it is refused first (one line; nothing is drawn). With a
 * ledger, the memos of new values are drawn before any report. `collection` and `time` (default now)
 * go into the releases. Returns `{mechanism, reports, memos}`.
 */
export function perturbValues(spec, domain, values, options = {}) {
  const unknown = Object.keys(options).filter((key) => !PERTURB_KEYS.includes(key));
  if (unknown.length) throw new ClientError(`perturbValues: unknown option ${JSON.stringify(unknown[0])}; accepted: ${PERTURB_KEYS.join(', ')}`);
  const { source = new CryptoSource(), memos = [], ledger = null, budget = null, collection = '', time = undefined } = options;
  if (ledger !== null && !(ledger instanceof Ledger)) throw new ClientError('perturbValues: ledger must be a Ledger (openLedger(path), or new Ledger(storage))');
  if (budget !== null && ledger === null) throw new ClientError('perturbValues: a budget needs a ledger');
  const dom = typeof domain === 'string' ? parseDomain(domain) : domain;
  const mech = typeof spec === 'string' ? parseMechanism(spec, dom) : spec;
  if (!dom) throw new PortableError('domain.syntax', 'a domain is required');
  if (mech.k !== dom.size) throw new PortableError('spec.bad_value', `${mech.canonical} has k=${mech.k} but the domain has ${dom.size} values`);
  const idx = [];
  let number = 0;
  for (const value of values) {
    number += 1;
    if (number > MAX_VALUES) throw new ClientError(`more than ${MAX_VALUES.toLocaleString('en-US')} input lines in one run; split the input`);
    try {
      idx.push(encodeValue(dom, typeof value === 'string' ? value.replace(/[\r\n]+$/, '') : String(value)));
    } catch (exc) {
      if (exc instanceof PortableError) throw new PortableError(exc.code, `line ${number}: ${exc.detail}`);
      throw exc;
    }
  }
  const kept = [...memos];
  const stamp = { collection, time: time ?? utcNow() };
  if (!mech.memoized) {
    if (ledger !== null && idx.length) ledger.record(releaseOf(mech, idx.length, stamp), budget ?? undefined);
    return { mechanism: mech, reports: idx.map((x) => sampleIndex(mech, x, source)), memos: kept };
  }
  const byIndex = new Map();
  for (const memo of kept) {
    if (memo && typeof memo === 'object' && memo.mechanism === mech.canonical && Number.isInteger(memo.index)) byIndex.set(memo.index, memo);
  }
  if (ledger !== null && idx.length) {
    const counts = new Map();
    for (const x of idx) counts.set(x, (counts.get(x) ?? 0) + 1);
    const one = releaseOf(mech, 1, stamp); // the levels, computed once
    const plan = (key) => [...counts].map(([x, n]) => makeRelease({ ...one, reports: n, memo_key: key(x) }));
    // checked before anything is drawn (a memo not drawn yet has a key no stored memo has), then recorded with the keys
    if (budget !== null) ledger.check(budget, plan((x) => (byIndex.has(x) ? memoKey(byIndex.get(x)) : `new ${x}`)));
    for (const x of counts.keys()) {
      if (!byIndex.has(x)) {
        const memo = drawMemo(mech, x, source);
        byIndex.set(x, memo);
        kept.push(memo);
      }
    }
    ledger.record(plan((x) => memoKey(byIndex.get(x))), budget ?? undefined);
  }
  const reports = idx.map((x) => {
    if (!byIndex.has(x)) {
      const memo = drawMemo(mech, x, source);
      byIndex.set(x, memo);
      kept.push(memo);
    }
    return sampleIndex(mech, x, source, byIndex.get(x));
  });
  return { mechanism: mech, reports, memos: kept };
}

/**
 * Simulate many devices in one run (audits, docs/audit.md): each of `values` is one new device, with
 * no memo, that reports its value `rounds` times through perturbValues, the function a real device
 * calls, keeping its own memos for its reports only. Every value is checked before any report is
 * drawn. Returns `{mechanism, reports}`: `rounds` reports per value, device after device, in order.
 * At most MAX_ROUNDS reports per device and MAX_VALUES in all.
 */
export function perturbDevices(spec, domain, values, rounds, options = {}) {
  const unknown = Object.keys(options).filter((key) => key !== 'source');
  if (unknown.length) throw new ClientError(`perturbDevices: unknown option ${JSON.stringify(unknown[0])}; accepted: source`);
  const { source = new CryptoSource() } = options;
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > MAX_ROUNDS) {
    throw new ClientError(`reports per device must be an integer in 1..${MAX_ROUNDS.toLocaleString('en-US')}, got ${rounds}`);
  }
  const dom = typeof domain === 'string' ? parseDomain(domain) : domain;
  const mech = typeof spec === 'string' ? parseMechanism(spec, dom) : spec;
  const devices = [...values];
  if (devices.length * rounds > MAX_VALUES) {
    throw new ClientError(`${devices.length.toLocaleString('en-US')} devices x ${rounds} reports is more than ${MAX_VALUES.toLocaleString('en-US')} reports in one run; split the input`);
  }
  if (!dom) throw new PortableError('domain.syntax', 'a domain is required');
  if (mech.k !== dom.size) throw new PortableError('spec.bad_value', `${mech.canonical} has k=${mech.k} but the domain has ${dom.size} values`);
  devices.forEach((value, i) => { // every value checked first, with its line number, as perturbValues does
    try {
      encodeValue(dom, typeof value === 'string' ? value.replace(/[\r\n]+$/, '') : String(value));
    } catch (exc) {
      if (exc instanceof PortableError) throw new PortableError(exc.code, `line ${i + 1}: ${exc.detail}`);
      throw exc;
    }
  });
  const reports = [];
  for (const value of devices) {
    const device = perturbValues(mech, dom, new Array(rounds).fill(value), { source, memos: [] });
    for (const r of device.reports) reports.push(r);
  }
  return { mechanism: mech, reports };
}

/** A JSON value as Python's json.dumps writes it (", " and ": ", ASCII only); pm's floats as repr. */
export function pyDumps(value, floats = false) {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') return floats || !Number.isInteger(value) ? pyFloat(value) : String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (Array.isArray(value)) return `[${value.map((v) => pyDumps(v, floats)).join(', ')}]`;
  return `{${Object.entries(value).map(([k, v]) => `${pyDumps(k)}: ${pyDumps(v, floats)}`).join(', ')}}`;
}

/** One wire-format group `{"mechanism": canonical spec, "reports": [...]}` as JSON text. */
export function groupJSON(mech, reports, separators = [', ', ': ']) {
  const [item, colon] = separators;
  return `{"mechanism"${colon}${JSON.stringify(mech.canonical)}${item}"reports"${colon}[${reports.map((r) => reportJSON(mech, r)).join(item)}]}`;
}
