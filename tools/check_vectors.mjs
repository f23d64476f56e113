// An independent implementation of the portable client protocol, written from docs/clients.md alone
// (not the JavaScript client): it replays every vector of clients/vectors/vectors-v1.json that it
// covers and prints how many agree. Usage: node tools/check_vectors.mjs clients/vectors/vectors-v1.json
// (exit status 1 on any difference). tests/test_portable.py runs it where Node.js is installed.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
const doc = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const M = 0xffffffff;
function rotl(v, r) { return ((v << r) | (v >>> (32 - r))) >>> 0; }
function block(key, counter, nonce) {
  const init = new Uint32Array(16);
  init.set([0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]);
  for (let i = 0; i < 8; i++) init[4 + i] = key.readUInt32LE(4 * i);
  init[12] = counter;
  for (let i = 0; i < 3; i++) init[13 + i] = nonce.readUInt32LE(4 * i);
  const x = Uint32Array.from(init);
  const qr = (a, b, c, d) => {
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
  };
  for (let i = 0; i < 10; i++) { qr(0,4,8,12); qr(1,5,9,13); qr(2,6,10,14); qr(3,7,11,15); qr(0,5,10,15); qr(1,6,11,12); qr(2,7,8,13); qr(3,4,9,14); }
  return Array.from(x, (v, i) => (v + init[i]) >>> 0);
}
class Src { constructor(seed) { this.key = createHash('sha256').update(seed, 'utf8').digest(); this.c = 0; this.buf = []; this.pos = 0; this.used = 0; }
  u32() { if (this.pos === this.buf.length) { this.buf = block(this.key, this.c++, Buffer.alloc(12)); this.pos = 0; } this.used++; return this.buf[this.pos++]; } }
const u64 = s => { const lo = BigInt(s.u32()); return lo + (BigInt(s.u32()) << 32n); };
function uniformInt(s, n) { n = BigInt(n); const L = n - 1n === 0n ? 1 : Math.max(1, Math.ceil((n - 1n).toString(2).length / 32));
  const span = 1n << BigInt(32 * L); const lim = span - span % n;
  for (;;) { let w = 0n; for (let i = 0; i < L; i++) w |= BigInt(s.u32()) << BigInt(32 * i); if (w < lim) return w % n; } }
function bernoulli(s, p) { const lo = s.u32(), hi = s.u32(); const U = hi * 2 ** 21 + (lo >>> 11); return U < p * 2 ** 53; }
const M64 = (1n << 64n) - 1n, P1 = 0x9E3779B185EBCA87n, P2 = 0xC2B2AE3D27D4EB4Fn, P3 = 0x165667B19E3779F9n, P4 = 0x85EBCA77C2B2AE63n, P5 = 0x27D4EB2F165667C5n;
const rotl64 = (v, r) => ((v << BigInt(r)) | (v >> BigInt(64 - r))) & M64;
function xxh(key, seed) { key = BigInt(key); seed = BigInt(seed); let acc = (seed + P5 + 8n) & M64;
  acc ^= (rotl64((key * P2) & M64, 31) * P1) & M64; acc = (rotl64(acc, 27) * P1 + P4) & M64;
  acc ^= acc >> 33n; acc = (acc * P2) & M64; acc ^= acc >> 29n; acc = (acc * P3) & M64; return acc ^ (acc >> 32n); }
