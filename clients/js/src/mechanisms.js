// The portable samplers (docs/clients.md, "Samplers" and "Memoized mechanisms"): one scalar sampler
// per mechanism that consumes words in the documented order, and the spec checks that build them.
import { PortableError } from './errors.js';
import {
  bernoulli, bernoulliExp, bitsHex, bytesHex, categoricalBisect, discreteLaplace, uniformHalfOpen,
  uniformInt, uniformOpen, xxh64Le64,
} from './primitives.js';
import { PORTABLE_KEYS, REQUIRED, parseDomain, pyFloat, rint, specFields, typedValue } from './spec.js';

const TWO32 = 4294967296;
const TWO32N = 1n << 32n;
const TWO63N = 1n << 63n;
const MEMOIZED = new Set(['lgrr', 'lsue', 'loue', 'lsoue', 'losue', 'lblh', 'lolh', 'rappor']);
/** The mechanisms with a portable sampler in protocol version 1, by spec name. */
export const PORTABLE_MECHANISMS = Object.freeze(Object.keys(PORTABLE_KEYS));
/** The memoized ones (the caller keeps their memo). */
export const MEMOIZED_MECHANISMS = Object.freeze([...MEMOIZED]);

const bad = (text) => new PortableError('spec.bad_value', text);
/**
 * The cap on a spec's input and output spaces and size parameters: the Python reference's default
 * (it reads LOCALPRIV_MAX_SPEC_SIZE; a client has no such setting).
 */
export const MAX_SPEC_SIZE = 1_000_000_000;
const overCap = (what, v) => bad(`${what} = ${v} is above the cap of ${MAX_SPEC_SIZE} (the reference's spec size cap)`);

// ---- exact rational value of a float64 (Python's float.as_integer_ratio)
/** `[a, b]` (BigInts, b a power of two, reduced) with a / b exactly the finite double `x > 0`. */
export function exactRatio(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const e = Number((bits >> 52n) & 0x7ffn);
  let m = bits & ((1n << 52n) - 1n);
  let ex;
  if (e === 0) ex = -1074;
  else { m |= 1n << 52n; ex = e - 1075; }
  let a = m;
  let b = 1n;
  if (ex >= 0) a <<= BigInt(ex);
  else b <<= BigInt(-ex);
  while (a % 2n === 0n && b % 2n === 0n) { a /= 2n; b /= 2n; }
  return [a, b];
}

/** The largest power of two <= x (x > 0 finite, normal). */
function floorPow2(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const e = (view.getUint16(0) >> 4) & 0x7ff;
  return 2 ** (e - 1023);
}

// ---- float64 parameters, by the formulas of docs/clients.md
const grrP = (level, g) => 1 / (1 + (g - 1) * Math.exp(-level));
const expit = (l) => 1 / (1 + Math.exp(-l));
const logExpm1 = (v) => (v > 1 ? v + Math.log(-Math.expm1(-v)) : Math.log(Math.expm1(v)));
function logAddExp(a, b) {
  if (a === -Infinity) return b;
  const hi = Math.max(a, b);
  const lo = Math.min(a, b);
  return hi + Math.log1p(Math.exp(lo - hi));
}

/** L2(l1, t, g): the second level of two chained GRRs on g values whose chained level is t. */
export function grrSecond(l1, t, g) {
  const lg2 = g > 2 ? Math.log(g - 2) : -Infinity;
  return logAddExp(logExpm1(t + l1), lg2 + logExpm1(t)) - t - logExpm1(l1 - t);
}

const UE_LOGITS = { sue: (e) => [e / 2, -e / 2], oue: (e) => [0, -e] };
const LUE_ROUNDS = { lsue: ['sue', 'sue'], loue: ['oue', 'oue'], lsoue: ['sue', 'oue'], losue: ['oue', 'sue'] };
const logit = (p) => Math.log(p) - Math.log1p(-p);

