// The device's privacy ledger (docs/accounting.md): the same versioned JSON file as the Python
// reference (localpriv.data.ledger), its basic-composition total with memo groups capped, and the
// budget check a submission passes before anything is perturbed or sent. Storage is the caller's:
// an object with load() and save(text) (browser: localStorage, IndexedDB, ...; Node.js: fileStorage
// from 'localpriv-client/node').
import { ClientError } from './errors.js';
import { levelsOf } from './levels.js';
import { pyFloat } from './spec.js';

/** The `format` member of a ledger file. */
export const LEDGER_FORMAT = 'localpriv-ledger';
/** The version this code writes, and the only one it reads. */
export const LEDGER_VERSION = 1;
/** Most releases one ledger holds. */
export const MAX_RELEASES = 100_000;
/** Most reports one release records. */
export const MAX_REPORTS = 1_000_000_000;
/** Largest ledger text read (characters of the file). */
export const MAX_LEDGER_BYTES = 64 * 2 ** 20;
/** The keys of a release, in the order of the file. */
export const RELEASE_KEYS = Object.freeze(['spec', 'epsilon', 'delta', 'reports', 'collection', 'time', 'memo_key', 'eps_perm',
  'eps_inst', 'rr_values']);
const TOP_KEYS = ['format', 'version', 'releases'];
const LEVELS = ['epsilon', 'eps_perm', 'eps_inst'];
const FLOATS = new Set(['epsilon', 'delta', 'eps_perm', 'eps_inst']);