function grr(s, x, g, p) { if (bernoulli(s, p)) return BigInt(x); const r = uniformInt(s, g - 1); return r >= BigInt(x) ? r + 1n : r; }
const hex = bits => { const b = Buffer.alloc(Math.ceil(bits.length / 8)); bits.forEach((v, y) => { if (v) b[y >> 3] |= 0x80 >> (y & 7); }); return b.toString('hex'); };
const rint = v => { const f = Math.floor(v), d = v - f; return d > 0.5 ? f + 1 : d < 0.5 ? f : (f % 2 === 0 ? f : f + 1); };
const samplers = {
  krr: (m, x, s) => grr(s, x, m.k, 1 / (1 + (m.k - 1) * Math.exp(-m.eps))).toString(),
  oue: (m, x, s) => { const q = 1 / (1 + Math.exp(m.eps)); return hex([...Array(m.k).keys()].map(y => bernoulli(s, y === x ? 0.5 : q))); },
  sue: (m, x, s) => { const p = 1 / (1 + Math.exp(-m.eps / 2)); const q = 1 - p >= 2 ** -20 ? 1 - p : 1 / (1 + Math.exp(m.eps / 2)); return hex([...Array(m.k).keys()].map(y => bernoulli(s, y === x ? p : q))); },
  olh: (m, x, s) => { const g = Math.min(2 ** 30, Math.max(2, rint(Math.exp(Math.min(m.eps, 30))) + 1)); const sd = uniformInt(s, m.n_seeds ?? 2 ** 32);
    const h = Number(xxh(x, sd) % BigInt(g)); return (sd * BigInt(g) + grr(s, h, g, 1 / (1 + (g - 1) * Math.exp(-m.eps)))).toString(); },
  blh: (m, x, s) => { const sd = uniformInt(s, m.n_seeds ?? 2 ** 32); const h = Number(xxh(x, sd) % 2n); return (sd * 2n + grr(s, h, 2, 1 / (1 + Math.exp(-m.eps)))).toString(); },
};
function parseCanon(c) { const m = /^([a-z-]+)\((.*)\)$/.exec(c); const o = { name: m[1] }; for (const kv of m[2].split(',')) { const [k, v] = kv.split('='); o[k] = Number(v); } return o; }
let ok = 0, bad = 0, failed = 0;
for (const st of doc.chacha20.streams) { const s = new Src(st.seed); const w = st.words.map(() => s.u32()); if (JSON.stringify(w) === JSON.stringify(st.words)) ok++; else { bad++; console.log('stream', st.seed); } }
for (const c of doc.primitives.uniform_int) { const s = new Src(c.seed); const d = c.draws.map(() => uniformInt(s, c.n).toString()); if (JSON.stringify(d) === JSON.stringify(c.draws) && s.used === c.words) ok++; else { bad++; console.log('uniform', c.n, d, c.draws); } }
for (const c of doc.primitives.bernoulli) { const s = new Src(c.seed); const d = c.draws.map(() => bernoulli(s, c.p) ? 1 : 0); if (JSON.stringify(d) === JSON.stringify(c.draws)) ok++; else { bad++; console.log('bern', c.p); } }
for (const v of doc.mechanisms) { const m = parseCanon(v.canonical); const f = samplers[m.name]; if (!f) continue; const s = new Src(v.seed);
  const r = v.indices.map(x => f(m, x, s)); if (JSON.stringify(r) === JSON.stringify(v.reports_text) && s.used === v.words) ok++; else { bad++; console.log('mech', v.canonical, r, v.reports_text, s.used, v.words); } }
console.log(`primitives and first mechanisms: ok ${ok} bad ${bad}`); failed += bad;
// ---- second batch, from the docs
function bernRational(s, a, b) { a = BigInt(a); b = BigInt(b); if (a === b) return true;
  while (a !== 0n) { const t = a << 32n; const d = t / b; a = t - d * b; const w = BigInt(s.u32()); if (w !== d) return w < d; } return false; }
function E(s, a, b) { let K = 1n; while (bernRational(s, a, BigInt(b) * K)) K++; return K % 2n === 1n; }
function bernExp(s, a, b) { a = BigInt(a); b = BigInt(b); const q = a / b, r = a % b; for (let i = 0n; i < q; i++) if (!E(s, 1n, 1n)) return false; return E(s, r, b); }
function dlap(s, a, b) { a = BigInt(a); b = BigInt(b); for (;;) { const U = uniformInt(s, b); if (!bernExp(s, U, b)) continue; let V = 0n; while (bernExp(s, 1n, 1n)) V++;
  const Y = (U + b * V) / a; const B = bernRational(s, 1n, 2n); if (B && Y === 0n) continue; return B ? -Y : Y; } }
function ratio(x) { // exact a/b of a double
  const buf = new DataView(new ArrayBuffer(8)); buf.setFloat64(0, x); const bits = buf.getBigUint64(0);
  const e = Number((bits >> 52n) & 0x7ffn); let m = bits & ((1n << 52n) - 1n); let ex;
  if (e === 0) { ex = -1074; } else { m |= 1n << 52n; ex = e - 1075; }
  let a = m, b = 1n; if (ex >= 0) a <<= BigInt(ex); else b <<= BigInt(-ex);
  while (a % 2n === 0n && b % 2n === 0n) { a /= 2n; b /= 2n; } return [a, b]; }
