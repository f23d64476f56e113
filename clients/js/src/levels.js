// The privacy level of one report of a portable mechanism, computed here from its channel's formulas
// as the Python reference computes `epsilon_ldp()`, `epsilon_perm()` and `epsilon_instantaneous()`
// (docs/accounting.md); the vectors carry Python's values and the tests compare them.
import { ClientError } from './errors.js';
import { xxh64Le64 } from './primitives.js';

/** The most input pairs (k x k, per cohort) the RAPPOR level examines when no witness ends it early. */
export const MAX_LEVEL_PAIRS = 1 << 24;

const logit = (p) => Math.log(p) - Math.log1p(-p);

function logAddExp(a, b) {
  if (a === -Infinity) return b;
  if (b === -Infinity) return a;
  const hi = Math.max(a, b);
  return hi + Math.log1p(Math.exp(Math.min(a, b) - hi));
}

/** log(p* / q*) of GRR at l1 then GRR at l2 on g values: log(e^(l1+l2) + g - 1) - log(e^l1 + e^l2 + g - 2). */
export function grrChainLevel(l1, l2, g) {
  const lg2 = g > 2 ? Math.log(g - 2) : -Infinity;
  return logAddExp(l1 + l2, Math.log(g - 1)) - logAddExp(logAddExp(l1, l2), lg2);
}

/** max_z (max_x log P(z|x) - min_x log P(z|x)) of the geometric mechanism on the rows and columns that attain it. */
function geometricLevel(m) {
  const { k, eps } = m;
  const truncated = m.lo !== null && m.hi !== null;
  const lo = truncated ? Number(m.lo) : null;
  const hi = truncated ? Number(m.hi) : null;
  const log1pa = Math.log1p(Math.exp(-eps));
  const logC = Math.log(-Math.expm1(-eps)) - log1pa;
  const logCdf = (s) => (s < 0 ? -eps * Math.abs(s) - log1pa : Math.log1p(-Math.exp(-eps * (Math.abs(s) + 1) - log1pa)));
  const logP = (x, z) => {
    if (!truncated) return logC - eps * Math.abs(z - x);
    if (z < lo || z > hi) return -Infinity;
    if (z === lo) return logCdf(lo - x);
    if (z === hi) return logCdf(x - hi);
    return logC - eps * Math.abs(z - x);
  };
  const cols = truncated ? [...new Set([lo, hi, ...(lo + 1 <= hi - 1 ? [lo + 1, hi - 1] : [])])] : [-1, 0, k - 1, k];
  const rows = [...new Set([0, k - 1, ...cols.map((z) => Math.min(k - 1, Math.max(0, z)))])];
  let best = 0;
  for (const z of cols) {
    const col = rows.map((x) => logP(x, z));
    const top = Math.max(...col);
    if (top === -Infinity) continue;
    best = Math.max(best, top - Math.min(...col));
  }
  return best;
}

/** The filter bits of input x in cohort c (as the RAPPOR sampler sets them). */
function bloom(m, x, c) {
  const bits = new Set();
  for (let i = 0; i < m.h; i++) bits.add(Number(xxh64Le64(BigInt(x), BigInt(c * m.h + i)) % BigInt(m.m)));
  return bits;
}

/**
 * max over cohorts and pairs (x, x') of |B(x) \ B(x')| l1 - |B(x') \ B(x)| l0 (l1 >= 0 >= l0); h (l1 - l0) as
 * soon as two of the first 64 inputs of a cohort with h distinct bits have disjoint filters.
 */
function rapporPairLevel(m, l1, l0) {
  const top = m.h * (l1 - l0);
  for (let c = 0; c < m.cohorts; c++) {
    const full = [];
    for (let x = 0; x < m.k && full.length < 64; x++) {
      const b = bloom(m, x, c);
      if (b.size === m.h) full.push(b);
    }
    for (let i = 0; i < full.length; i++) {
      for (let j = i + 1; j < full.length; j++) {
        if (![...full[i]].some((bit) => full[j].has(bit))) return top;
      }
    }
  }
  if (m.k * m.k > MAX_LEVEL_PAIRS) {
    throw new ClientError(`${m.canonical}: its level needs ${m.k} x ${m.k} input pairs per cohort, above the limit of ${MAX_LEVEL_PAIRS.toLocaleString('en-US')}`);
  }
  let best = 0;
  for (let c = 0; c < m.cohorts; c++) {
    const filters = Array.from({ length: m.k }, (_, x) => bloom(m, x, c));
    for (const a of filters) {
      for (const b of filters) {
        let inter = 0;
        for (const bit of a) if (b.has(bit)) inter += 1;
        best = Math.max(best, (a.size - inter) * l1 - (b.size - inter) * l0);
      }
    }
  }
  return best;
}

