// Spec strings, domains and float formatting of the portable protocol (docs/clients.md, "Spec
// strings" and "Domains"): the same grammar, checks and error codes as the Python reference.
import { PortableError } from './errors.js';

const INT = 'int';
const NUM = 'number';
const WORD = 'word';

/** Keys of each portable mechanism and their types, in the canonical order. */
export const PORTABLE_KEYS = Object.freeze({
  krr: { k: INT, eps: NUM },
  oue: { k: INT, eps: NUM },
  sue: { k: INT, eps: NUM },
  olh: { k: INT, eps: NUM, n_seeds: INT, hash: WORD },
  blh: { k: INT, eps: NUM, n_seeds: INT, hash: WORD },
  ss: { k: INT, eps: NUM, omega: INT },
  hr: { k: INT, eps: NUM, blocks: INT },
  geometric: { k: INT, eps: NUM, lo: INT, hi: INT },
  duchi: { k: INT, eps: NUM },
  pm: { k: INT, eps: NUM },
  sw: { k: INT, eps: NUM, buckets: INT },
  'planar-geometric': { eps: NUM, nrows: INT, ncols: INT, cell_km: NUM, k: INT },
  'planar-laplace': { eps: NUM, nrows: INT, ncols: INT, cell_km: NUM, k: INT },
  lgrr: { k: INT, eps_perm: NUM, eps_1: NUM },
  lsue: { k: INT, eps_perm: NUM, eps_1: NUM },
  loue: { k: INT, eps_perm: NUM, eps_1: NUM },
  lsoue: { k: INT, eps_perm: NUM, eps_1: NUM },
  losue: { k: INT, eps_perm: NUM, eps_1: NUM },
  lblh: { k: INT, eps_perm: NUM, eps_1: NUM, n_seeds: INT, hash: WORD },
  lolh: { k: INT, eps_perm: NUM, eps_1: NUM, n_seeds: INT, hash: WORD },
  rappor: { k: INT, m: INT, h: INT, cohorts: INT, f: NUM, p: NUM, q: NUM, keys: WORD },
});

/** Keys every spec of the mechanism must give (k may come from the domain instead). */
export const REQUIRED = Object.freeze(Object.fromEntries(Object.keys(PORTABLE_KEYS).map((name) => {
  if (name.startsWith('planar-')) return [name, ['eps', 'nrows', 'ncols']];
  if (name === 'rappor') return [name, ['k']];
  if (['lgrr', 'lsue', 'loue', 'lsoue', 'losue', 'lblh', 'lolh'].includes(name)) return [name, ['k', 'eps_perm', 'eps_1']];
  return [name, ['k', 'eps']];
})));

const BLANKS = ' \t\r\n';
const SPEC_RE = /^[ \t\r\n]*([a-z][a-z0-9-]*)[ \t\r\n]*\(([\s\S]*)\)[ \t\r\n]*$/;
const VALUE_RE = /^[^ \t\r\n,()=]+$/;
const KEY_RE = /^[a-z_][a-z0-9_]*$/;
const INT_RE = /^[+-]?[0-9]+$/;
const NUM_RE = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$/;
const WORD_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `text` without the blanks (space, tab, CR, LF) around it; no other character is removed. */
export function stripBlanks(text) {
  let a = 0;
  let b = text.length;
  while (a < b && BLANKS.includes(text[a])) a++;
  while (b > a && BLANKS.includes(text[b - 1])) b--;
  return text.slice(a, b);
}

const clip = (s, n) => JSON.stringify(String(s).slice(0, n));

/**
 * Steps 1-3 of the checks: the grammar, the name, then the keys in order. Returns the name and the
 * raw value texts by key (insertion order = argument order).
 */
export function specFields(spec) {
  if (typeof spec !== 'string') throw new PortableError('spec.syntax', `a spec is a string, got ${typeof spec}`);
  const m = SPEC_RE.exec(spec);
  if (!m) throw new PortableError('spec.syntax', `cannot read ${clip(spec, 80)}: expected NAME(key=value,...)`);
  const [, name, body] = m;
  const pairs = [];
  if (stripBlanks(body)) {
    for (const part of body.split(',')) {
      const eq = part.indexOf('=');
      const key = stripBlanks(eq < 0 ? part : part.slice(0, eq));
      const value = eq < 0 ? '' : stripBlanks(part.slice(eq + 1));
      if (eq < 0 || !KEY_RE.test(key) || !VALUE_RE.test(value)) {
        throw new PortableError('spec.syntax', `cannot read argument ${clip(stripBlanks(part), 40)}: expected key=value`);
      }
      pairs.push([key, value]);
    }
  }
  if (!Object.hasOwn(PORTABLE_KEYS, name)) {
    throw new PortableError('spec.unknown_mechanism', `${clip(name, 40)} is not a portable mechanism; known: ${Object.keys(PORTABLE_KEYS).sort().join(', ')}`);
  }
  const keys = PORTABLE_KEYS[name];
  const fields = new Map();
  for (const [key, value] of pairs) {
    if (!Object.hasOwn(keys, key)) throw new PortableError('spec.unknown_key', `${name}: unknown key ${clip(key, 40)}; accepted: ${Object.keys(keys).join(', ')}`);
    if (fields.has(key)) throw new PortableError('spec.duplicate_key', `${name}: ${key} given twice`);
    fields.set(key, value);
  }
  return { name, fields };
}