/** eps_2 of a chained unary encoding: the root of logit(P) - logit(Q) = eps_1, by bisection to full precision. */
function ueSecond(name, epsPerm, eps1) {
  const [first, second] = LUE_ROUNDS[name];
  const [lp1, lq1] = UE_LOGITS[first](epsPerm);
  const p1 = expit(lp1);
  const q1 = expit(lq1);
  const f = (e2) => {
    const [lp2, lq2] = UE_LOGITS[second](e2);
    const p2 = expit(lp2);
    const q2 = expit(lq2);
    return logit(p1 * p2 + (1 - p1) * q2) - logit(q1 * p2 + (1 - q1) * q2) - eps1;
  };
  let lo = eps1;
  if (f(lo) >= 0) return lo;
  let hi = 2 * lo;
  while (f(hi) < 0) {
    hi *= 2;
    if (!(hi <= 1e306)) throw bad(`cannot reach eps_1=${eps1} (numerically too close to eps_perm)`);
  }
  for (let i = 0; i < 2200; i++) {
    const mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (f(mid) < 0) lo = mid;
    else hi = mid;
  }
  return Math.abs(f(lo)) <= Math.abs(f(hi)) ? lo : hi;
}

/** G(eps_perm, eps_1): L-OLH's hash range, the first g minimizing q(1-q)/(P-q)^2. */
function lolhG(epsPerm, eps1) {
  const gMax = Math.min(1000, rint(Math.exp(Math.min(epsPerm, 10))) + 3);
  let best = 2;
  let bestV = Infinity;
  for (let g = 2; g <= gMax; g++) {
    const q = 1 / g;
    const P = 1 / (1 + (g - 1) * Math.exp(-eps1));
    const v = P > q ? (q * (1 - q)) / (P - q) ** 2 : Infinity;
    if (v < bestV) { bestV = v; best = g; }
  }
  return best;
}

// ---- spec -> mechanism
const asNumber = (name, key, v, lo, hi) => {
  if (v < BigInt(lo) || v > BigInt(hi)) throw bad(`${name}: ${key} must be in ${lo}..${hi}, got ${v}`);
  return Number(v);
};

/**
 * A portable mechanism from its spec string, checked in the protocol's order (syntax, name, keys,
 * value types, k against the domain, required keys, ranges); every refusal is a PortableError with
 * the protocol's code. `domain` (text or a parsed domain) fills k.
 */
export function parseMechanism(spec, domain = null) {
  const { name, fields } = specFields(spec);
  const v = {};
  for (const [key, text] of fields) v[key] = typedValue(name, key, text);
  const dom = typeof domain === 'string' ? parseDomain(domain) : domain;
  if (dom) {
    if ('k' in v && v.k !== BigInt(dom.size)) throw bad(`${name}: k=${v.k} but the domain has ${dom.size} values`);
    v.k = BigInt(dom.size);
  }
  const missing = REQUIRED[name].filter((key) => !(key in v));
  if (missing.length) throw new PortableError('spec.missing_key', `${name}: missing ${missing.join(', ')}`);
  // the ranges every client checks (the reference's order), then each mechanism's own
  for (const key of ['eps', 'eps_perm', 'eps_1', 'cell_km', 'f', 'p', 'q']) {
    if (key in v && !(v[key] > 0 || (['f', 'p', 'q'].includes(key) && v[key] === 0))) throw bad(`${name}: ${key} must be > 0, got ${pyFloat(v[key])}`);
  }
  if ('k' in v && !(v.k >= 2n && v.k <= 1_000_000_000n)) throw bad(`${name}: k must be in 2..10^9, got ${v.k}`);
  if ('n_seeds' in v && !(v.n_seeds >= 1n && v.n_seeds <= TWO32N)) throw bad(`${name}: n_seeds must be in 1..2^32, got ${v.n_seeds}`);
  if (name === 'planar-geometric') planarRate(v.eps * (v.cell_km ?? 0.5));
  if ('keys' in v && v.keys !== 'index') throw bad(`${name}: keys must be index in the portable protocol, got ${JSON.stringify(v.keys)}`);
  if ('hash' in v && v.hash !== 'xxh64') throw bad(`${name}: hash must be xxh64 in the portable protocol, got ${JSON.stringify(v.hash)}`);
  for (const key of Object.keys(v)) {
    if (typeof v[key] === 'bigint' && !(v[key] >= -TWO63N && v[key] < TWO63N)) throw bad(`${name}: ${key} must fit in 64 bits, got ${v[key]}`);
  }
  return BUILD[name](name, v);
}