/**
 * The levels of one report of a parsed portable mechanism, as a ledger records them:
 * `{epsilon, eps_perm, eps_inst, rr_values}` (null where the mechanism has none).
 *
 * - k-RR, OUE/SUE, OLH/BLH, SS, HR, PM: `eps` (their channels' likelihood ratios are e^eps at most,
 *   attained); k-RR also `rr_values = k`.
 * - geometric: the largest spread of log P(z|x) over the rows {0, k-1, clip(z)} and columns {lo, lo+1,
 *   hi-1, hi} (truncated) or {-1, 0, k-1, k}; Duchi: log(p+(k-1)/p+(0)); SW: log(p/q).
 * - L-GRR, L-BLH, L-OLH: the chained GRR level of (eps_perm, eps_2) on k or g values, eps_perm, and
 *   eps_inst = eps_2; the chained unary encodings: logit P* - logit Q*, eps_perm, no eps_inst.
 * - RAPPOR: the largest |B \ B'| l1 - |B' \ B| l0 over cohorts and input pairs, l1 = log(s1/s0),
 *   l0 = log((1-s1)/(1-s0)) (one report), and with l1 = -l0 = log((1-f/2)/(f/2)) (eps_perm; inf for f = 0).
 * - planar-geometric, planar-laplace: not computed here (their level needs the k x k channel of the
 *   clamped kernel); refused with a ClientError.
 */
export function levelsOf(mech) {
  const out = { epsilon: null, eps_perm: null, eps_inst: null, rr_values: null };
  switch (mech.name) {
    case 'krr':
      return { ...out, epsilon: mech.eps, rr_values: mech.k };
    case 'oue': case 'sue': case 'olh': case 'blh': case 'ss': case 'hr': case 'pm':
      return { ...out, epsilon: mech.eps };
    case 'geometric':
      return { ...out, epsilon: geometricLevel(mech) };
    case 'duchi':
      return { ...out, epsilon: Math.log(mech.pPlus(mech.k - 1) / mech.pPlus(0)) };
    case 'sw':
      return { ...out, epsilon: Math.log(mech.p / mech.q) };
    case 'lgrr': {
      const e2 = mech.params.eps_2;
      return { epsilon: grrChainLevel(mech.epsPerm, e2, mech.k), eps_perm: mech.epsPerm, eps_inst: e2, rr_values: mech.k };
    }
    case 'lblh': case 'lolh': {
      const e2 = mech.params.eps_2;
      return { ...out, epsilon: grrChainLevel(mech.epsPerm, e2, mech.g), eps_perm: mech.epsPerm, eps_inst: e2 };
    }
    case 'lsue': case 'loue': case 'lsoue': case 'losue': {
      const { p1, q1, p2, q2 } = mech.params;
      const first = mech.name === 'lsue' || mech.name === 'lsoue' ? mech.epsPerm / 2 - -mech.epsPerm / 2 : 0 - -mech.epsPerm;
      return { ...out, epsilon: logit(p1 * p2 + (1 - p1) * q2) - logit(q1 * p2 + (1 - q1) * q2), eps_perm: first };
    }
    case 'rappor': {
      const half = mech.f / 2;
      const s1 = (1 - half) * mech.q + half * mech.p;
      const s0 = half * mech.q + (1 - half) * mech.p;
      const one = rapporPairLevel(mech, Math.log(s1 / s0), Math.log((1 - s1) / (1 - s0)));
      const lr = Math.log1p(-half) - Math.log(half);
      return { ...out, epsilon: one, eps_perm: mech.f === 0 ? Infinity : rapporPairLevel(mech, lr, -lr) };
    }
    default:
      throw new ClientError(`${mech.canonical}: this client does not compute the level of ${mech.name}, so it cannot record it in a ledger`);
  }
}