/** Step 4: a value read by its key's type (int -> BigInt, number -> float64, word -> string). */
export function typedValue(name, key, text) {
  const kind = PORTABLE_KEYS[name][key];
  if (kind === INT) {
    if (!INT_RE.test(text)) throw new PortableError('spec.bad_value', `${name}: ${key} must be an integer, got ${clip(text, 40)}`);
    return BigInt(text);
  }
  if (kind === NUM) {
    if (!NUM_RE.test(text)) throw new PortableError('spec.bad_value', `${name}: ${key} must be a number, got ${clip(text, 40)}`);
    const v = Number(text);
    if (!Number.isFinite(v)) throw new PortableError('spec.bad_value', `${name}: ${key} must be finite, got ${clip(text, 40)}`);
    return v;
  }
  if (!WORD_RE.test(text)) throw new PortableError('spec.bad_value', `${name}: ${key} must be a word, got ${clip(text, 40)}`);
  return text;
}

/**
 * Python's repr of a float64 (the canonical spec's numbers): the shortest decimal that reads back
 * to the same double, fixed notation for decimal exponents -4..15 (with at least one digit after
 * the point), else scientific with a signed two-digit exponent: 1.0, 0.1, 1e-05, 1e+16.
 */
export function pyFloat(v) {
  if (Number.isNaN(v)) return 'nan';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  const [mant, expText] = v.toExponential().split('e');
  const exp = Number(expText);
  const sign = mant.startsWith('-') ? '-' : '';
  const digits = mant.replace('-', '').replace('.', '');
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  if (exp >= 0) {
    const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
    const frac = digits.slice(exp + 1) || '0';
    return `${sign}${whole}.${frac}`;
  }
  return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
}

/** Round half to even (Python's round, Java's Math.rint). */
export function rint(v) {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

// ---- domains
const TWO53N = 1n << 53n;
/** The most labels of a label-list domain. */
export const MAX_LABELS = 1 << 20;
/** The most values of an integer-range domain. */
export const MAX_RANGE = 1_000_000_000;

/**
 * A client domain from its text: an integer range `lo..hi` (-2^53 <= lo <= hi <= 2^53, at most 10^9
 * values) or a label list `a,b,c` (labels trimmed of blanks, at least 2, distinct, non-empty, at most
 * 2^20, no `..` in the text). Anything else is `domain.syntax`.
 */
export function parseDomain(text) {
  if (typeof text !== 'string') throw new PortableError('domain.syntax', `a domain is a string, got ${typeof text}`);
  const t = stripBlanks(text);
  const m = /^([+-]?[0-9]+)\.\.([+-]?[0-9]+)$/.exec(t);
  if (m) {
    const lo = BigInt(m[1]);
    const hi = BigInt(m[2]);
    if (!(-TWO53N <= lo && lo <= hi && hi <= TWO53N)) throw new PortableError('domain.syntax', `domain ${clip(t, 60)}: need lo <= hi within +-2^53`);
    if (hi - lo + 1n > BigInt(MAX_RANGE)) throw new PortableError('domain.syntax', `domain ${clip(t, 60)}: more than 10^9 values`);
    return Object.freeze({ kind: 'range', lo, hi, size: Number(hi - lo + 1n), text: `${lo}..${hi}` });
  }
  const labels = t.split(',').map(stripBlanks);
  if (labels.length < 2 || labels.some((s) => !s) || new Set(labels).size !== labels.length || labels.length > MAX_LABELS || t.includes('..')) {
    throw new PortableError('domain.syntax', `cannot read domain ${clip(t, 60)}: expected lo..hi or distinct labels a,b,c`);
  }
  const index = new Map(labels.map((s, i) => [s, i]));
  return Object.freeze({ kind: 'labels', labels: Object.freeze(labels), index, size: labels.length, text: labels.join(',') });
}

/** The domain index of one input value (blanks around it removed): `v - lo`, or the label's position. */
export function encodeValue(domain, value) {
  const v = stripBlanks(String(value));
  if (domain.kind === 'range') {
    if (!INT_RE.test(v)) throw new PortableError('value.out_of_domain', `${clip(v, 40)} is not an integer in ${domain.lo}..${domain.hi}`);
    const n = BigInt(v);
    if (n < domain.lo || n > domain.hi) throw new PortableError('value.out_of_domain', `${clip(v, 40)} is not an integer in ${domain.lo}..${domain.hi}`);
    return Number(n - domain.lo);
  }
  const i = domain.index.get(v);
  if (i === undefined) throw new PortableError('value.out_of_domain', `${clip(v, 40)} is not one of the domain's labels`);
  return i;
}