/** Python's `format(x, '.{prec}g')` for a finite float (`1`, `0.5`, `1.5e-07`, `1e+06`). */
export function formatG(x, prec = 6) {
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const [mant, expText] = x.toExponential(prec - 1).split('e');
  const exp = Number(expText);
  const strip = (s) => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
  if (exp < -4 || exp >= prec) return `${strip(mant)}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return strip(x.toFixed(Math.max(0, prec - 1 - exp)));
}
const fmt = (x) => (x === Infinity ? 'inf' : formatG(x, 6));

/**
 * The correctly rounded sum of `values` (Shewchuk's exact partials, then the round-half-even
 * correction of Python's math.fsum): the same float for any order of the terms.
 */
export function fsum(values) {
  const partials = [];
  let special = 0;
  for (let x of values) {
    if (!Number.isFinite(x)) { special += x; continue; }
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  if (special !== 0 || Number.isNaN(special)) return special;
  let n = partials.length;
  let hi = 0;
  if (n > 0) {
    hi = partials[--n];
    let lo = 0;
    while (n > 0) {
      const x = hi;
      const y = partials[--n];
      hi = x + y;
      lo = y - (hi - x);
      if (lo !== 0) break;
    }
    if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
      const y = lo * 2;
      const x = hi + y;
      if (y === x - hi) hi = x;
    }
  }
  return hi;
}

function level(value, name, allowInf = true) {
  if (typeof value !== 'number') throw new ClientError(`release: ${name} must be a number, got ${value === null ? 'null' : typeof value}`);
  if (Number.isNaN(value) || value < 0 || (!allowInf && !Number.isFinite(value))) {
    throw new ClientError(`release: ${name} must be >= 0${allowInf ? '' : ' and finite'}, got ${pyFloat(value)}`);
  }
  return value;
}

/**
 * A checked release (one entry of the ledger): `spec` and `epsilon` required; `delta` (0), `reports`
 * (1), `collection` (""), `time` (""), `memo_key`, `eps_perm`, `eps_inst`, `rr_values` (null).
 * Unknown keys are refused; a `memo_key` needs `eps_perm`. Returns a frozen object with every key.
 */
export function makeRelease(obj) {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) throw new ClientError(`release: expected an object, got ${Array.isArray(obj) ? 'list' : typeof obj}`);
  const unknown = Object.keys(obj).filter((key) => !RELEASE_KEYS.includes(key)).sort();
  if (unknown.length) throw new ClientError(`release: unknown key(s) ${unknown.join(', ')}; known: ${RELEASE_KEYS.join(', ')}`);
  const missing = ['spec', 'epsilon'].filter((key) => !(key in obj));
  if (missing.length) throw new ClientError(`release: missing key(s) ${missing.join(', ')}`);
  const r = { delta: 0, reports: 1, collection: '', time: '', memo_key: null, eps_perm: null, eps_inst: null, rr_values: null, ...obj };
  if (typeof r.spec !== 'string' || !r.spec) throw new ClientError('release: spec must be a non-empty string');
  level(r.epsilon, 'epsilon');
  level(r.delta, 'delta', false);
  if (r.delta >= 1) throw new ClientError(`release: delta must be in [0, 1), got ${pyFloat(r.delta)}`);
  if (!Number.isInteger(r.reports) || r.reports < 1 || r.reports > MAX_REPORTS) {
    throw new ClientError(`release: reports must be an integer in 1..${MAX_REPORTS}, got ${JSON.stringify(r.reports)}`);
  }
  for (const name of ['collection', 'time']) if (typeof r[name] !== 'string') throw new ClientError(`release: ${name} must be a string`);
  if (r.memo_key !== null) {
    if (typeof r.memo_key !== 'string' || !r.memo_key) throw new ClientError('release: memo_key must be a non-empty string or null');
    if (r.eps_perm === null) throw new ClientError('release: a memo_key needs eps_perm, the level of the memoized randomization');
  }
  for (const name of ['eps_perm', 'eps_inst']) if (r[name] !== null) level(r[name], name);
  if (r.rr_values !== null && !(Number.isInteger(r.rr_values) && r.rr_values >= 2)) {
    throw new ClientError(`release: rr_values must be an integer >= 2 or null, got ${JSON.stringify(r.rr_values)}`);
  }
  const out = {};
  for (const key of RELEASE_KEYS) out[key] = r[key];
  return Object.freeze(out);
}

/**
 * The release of `reports` reports of a parsed portable mechanism, its levels computed here
 * (levelsOf). Give `memoKey` when the reports are drawn from a stored memo (memoized mechanisms only).
 */
export function releaseOf(mech, reports = 1, { collection = '', time = '', memoKey = null } = {}) {
  const lv = levelsOf(mech);
  if (memoKey !== null && lv.eps_perm === null) throw new ClientError(`releaseOf: ${mech.canonical} has no memoized randomization, so no memo_key`);
  return makeRelease({ spec: mech.canonical, epsilon: lv.epsilon, reports, collection, time, memo_key: memoKey, eps_perm: lv.eps_perm,
    eps_inst: lv.eps_inst, rr_values: lv.rr_values });
}

/**
 * Basic composition of releases (docs/accounting.md): r eps per independent release; per memo key, one
 * report alone its own eps, t >= 2 reports min(eps_perm, sum of r eps_inst) when every release of the memo
 * gives eps_inst, else eps_perm. Returns `{epsilon, delta, events}`; the same for any order (exact sums).
 */
export function compose(releases) {
  const rels = [...releases];
  if (rels.length > MAX_RELEASES) throw new ClientError(`compose: ${rels.length.toLocaleString('en-US')} releases exceed the limit of ${MAX_RELEASES.toLocaleString('en-US')}`);
  const classes = new Map(); // "model|eps|delta|k" -> {eps, delta, count}
  const add = (model, eps, delta, k, count) => {
    const key = `${model}|${eps}|${delta}|${k}`;
    const c = classes.get(key) ?? { eps, delta, count: 0 };
    c.count += count;
    classes.set(key, c);
  };
  const own = (r, count) => {
    if (r.rr_values !== null && r.delta === 0) add('rr', r.epsilon, r.delta, r.rr_values, count);
    else add('eps-dp', r.epsilon, r.delta, 0, count);
  };
  const groups = new Map();
  for (const r of rels) {
    if (r.memo_key === null) own(r, r.reports);
    else groups.set(r.memo_key, [...(groups.get(r.memo_key) ?? []), r]);
  }
  for (const [key, members] of groups) {
    const perms = [...new Set(members.map((m) => m.eps_perm))];
    if (perms.length > 1) {
      throw new ClientError(`releases of memo '${key}' disagree on eps_perm ([${perms.map((p) => `'${pyFloat(p)}'`).sort().join(', ')}]): one memo has one permanent level`);
    }
    const n = members.reduce((s, m) => s + m.reports, 0);
    if (n === 1) own(members[0], 1);
    else {
      let cap = members[0].eps_perm;
      if (members.every((m) => m.eps_inst !== null)) cap = Math.min(cap, fsum(members.map((m) => m.reports * m.eps_inst)));
      add('memo', cap, 0, 0, 1);
    }
  }
  const cs = [...classes.values()];
  return {
    epsilon: fsum(cs.filter((c) => c.eps > 0).map((c) => c.count * c.eps)),
    delta: Math.min(1, fsum(cs.map((c) => c.count * c.delta))),
    events: cs.reduce((s, c) => s + c.count, 0),
  };
}

/** The releases of a ledger file's text (unknown keys refused, version checked, "inf" read as Infinity). */
export function parseLedger(text, where = 'ledger') {
  if (typeof text !== 'string') throw new ClientError(`${where}: the stored ledger must be a string`);
  if (text.length > MAX_LEDGER_BYTES) throw new ClientError(`${where}: ${text.length.toLocaleString('en-US')} bytes exceed the limit of ${MAX_LEDGER_BYTES.toLocaleString('en-US')}`);
  let obj;
  try {
    obj = JSON.parse(text);
  } catch (exc) {
    throw new ClientError(`${where}: not a readable JSON file (${exc.message})`);
  }
  if (!obj || typeof obj !== 'object' || Array.isArray(obj) || obj.format !== LEDGER_FORMAT) {
    throw new ClientError(`${where}: not a localpriv ledger (no "format": "${LEDGER_FORMAT}")`);
  }
  const unknown = Object.keys(obj).filter((key) => !TOP_KEYS.includes(key)).sort();
  if (unknown.length) throw new ClientError(`${where}: unknown key(s) ${unknown.join(', ')}; known: ${TOP_KEYS.join(', ')}`);
  if (obj.version !== LEDGER_VERSION) throw new ClientError(`${where}: version ${JSON.stringify(obj.version ?? null)} is not supported (this is version ${LEDGER_VERSION})`);
  if (!Array.isArray(obj.releases)) throw new ClientError(`${where}: "releases" must be a list`);
  if (obj.releases.length > MAX_RELEASES) throw new ClientError(`${where}: ${obj.releases.length.toLocaleString('en-US')} releases exceed the limit of ${MAX_RELEASES.toLocaleString('en-US')}`);
  return obj.releases.map((r, i) => {
    try {
      const plain = r && typeof r === 'object' && !Array.isArray(r)
        ? Object.fromEntries(Object.entries(r).map(([k, v]) => [k, LEVELS.includes(k) && v === 'inf' ? Infinity : v])) : r;
      return makeRelease(plain);
    } catch (exc) {
      throw new ClientError(`${where}: release ${i + 1}: ${exc.message}`);
    }
  });
}

function jsonString(s) {
  return JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function jsonValue(key, v) {
  if (v === null) return 'null';
  if (typeof v === 'string') return jsonString(v);
  if (v === Infinity) return '"inf"';
  return FLOATS.has(key) ? pyFloat(v) : String(v);
}

/** The file's text, as the Python reference writes it (1-space indent, ASCII, "inf" for infinity, final newline). */
export function ledgerText(releases) {
  const rels = releases.map((r) => ` {\n${RELEASE_KEYS.map((k) => `   ${jsonString(k)}: ${jsonValue(k, r[k])}`).join(',\n')}\n  }`);
  const list = rels.length ? `[\n ${rels.join(',\n ')}\n ]` : '[]';
  return `{\n "format": ${jsonString(LEDGER_FORMAT)},\n "version": ${LEDGER_VERSION},\n "releases": ${list}\n}\n`;
}

/** The current time, ISO 8601 in UTC to the second (`2026-11-28T10:00:00Z`). */
export function utcNow() {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

/**
 * The releases of one device, kept by the caller's storage: `{load(): string | null | undefined,
 * save(text): void}` (a missing ledger is empty). `name` names it in messages (a path for files).
 */
export class Ledger {
  constructor(storage, { name = 'ledger' } = {}) {
    if (!storage || typeof storage.load !== 'function' || typeof storage.save !== 'function') {
      throw new ClientError('a ledger needs a storage {load(): text or null, save(text)}');
    }
    this.storage = storage;
    this.name = String(name);
    const text = storage.load();
    this.releases = text === null || text === undefined ? [] : parseLedger(text, `ledger ${this.name}`);
  }

  /** The basic-composition total of every release ({epsilon, delta, events}). */
  total() {
    return compose(this.releases);
  }

  /**
   * Refuse `add` (releases) if they would take the total past `budget`; else return the total with
   * them. The refusal is one line: the current total, the request's cost and the budget.
   */
  check(budget, add = []) {
    if (typeof budget !== 'number' || Number.isNaN(budget) || budget < 0) throw new ClientError(`budget must be a number >= 0, got ${JSON.stringify(budget)}`);
    const extra = add.map(makeRelease);
    const before = this.total().epsilon;
    const after = compose([...this.releases, ...extra]);
    if (after.epsilon > budget) {
      const cost = Number.isFinite(after.epsilon) ? after.epsilon - before : Infinity;
      const reports = extra.reduce((s, r) => s + r.reports, 0);
      const specs = new Set(extra.map((r) => r.spec));
      const spec = specs.size === 1 ? extra[0].spec : `${specs.size} mechanisms`;
      throw new ClientError(`privacy budget exceeded: the ledger ${this.name} totals eps ${fmt(before)}, this request (${reports.toLocaleString('en-US')} report(s) of ${spec}) costs eps ${fmt(cost)} more, and the budget is ${formatG(budget)}; nothing was perturbed or sent`);
    }
    return after;
  }

  /** Check `add` (a release or a list) against `budget` (if given), append it and save the ledger; returns the new total. */
  record(add, budget = undefined) {
    const extra = (Array.isArray(add) ? add : [add]).map(makeRelease);
    if (budget !== undefined && budget !== null) this.check(budget, extra);
    if (this.releases.length + extra.length > MAX_RELEASES) {
      throw new ClientError(`ledger ${this.name}: ${(this.releases.length + extra.length).toLocaleString('en-US')} releases would exceed the limit of ${MAX_RELEASES.toLocaleString('en-US')}`);
    }
    const next = [...this.releases, ...extra];
    this.storage.save(ledgerText(next));
    this.releases = next;
    return this.total();
  }

  /** The file's text. */
  text() {
    return ledgerText(this.releases);
  }
}

/** A storage kept in memory (tests, or a page that saves the text itself). */
export function memoryStorage(text = null) {
  const box = { text };
  return { load: () => box.text, save: (t) => { box.text = t; }, get text() { return box.text; } };
}
