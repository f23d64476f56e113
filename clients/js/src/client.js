// The client's contract: values of a domain in, one report each out (docs/clients.md, "The client
// command"), with the memos of memoized mechanisms kept by the caller.
import { ClientError, PortableError } from './errors.js';
import { drawMemo, parseMechanism, reportJSON, sampleIndex } from './mechanisms.js';
import { CryptoSource } from './source.js';
import { encodeValue, parseDomain, pyFloat } from './spec.js';

/** The most values perturbed by one call of perturbValues (reports are held in memory). */
export const MAX_VALUES = 1_000_000;

/**
 * Perturb `values` (strings or numbers of `domain`, one per user or per round) with the portable
 * sampler of `spec`. Every value is checked before any report is drawn. Memoized mechanisms reuse
 * the memo of (canonical spec, index) from `memos` and add the memos they draw.
 * Returns `{mechanism, reports, memos}`.
 */
export function perturbValues(spec, domain, values, options = {}) {
  const unknown = Object.keys(options).filter((key) => key !== 'source' && key !== 'memos');
  if (unknown.length) throw new ClientError(`perturbValues: unknown option ${JSON.stringify(unknown[0])}; accepted: source, memos`);
  const { source = new CryptoSource(), memos = [] } = options;
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
  if (!mech.memoized) return { mechanism: mech, reports: idx.map((x) => sampleIndex(mech, x, source)), memos: kept };
  const byIndex = new Map();
  for (const memo of kept) {
    if (memo && typeof memo === 'object' && memo.mechanism === mech.canonical && Number.isInteger(memo.index)) byIndex.set(memo.index, memo);
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