const popcount = v => { let c = 0n; while (v) { c += v & 1n; v >>= 1n; } return c; };
function floyd(s, size, m) { const S = new Set(); for (let j = size - m; j < size; j++) { const t = Number(uniformInt(s, j + 1)); S.add(S.has(t) ? j : t); } return S; }
function bisect(s, n, W) { let lo = 0, hi = n; while (hi - lo > 1) { const mid = lo + Math.floor((hi - lo) / 2); if (bernoulli(s, Math.min(1, W(lo, mid) / W(lo, hi)))) hi = mid; else lo = mid; } return lo; }
const clampCell = (m, x, di, dj) => { const r = Math.floor(x / m.ncols), c = x % m.ncols;
  return Math.min(Math.max(r + di, 0), m.nrows - 1) * m.ncols + Math.min(Math.max(c + dj, 0), m.ncols - 1); };
Object.assign(samplers, {
  ss: (m, x, s) => { const omega = m.omega ?? Math.min(m.k - 1, Math.max(1, rint(m.k / (1 + Math.exp(m.eps)))));
    const p = 1 / (1 + ((m.k - omega) / omega) * Math.exp(-m.eps)); const inc = bernoulli(s, p); const S = floyd(s, m.k - 1, omega - (inc ? 1 : 0));
    const bits = Array(m.k).fill(false); for (const v of S) bits[v + (v >= x ? 1 : 0)] = true; bits[x] = inc; return hex(bits); },
  hr: (m, x, s) => { const B = m.blocks ?? (m.eps <= 1 ? 1 : 2 ** Math.floor(Math.min(Math.log2(2 * m.k), m.eps / Math.LN2)));
    const per = Math.ceil(m.k / B); const b = 2 ** per.toString(2).length; const K = B * b; const pu = 2 * B / (2 * B - 1 + Math.exp(m.eps));
    if (bernoulli(s, pu)) return uniformInt(s, K).toString(); const blk = Math.floor(x / (b - 1)); const t = BigInt(x % (b - 1) + 1); let j = uniformInt(s, b);
    if (popcount(t & j) % 2n === 1n) j ^= t & -t; return (BigInt(blk * b) + j).toString(); },
  geometric: (m, x, s) => { const [a, b] = ratio(m.eps); let z = BigInt(x) + dlap(s, a, b);
    if (m.lo !== undefined) { const lo = BigInt(m.lo), hi = BigInt(m.hi); z = (z < lo ? lo : z > hi ? hi : z) - lo; } return z.toString(); },
  duchi: (m, x, s) => { const t = (2 * x + 1) / m.k - 1; return bernoulli(s, 0.5 + 0.5 * t * Math.tanh(m.eps / 2)) ? '1' : '0'; },
  pm: (m, x, s) => { const sm1 = Math.expm1(m.eps / 2), cm1 = 2 / sm1, cp1 = 2 + 2 / sm1, base = Math.min(cm1, cp1 / m.k) / 1024;
    const g = 2 ** Math.floor(Math.log2(base)); // largest power of two <= base (exact here)
    const W = Math.max(1, rint(cm1 / g)), D = Math.max(1, rint(cp1 / (m.k * g))), N = W + m.k * D + (D % 2);
    const a = (D + D % 2) / 2 + x * D; let i;
    if (N === W || bernoulli(s, 1 / (1 + ((N - W) / W) * Math.exp(-m.eps)))) i = a + Number(uniformInt(s, W));
    else { const u = Number(uniformInt(s, N - W)); i = u < a ? u : u + W; }
    const z = (2 * i - (N - 1)) * (g / 2); return String(z); },
  sw: (m, x, s) => { const e = m.eps, b = (e + Math.expm1(-e)) / (2 * (Math.expm1(e) - e)); const norm = 2 * b * Math.exp(e) + 1;
    const p = Math.exp(e) / norm, q = 1 / norm, v = (x + 0.5) / m.k, B = m.buckets ?? m.k, w = (1 + 2 * b) / B;
    return String(bisect(s, B, (lo, hi) => { const el = -b + lo * w, eh = -b + hi * w; return q * (eh - el) + (p - q) * Math.max(0, Math.min(eh, v + b) - Math.max(el, v - b)); })); },
  'planar-geometric': (m, x, s) => { const es = m.eps * (m.cell_km ?? 0.5); const a = Math.floor(es * 0.7071067811865476 * 2 ** 32) - 1; const c = a / 2 ** 32;
    const M = Math.max(m.nrows, m.ncols); const R = Math.max(M, Math.min(1500, M + Math.ceil(45 / es)));
    for (;;) { const di = Number(dlap(s, a, 2 ** 32)), dj = Number(dlap(s, a, 2 ** 32));
      const acc = bernoulli(s, Math.min(1, Math.exp(-(es * Math.sqrt(di * di + dj * dj) - c * (Math.abs(di) + Math.abs(dj))))));
      if (acc && Math.abs(di) <= R && Math.abs(dj) <= R) return String(clampCell(m, x, di, dj)); } },
  'planar-laplace': (m, x, s) => { const uo = () => { const lo = s.u32(), hi = s.u32(); return (hi * 2 ** 21 + (lo >>> 11) + 1) * 2 ** -53; };
    const u1 = uo(), u2 = uo(); const lo = s.u32(), hi = s.u32(); const u3 = (hi * 2 ** 21 + (lo >>> 11)) * 2 ** -53;
    const r = -(Math.log(u1) + Math.log(u2)) / m.eps, ang = 6.283185307179586 * u3, cell = m.cell_km ?? 0.5;
    const di = Math.floor(r * Math.sin(ang) / cell + 0.5), dj = Math.floor(r * Math.cos(ang) / cell + 0.5); return String(clampCell(m, x, di, dj)); },
});
ok = 0; bad = 0;
class Words { constructor(w) { this.w = w; this.used = 0; } u32() { return this.w[this.used++]; } }
for (const c of doc.primitives.on_words) { const s = new Words(c.words_in);
  const r = c.primitive === 'bernoulli' ? (bernoulli(s, c.args[0]) ? 1 : 0) : c.primitive === 'bernoulli_rational' ? (bernRational(s, c.args[0], c.args[1]) ? 1 : 0) : uniformInt(s, c.args[0]).toString();
  if (r === c.result && s.used === c.words) ok++; else { bad++; console.log('on_words', c, r, s.used); } }