/** `name(key=value,...)`, the parts left out when undefined or null; integers (Number or BigInt) in decimal. */
function canonical(name, parts) {
  return `${name}(${parts.filter(([, val]) => val !== undefined && val !== null).map(([key, val]) => `${key}=${val}`).join(',')})`;
}
const f64 = (x) => ({ toString: () => pyFloat(x) }); // a float64 written as Python's repr
const mk = (obj) => Object.freeze(obj);
const withK = (v) => Number(v.k); // checked to lie in 2..10^9

const BUILD = {
  krr(name, v) {
    const k = withK(v);
    return mk({ name, k, eps: v.eps, report: 'index', canonical: canonical(name, [['k', k], ['eps', f64(v.eps)]]), params: { p: grrP(v.eps, k) } });
  },
  oue(name, v) {
    const k = withK(v);
    return mk({ name, k, eps: v.eps, report: 'bits', canonical: canonical(name, [['k', k], ['eps', f64(v.eps)]]), params: { p: 0.5, q: 1 / (1 + Math.exp(v.eps)) } });
  },
  sue(name, v) {
    const k = withK(v);
    const p = expit(v.eps / 2);
    const q = 1 - p >= 2 ** -20 ? 1 - p : expit(-v.eps / 2);
    return mk({ name, k, eps: v.eps, report: 'bits', canonical: canonical(name, [['k', k], ['eps', f64(v.eps)]]), params: { p, q } });
  },
  olh(name, v) {
    const k = withK(v);
    const g = name === 'blh' ? 2 : Math.min(2 ** 30, Math.max(2, rint(Math.exp(Math.min(v.eps, 30))) + 1));
    const nSeeds = v.n_seeds === undefined ? TWO32 : Number(v.n_seeds);
    return mk({
      name, k, eps: v.eps, g, nSeeds, report: 'index',
      canonical: canonical(name, [['k', k], ['eps', f64(v.eps)], ['n_seeds', nSeeds === TWO32 ? null : nSeeds]]),
      params: { g, p: grrP(v.eps, g) },
    });
  },
  ss(name, v) {
    const k = withK(v);
    let omega;
    if (v.omega !== undefined) omega = asNumber(name, 'omega', v.omega, 1, k - 1);
    else omega = Math.min(k - 1, Math.max(1, rint(k / (1 + Math.exp(v.eps)))));
    return mk({
      name, k, eps: v.eps, omega, report: 'bits',
      canonical: canonical(name, [['k', k], ['eps', f64(v.eps)], ['omega', v.omega === undefined ? null : omega]]),
      params: { omega, p: 1 / (1 + ((k - omega) / omega) * Math.exp(-v.eps)) },
    });
  },
  hr(name, v) {
    const k = withK(v);
    let B;
    if (v.blocks !== undefined) {
      if (v.blocks > BigInt(MAX_SPEC_SIZE)) throw overCap('hr: blocks', v.blocks);
      B = asNumber(name, 'blocks', v.blocks, 1, 2 * k);
      if ((v.blocks & (v.blocks - 1n)) !== 0n) throw bad(`hr: blocks must be a power of two, got ${B}`);
    } else {
      B = v.eps <= 1 ? 1 : 2 ** Math.floor(Math.min(Math.log2(2 * k), v.eps / Math.LN2));
    }
    const per = Math.ceil(k / B);
    const width = 2 ** per.toString(2).length;
    const K = B * width;
    if (K > MAX_SPEC_SIZE) throw overCap(`hr(k=${k}): outputs B b`, K);
    return mk({
      name, k, eps: v.eps, blocks: B, width, K, report: 'index',
      canonical: canonical(name, [['k', k], ['eps', f64(v.eps)], ['blocks', v.blocks === undefined ? null : B]]),
      params: { blocks: B, width, K, p_uniform: (2 * B) / (2 * B - 1 + Math.exp(v.eps)) },
    });
  },
  geometric(name, v) {
    const k = withK(v);
    if ((v.lo === undefined) !== (v.hi === undefined)) throw bad('geometric: give both lo and hi (truncated) or neither (untruncated)');
    if (v.lo !== undefined && v.hi - v.lo + 1n > BigInt(MAX_SPEC_SIZE)) throw overCap('geometric: outputs hi - lo + 1', v.hi - v.lo + 1n);
    if (v.lo !== undefined && !(v.lo < v.hi)) throw bad(`geometric: need lo < hi, got lo=${v.lo}, hi=${v.hi}`);
    const [a, b] = exactRatio(v.eps);
    return mk({
      name, k, eps: v.eps, lo: v.lo ?? null, hi: v.hi ?? null, a, b, report: 'index',
      canonical: canonical(name, [['k', k], ['eps', f64(v.eps)], ['lo', v.lo], ['hi', v.hi]]),
      params: { a: String(a), b: String(b) },
    });
  },
  duchi(name, v) {
    const k = withK(v);
    const th = Math.tanh(0.5 * v.eps);
    const pPlus = (x) => 0.5 + 0.5 * ((2 * x + 1) / k - 1) * th;
    return mk({
      name, k, eps: v.eps, pPlus, report: 'index', canonical: canonical(name, [['k', k], ['eps', f64(v.eps)]]),
      params: { p_plus: Array.from({ length: Math.min(k, 8) }, (_, x) => pPlus(x)) },
    });
  },
  pm(name, v) {
    const k = withK(v);
    const sm1 = v.eps < 1400 ? Math.expm1(0.5 * v.eps) : Infinity;
    const cm1 = 2 / sm1;
    const cp1 = 2 + 2 / sm1;
    const base = Math.min(cm1, cp1 / k) / 1024;
    const nEst = base > 0 ? (2 * cp1) / base : Infinity;
    if (!(Number.isFinite(nEst) && nEst < 2 ** 52)) throw bad(`pm(k=${k},eps=${pyFloat(v.eps)}): the grid would need more than 2^52 points; use eps <= 56`);
    const grid = floorPow2(base);
    const W = Math.max(1, rint(cm1 / grid));
    const D = Math.max(1, rint(cp1 / (k * grid)));
    const N = W + k * D + (D % 2);
    const keep = 1 / (1 + ((N - W) / W) * Math.exp(-v.eps));
    return mk({
      name, k, eps: v.eps, grid, N, W, D, keep, report: 'float', canonical: canonical(name, [['k', k], ['eps', f64(v.eps)]]),
      params: { grid, N, W, D, keep },
    });
  },
  sw(name, v) {
    const k = withK(v);
    if (v.buckets !== undefined && v.buckets > BigInt(MAX_SPEC_SIZE)) throw overCap('sw: buckets', v.buckets);
    const B = v.buckets === undefined ? k : asNumber(name, 'buckets', v.buckets, 1, MAX_SPEC_SIZE);
    if (BigInt(k) * BigInt(B) > BigInt(MAX_SPEC_SIZE)) throw overCap('sw: k x buckets', BigInt(k) * BigInt(B));
    const e = v.eps;
    const b = (e + Math.expm1(-e)) / (2 * (Math.expm1(e) - e));
    if (!(b > 0 && Number.isFinite(b))) throw bad(`sw: eps=${pyFloat(e)} gives no finite window`);
    const norm = 2 * b * Math.exp(e) + 1;
    const p = Math.exp(e) / norm;
    const q = 1 / norm;
    return mk({
      name, k, eps: e, buckets: B, b, p, q, report: 'index',
      canonical: canonical(name, [['k', k], ['eps', f64(e)], ['buckets', B]]),
      params: { b, p, q, buckets: B },
    });
  },
  planar(name, v) {
    const nrows = asNumber(name, 'nrows', v.nrows, 1, 1_000_000);
    const ncols = asNumber(name, 'ncols', v.ncols, 1, 1_000_000);
    const cellKm = v.cell_km ?? 0.5;
    if (nrows * ncols > 1_000_000) throw bad(`grid: ${nrows} x ${ncols} = ${nrows * ncols} cells is above the limit of 1,000,000`);
    const top = (nrows * cellKm) / 110.574;
    if (top > 90 + 1e-9) throw bad(`grid: ${nrows} rows of ${pyFloat(cellKm)} km reach beyond the north pole; use fewer rows or smaller cells`);
    const k = nrows * ncols;
    if (v.k !== undefined && Number(v.k) !== k) throw bad(`${name}: k=${v.k} but the grid has ${k} cells`);
    const es = v.eps * cellKm;
    const M = Math.max(nrows, ncols);
    const R = Math.max(M, Math.min(1500, M + Math.ceil(45 / es)));
    const out = {
      name, k, eps: v.eps, nrows, ncols, cellKm, R, report: 'index',
      canonical: canonical(name, [['eps', f64(v.eps)], ['nrows', nrows], ['ncols', ncols], ['cell_km', f64(cellKm)]]),
      params: {},
    };
    if (name === 'planar-geometric') {
      out.a = planarRate(es);
      out.es = es;
      out.params = { R, a: out.a, b: TWO32 };
    }
    return mk(out);
  },
  lgrr(name, v) {
    const k = withK(v);
    checkChain(v);
    const eps2 = grrSecond(v.eps_perm, v.eps_1, k);
    return mk({
      name, k, epsPerm: v.eps_perm, eps1: v.eps_1, report: 'index', memoized: true,
      canonical: canonical(name, [['k', k], ['eps_perm', f64(v.eps_perm)], ['eps_1', f64(v.eps_1)]]),
      params: { eps_2: eps2, p1: grrP(v.eps_perm, k), p2: grrP(eps2, k) },
    });
  },
  lue(name, v) {
    const k = withK(v);
    checkChain(v);
    const eps2 = ueSecond(name, v.eps_perm, v.eps_1);
    const [first, second] = LUE_ROUNDS[name];
    const [lp1, lq1] = UE_LOGITS[first](v.eps_perm);
    const [lp2, lq2] = UE_LOGITS[second](eps2);
    return mk({
      name, k, epsPerm: v.eps_perm, eps1: v.eps_1, report: 'bits', memoized: true,
      canonical: canonical(name, [['k', k], ['eps_perm', f64(v.eps_perm)], ['eps_1', f64(v.eps_1)]]),
      params: { eps_2: eps2, p1: expit(lp1), q1: expit(lq1), p2: expit(lp2), q2: expit(lq2) },
    });
  },
  llh(name, v) {
    const k = withK(v);
    checkChain(v);
    const g = name === 'lblh' ? 2 : lolhG(v.eps_perm, v.eps_1);
    const eps2 = grrSecond(v.eps_perm, v.eps_1, g);
    const nSeeds = v.n_seeds === undefined ? TWO32 : Number(v.n_seeds);
    return mk({
      name, k, epsPerm: v.eps_perm, eps1: v.eps_1, g, nSeeds, report: 'index', memoized: true,
      canonical: canonical(name, [['k', k], ['eps_perm', f64(v.eps_perm)], ['eps_1', f64(v.eps_1)], ['n_seeds', nSeeds === TWO32 ? null : nSeeds]]),
      params: { g, eps_2: eps2, p1: grrP(v.eps_perm, g), p2: grrP(eps2, g) },
    });
  },
  rappor(name, v) {
    const k = withK(v);
    const m = asNumber(name, 'm', v.m ?? 32n, 1, 4096);
    const h = asNumber(name, 'h', v.h ?? 2n, 1, m);
    const cohorts = asNumber(name, 'cohorts', v.cohorts ?? 8n, 1, 65536);
    for (const [what, w] of [['m', m], ['h', h]]) {
      const size = BigInt(k) * BigInt(cohorts) * BigInt(w);
      if (size > BigInt(MAX_SPEC_SIZE)) throw overCap(`rappor: k x cohorts x ${what}`, size);
    }
    const f = v.f ?? 0.5;
    const p = v.p ?? 0.5;
    const q = v.q ?? 0.75;
    if (!(f >= 0 && f < 1)) throw bad(`rappor: need 0 <= f < 1, got f=${pyFloat(f)}`);
    if (!(p >= 0 && p < q && q <= 1)) throw bad(`rappor: need 0 <= p < q <= 1, got p=${pyFloat(p)}, q=${pyFloat(q)}`);
    const half = f / 2;
    const s1 = (1 - half) * q + half * p;
    const s0 = half * q + (1 - half) * p;
    if (!(s0 > 0 && s0 < s1 && s1 < 1)) throw bad(`rappor: the report bits must be random: need 0 < P(S=1|B=0) and P(S=1|B=1) < 1 (f=${pyFloat(f)}, p=${pyFloat(p)}, q=${pyFloat(q)})`);
    const wide = m + (cohorts - 1).toString(2).length - (cohorts === 1 ? 1 : 0) > 62;
    return mk({
      name, k, m, h, cohorts, f, p, q, wide, report: wide ? 'bits' : 'index', memoized: true,
      canonical: canonical(name, [['k', k], ['m', m], ['h', h], ['cohorts', cohorts], ['f', f64(f)], ['p', f64(p)], ['q', f64(q)]]),
      params: { prr_set: 1 - half, prr_clear: half, wide },
    });
  },
};
BUILD.blh = BUILD.olh;
BUILD['planar-geometric'] = BUILD.planar;
BUILD['planar-laplace'] = BUILD.planar;
for (const n of ['lsue', 'loue', 'lsoue', 'losue']) BUILD[n] = BUILD.lue;
BUILD.lblh = BUILD.llh;
BUILD.lolh = BUILD.llh;
delete BUILD.planar;
delete BUILD.lue;
delete BUILD.llh;

function checkChain(v) {
  if (!(v.eps_1 < v.eps_perm * (1 - 1e-9))) throw bad(`eps_1 (${pyFloat(v.eps_1)}) must be smaller than the memoized level eps_perm (${pyFloat(v.eps_perm)})`);
}

/** a = floor(2^32 eps s / sqrt(2)) - 1 (float64 products): the planar geometric proposal's rate a / 2^32. */
export function planarRate(es) {
  if (!(es <= 2 ** 20)) throw bad(`planar-geometric: eps * cell_km = ${pyFloat(es)} is above the portable sampler's largest rate 2^20`);
  const a = Math.floor(es * 0.7071067811865476 * TWO32) - 1;
  if (a < 1) throw bad(`planar-geometric: eps * cell_km = ${pyFloat(es)} is below the portable sampler's least rate 2^-31`);
  return a;
}

// ---- samplers
const index = (v) => (typeof v === 'bigint' ? (v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v) : v);

function grr(src, x, g, p) {
  if (bernoulli(src, p)) return x;
  const r = uniformInt(src, g - 1);
  return r >= x ? r + 1 : r;
}

function unaryBits(src, k, x, p, q) {
  const bits = new Array(k);
  for (let y = 0; y < k; y++) bits[y] = bernoulli(src, y === x ? p : q);
  return bitsHex(bits);
}