for (const c of doc.primitives.discrete_laplace) { const s = new Src(c.seed); const d = c.draws.map(() => Number(dlap(s, c.a, c.b))); if (JSON.stringify(d) === JSON.stringify(c.draws) && s.used === c.words) ok++; else { bad++; console.log('dlap', c, d); } }
for (const v of doc.mechanisms) { const m = parseCanon(v.canonical); const f = samplers[m.name]; if (!f || ['krr','oue','sue','olh','blh'].includes(m.name)) continue; const s = new Src(v.seed);
  const r = v.indices.map(x => f(m, x, s)); const same = m.name === 'pm' ? r.every((z, i) => Number(z) === v.reports[i]) : JSON.stringify(r) === JSON.stringify(v.reports_text);
  if (same && s.used === v.words) ok++; else { bad++; console.log('mech', v.canonical, r, v.reports_text, s.used, v.words); } }
console.log(`other mechanisms: ok ${ok} bad ${bad}`); failed += bad;
// ---- memoized
const LE = v => v > 1 ? v + Math.log(-Math.expm1(-v)) : Math.log(Math.expm1(v));
const lae = (a, b) => { if (a === -Infinity) return b; const hi = Math.max(a, b), lo = Math.min(a, b); return hi + Math.log1p(Math.exp(lo - hi)); };
const L2 = (l1, t, g) => lae(LE(t + l1), (g > 2 ? Math.log(g - 2) : -Infinity) + LE(t)) - t - LE(l1 - t);
const gp = (l, g) => 1 / (1 + (g - 1) * Math.exp(-l));
const expit = l => 1 / (1 + Math.exp(-l));
const UE = { sue: e => [e / 2, -e / 2], oue: e => [0, -e] };
const PAIRS = { lsue: ['sue', 'sue'], loue: ['oue', 'oue'], lsoue: ['sue', 'oue'], losue: ['oue', 'sue'] };
const logit = p => Math.log(p) - Math.log1p(-p);
function eps2UE(name, ep, e1) { const [f, sc] = PAIRS[name]; const [lp1, lq1] = UE[f](ep); const p1 = expit(lp1), q1 = expit(lq1);
  const F = e2 => { const [lp2, lq2] = UE[sc](e2); const p2 = expit(lp2), q2 = expit(lq2); const P = p1 * p2 + (1 - p1) * q2, Q = q1 * p2 + (1 - q1) * q2; return logit(P) - logit(Q) - e1; };
  let lo = e1, hi = 2 * e1; if (F(lo) >= 0) return lo; while (F(hi) < 0) hi *= 2;
  for (let i = 0; i < 200; i++) { const mid = (lo + hi) / 2; if (mid === lo || mid === hi) break; if (F(mid) < 0) lo = mid; else hi = mid; } return (lo + hi) / 2; }