function clampCell(mech, x, di, dj) {
  const r = Math.floor(x / mech.ncols);
  const c = x % mech.ncols;
  return Math.min(Math.max(r + di, 0), mech.nrows - 1) * mech.ncols + Math.min(Math.max(c + dj, 0), mech.ncols - 1);
}

function popcountOdd(v) {
  let odd = 0;
  while (v) { odd ^= v & 1; v >>>= 1; }
  return odd === 1;
}

const SAMPLERS = {
  krr: (m, x, src) => grr(src, x, m.k, m.params.p),
  oue: (m, x, src) => unaryBits(src, m.k, x, m.params.p, m.params.q),
  sue: (m, x, src) => unaryBits(src, m.k, x, m.params.p, m.params.q),
  olh: (m, x, src) => {
    const s = uniformInt(src, m.nSeeds);
    const h = Number(xxh64Le64(BigInt(x), BigInt(s)) % BigInt(m.g));
    const y = grr(src, h, m.g, m.params.p);
    return index(BigInt(s) * BigInt(m.g) + BigInt(y));
  },
  ss: (m, x, src) => {
    const include = bernoulli(src, m.params.p);
    const size = m.k - 1;
    const chosen = new Set();
    for (let j = size - (m.omega - (include ? 1 : 0)); j < size; j++) {
      const t = uniformInt(src, j + 1);
      chosen.add(chosen.has(t) ? j : t);
    }
    const bits = new Array(m.k).fill(false);
    for (const s of chosen) bits[s + (s >= x ? 1 : 0)] = true;
    bits[x] = include;
    return bitsHex(bits);
  },
  hr: (m, x, src) => {
    if (bernoulli(src, m.params.p_uniform)) return uniformInt(src, m.K);
    const b = m.width; // at most 2^30 (k <= 10^9): the 32-bit operators below are exact
    const block = Math.floor(x / (b - 1));
    const t = (x % (b - 1)) + 1;
    let j = uniformInt(src, b);
    if (popcountOdd(t & j)) j ^= t & -t;
    return block * b + j;
  },
  geometric: (m, x, src) => {
    let z = BigInt(x) + discreteLaplace(src, m.a, m.b);
    if (m.lo !== null) z = (z < m.lo ? m.lo : z > m.hi ? m.hi : z) - m.lo;
    return index(z);
  },
  duchi: (m, x, src) => (bernoulli(src, m.pPlus(x)) ? 1 : 0),
  pm: (m, x, src) => {
    const { N, W, D } = m;
    const a = (D + (D % 2)) / 2 + x * D;
    let i;
    if (N === W || bernoulli(src, m.keep)) i = a + uniformInt(src, W);
    else {
      const u = uniformInt(src, N - W);
      i = u < a ? u : u + W;
    }
    return (2 * i - (N - 1)) * (0.5 * m.grid);
  },
  sw: (m, x, src) => {
    const { b, p, q, buckets: B } = m;
    const v = (x + 0.5) / m.k;
    const width = (1 + 2 * b) / B;
    return categoricalBisect(src, B, (lo, hi) => {
      const eLo = -b + lo * width;
      const eHi = -b + hi * width;
      return q * (eHi - eLo) + (p - q) * Math.max(0, Math.min(eHi, v + b) - Math.max(eLo, v - b));
    });
  },
  'planar-geometric': (m, x, src) => {
    const c = m.a / TWO32;
    const a = BigInt(m.a);
    for (;;) {
      const di = Number(discreteLaplace(src, a, TWO32N));
      const dj = Number(discreteLaplace(src, a, TWO32N));
      const acc = bernoulli(src, Math.min(1, Math.exp(-(m.es * Math.sqrt(di * di + dj * dj) - c * (Math.abs(di) + Math.abs(dj))))));
      if (acc && Math.abs(di) <= m.R && Math.abs(dj) <= m.R) return clampCell(m, x, di, dj);
    }
  },
  'planar-laplace': (m, x, src) => {
    const u1 = uniformOpen(src);
    const u2 = uniformOpen(src);
    const u3 = uniformHalfOpen(src);
    const r = -(Math.log(u1) + Math.log(u2)) / m.eps;
    const angle = 6.283185307179586 * u3;
    const di = Math.floor((r * Math.sin(angle)) / m.cellKm + 0.5);
    const dj = Math.floor((r * Math.cos(angle)) / m.cellKm + 0.5);
    return clampCell(m, x, di, dj);
  },
};
SAMPLERS.blh = SAMPLERS.olh;

// ---- memoized mechanisms: draw the memo, then reports from it
function memoInt(memo, key, bound) {
  const v = memo[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= bound) throw new PortableError('memo.invalid', `memo field ${JSON.stringify(key)} must be an integer in 0..${bound - 1}`);
  return v;
}

function memoBits(memo, key, width) {
  const v = memo[key];
  const n = (width + 7) >> 3;
  if (typeof v !== 'string' || !new RegExp(`^[0-9a-f]{${2 * n}}$`).test(v)) throw new PortableError('memo.invalid', `memo field ${JSON.stringify(key)} must be ${2 * n} lowercase hex digits`);
  const bits = new Array(8 * n);
  for (let y = 0; y < 8 * n; y++) bits[y] = (parseInt(v.slice(2 * (y >> 3), 2 * (y >> 3) + 2), 16) & (0x80 >> (y & 7))) !== 0;
  if (bits.slice(width).some(Boolean)) throw new PortableError('memo.invalid', `memo field ${JSON.stringify(key)} has padding bits set`);
  return bits.slice(0, width);
}

const MEMO = {
  lgrr: [
    (m, x, src) => ({ value: grr(src, x, m.k, m.params.p1) }),
    (m, memo, src) => grr(src, memoInt(memo, 'value', m.k), m.k, m.params.p2),
  ],
  lue: [
    (m, x, src) => ({ bits: unaryBits(src, m.k, x, m.params.p1, m.params.q1) }),
    (m, memo, src) => {
      const bits = memoBits(memo, 'bits', m.k);
      const { p2, q2 } = m.params;
      return bitsHex(bits.map((b) => bernoulli(src, b ? p2 : q2)));
    },
  ],
  llh: [
    (m, x, src) => {
      const s = uniformInt(src, m.nSeeds);
      const h = Number(xxh64Le64(BigInt(x), BigInt(s)) % BigInt(m.g));
      return { seed: s, value: grr(src, h, m.g, m.params.p1) };
    },
    (m, memo, src) => {
      const s = memoInt(memo, 'seed', m.nSeeds);
      const y = grr(src, memoInt(memo, 'value', m.g), m.g, m.params.p2);
      return index(BigInt(s) * BigInt(m.g) + BigInt(y));
    },
  ],
  rappor: [
    (m, x, src) => {
      const c = uniformInt(src, m.cohorts);
      const bloom = new Set();
      for (let i = 0; i < m.h; i++) bloom.add(Number(xxh64Le64(BigInt(x), BigInt(c * m.h + i)) % BigInt(m.m)));
      const half = m.f / 2;
      const bits = new Array(m.m);
      for (let j = 0; j < m.m; j++) bits[j] = bernoulli(src, bloom.has(j) ? 1 - half : half);
      return { cohort: c, bits: bitsHex(bits) };
    },
    (m, memo, src) => {
      const c = memoInt(memo, 'cohort', m.cohorts);
      const prr = memoBits(memo, 'bits', m.m);
      const bits = prr.map((b) => bernoulli(src, b ? m.q : m.p));
      if (!m.wide) {
        let v = BigInt(c) << BigInt(m.m);
        bits.forEach((b, j) => { if (b) v |= 1n << BigInt(j); });
        return index(v);
      }
      const out = new Uint8Array(2 + ((m.m + 7) >> 3));
      out[0] = c & 0xff;
      out[1] = c >> 8;
      bits.forEach((b, j) => { if (b) out[2 + (j >> 3)] |= 1 << (j & 7); });
      return bytesHex(out);
    },
  ],
};
for (const n of ['lsue', 'loue', 'lsoue', 'losue']) MEMO[n] = MEMO.lue;
MEMO.lblh = MEMO.llh;
MEMO.lolh = MEMO.llh;