function lolhG(ep, e1) { const gmax = Math.min(1000, rint(Math.exp(Math.min(ep, 10))) + 3); let best = 2, bv = Infinity;
  for (let g = 2; g <= gmax; g++) { const q = 1 / g, P = 1 / (1 + (g - 1) * Math.exp(-e1)); const v = P > q ? q * (1 - q) / (P - q) ** 2 : Infinity; if (v < bv) { bv = v; best = g; } } return best; }
const unhex = (h, n) => { const b = Buffer.from(h, 'hex'); return [...Array(n).keys()].map(y => (b[y >> 3] & (0x80 >> (y & 7))) !== 0); };
const memoized = {
  lgrr: m => { const e2 = L2(m.eps_perm, m.eps_1, m.k), p1 = gp(m.eps_perm, m.k), p2 = gp(e2, m.k);
    return [(x, s) => ({ value: Number(grr(s, x, m.k, p1)) }), (memo, s) => grr(s, memo.value, m.k, p2).toString()]; },
  ue: m => { const e2 = eps2UE(m.name, m.eps_perm, m.eps_1); const [f, sc] = PAIRS[m.name]; const [lp1, lq1] = UE[f](m.eps_perm), [lp2, lq2] = UE[sc](e2);
    const p1 = expit(lp1), q1 = expit(lq1), p2 = expit(lp2), q2 = expit(lq2);
    return [(x, s) => ({ bits: hex([...Array(m.k).keys()].map(y => bernoulli(s, y === x ? p1 : q1))) }),
            (memo, s) => hex(unhex(memo.bits, m.k).map(b => bernoulli(s, b ? p2 : q2)))]; },
  lh: m => { const g = m.name === 'lblh' ? 2 : lolhG(m.eps_perm, m.eps_1); const e2 = L2(m.eps_perm, m.eps_1, g), p1 = gp(m.eps_perm, g), p2 = gp(e2, g);
    return [(x, s) => { const sd = uniformInt(s, m.n_seeds ?? 2 ** 32); const h = Number(xxh(x, sd) % BigInt(g)); return { seed: Number(sd), value: Number(grr(s, h, g, p1)) }; },
            (memo, s) => (BigInt(memo.seed) * BigInt(g) + grr(s, memo.value, g, p2)).toString()]; },
  rappor: m => { const wide = m.m + (m.cohorts - 1).toString(2).length - (m.cohorts === 1 ? 1 : 0) > 62;
    return [(x, s) => { const c = Number(uniformInt(s, m.cohorts)); const bloom = new Set(); for (let i = 0; i < m.h; i++) bloom.add(Number(xxh(x, c * m.h + i) % BigInt(m.m)));
        return { cohort: c, bits: hex([...Array(m.m).keys()].map(j => bernoulli(s, bloom.has(j) ? 1 - m.f / 2 : m.f / 2))) }; },
      (memo, s) => { const S = unhex(memo.bits, m.m).map(b => bernoulli(s, b ? m.q : m.p));
        if (!wide) { let v = BigInt(memo.cohort) << BigInt(m.m); S.forEach((b, j) => { if (b) v |= 1n << BigInt(j); }); return v.toString(); }
        const out = Buffer.alloc(2 + Math.ceil(m.m / 8)); out[0] = memo.cohort & 255; out[1] = memo.cohort >> 8; S.forEach((b, j) => { if (b) out[2 + (j >> 3)] |= 1 << (j & 7); }); return out.toString('hex'); }]; },
};
ok = 0; bad = 0;
for (const v of doc.memoized) { const m = parseCanon(v.canonical); const kind = m.name === 'lgrr' ? 'lgrr' : m.name === 'rappor' ? 'rappor' : m.name in PAIRS ? 'ue' : 'lh';
  const [memoF, roundF] = memoized[kind](m); const s = new Src(v.seed); const memos = [], reps = [];
  for (const x of v.indices) { const memo = memoF(x, s); memos.push(memo); const row = []; for (let r = 0; r < v.rounds; r++) row.push(roundF(memo, s)); reps.push(row); }
  const same = JSON.stringify(memos) === JSON.stringify(v.memos.map(o => o.memo)) && JSON.stringify(reps) === JSON.stringify(v.reports_text) && s.used === v.words;
  if (same) ok++; else { bad++; console.log('memo', v.canonical, JSON.stringify(memos), JSON.stringify(v.memos.map(o => o.memo)), reps, v.reports_text, s.used, v.words); } }
console.log(`memoized: ok ${ok} bad ${bad}`); failed += bad;
process.exitCode = failed ? 1 : 0;