function checkIndex(mech, x) {
  if (!Number.isInteger(x) || x < 0 || x >= mech.k) throw new PortableError('value.out_of_domain', `input index ${String(x).slice(0, 20)} outside 0..${mech.k - 1}`);
}

/**
 * The permanent part of a memoized mechanism for input index `x`, as the object the caller keeps:
 * `{mechanism: canonical spec, index: x, memo: {...}}`. Drawn once per user and value.
 */
export function drawMemo(mech, x, src) {
  const pair = MEMO[mech.name];
  if (!pair) throw new PortableError('spec.unknown_mechanism', `${mech.name} is not a memoized portable mechanism`);
  checkIndex(mech, x);
  return { mechanism: mech.canonical, index: x, memo: pair[0](mech, x, src) };
}

/**
 * One report of `mech` for the input index `x`, drawn from `src` by the portable protocol: a Number
 * (an index below 2^53, or pm's float), a BigInt (an index of 2^53 or more) or a lowercase hex
 * string (a bit vector). Memoized mechanisms take the user's memo for `x` (drawn first when absent).
 */
export function sampleIndex(mech, x, src, memo = undefined) {
  checkIndex(mech, x);
  const pair = MEMO[mech.name];
  if (pair) {
    if (memo === undefined || memo === null) memo = drawMemo(mech, x, src);
    const keys = memo && typeof memo === 'object' && !Array.isArray(memo) ? Object.keys(memo).sort().join(',') : '';
    if (keys !== 'index,mechanism,memo' || !memo.memo || typeof memo.memo !== 'object' || Array.isArray(memo.memo)) {
      throw new PortableError('memo.invalid', 'a memo is {"mechanism", "index", "memo"}');
    }
    if (memo.mechanism !== mech.canonical || memo.index !== x) {
      throw new PortableError('memo.invalid', `the memo is for ${JSON.stringify(String(memo.mechanism).slice(0, 80))}, input ${String(memo.index).slice(0, 20)}, not ${mech.canonical}, input ${x}`);
    }
    return pair[1](mech, memo.memo, src);
  }
  if (memo !== undefined && memo !== null) throw new PortableError('memo.invalid', `${mech.name} keeps no memo`);
  return SAMPLERS[mech.name](mech, x, src);
}

/** The JSON text of one report as the collector reads it (pm's floats as Python writes them). */
export function reportJSON(mech, report) {
  if (typeof report === 'bigint') return report.toString();
  if (typeof report === 'string') return JSON.stringify(report);
  return mech.report === 'float' ? pyFloat(report) : String(report);
}
