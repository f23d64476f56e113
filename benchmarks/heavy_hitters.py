"""Heavy hitters on real data: localpriv's PEM against pure-LDP's PEM.

Data: the 138,957 Gowalla check-ins around New York (``../shared/data/gowalla_nyc_checkins.tsv.gz``,
column 5 ``location id``): every check-in is a user holding a place id, an open vocabulary of
21,509 distinct ids of 4 to 7 digits. The truth is the top-k of the raw ids.

Both implementations get the same protocol and the same public parameters: ids as 7 digits of 4
bits (``alphabet="digits"``, code 0 = padding: 28 bits), 6 groups, prefixes of 8, 12, ..., 28
bits (``start_bits = 4``, ``bits_per_round = 4``; pure-LDP: ``start_length=4``,
``fragment_length=4``, ``max_string_length=28`` on the same bit strings, written as '0'/'1' text,
its binary alphabet), OLH with ``g = round(e^eps) + 1``, the same eps and n. A third row runs
localpriv's defaults for digits (3 groups: 12, 20, 28 bits), which pure-LDP's collector cannot
afford (below), and a fourth localpriv's TreeHist at its defaults (the same 3 levels plus a final
group of whole strings for the frequencies).

**pure-LDP's collector, evaluated lazily.** pure-LDP's ``LHServer.aggregate`` adds every report to
an array over the whole domain, looping in Python over ``d = 2^(prefix bits)`` values per report
(``2^28`` in the last round: days of CPU for this data). Its PEM only ever reads the estimates of
the candidates it queries (``estimate_all(candidates)``, no normalization by default), so
``LazyLHServer`` below keeps the reports and computes, for the queried candidates only, exactly the
count pure-LDP would have aggregated (``y == xxh32(str(index), seed) % g``, the same call) and its
estimator ``a C - b``; pure-LDP's ``PEMClient`` and ``PEMServer.find_heavy_hitters`` run unchanged.
The benchmark checks the equivalence first: on a 10-bit problem small enough for pure-LDP's own
server, both give identical heavy hitters and estimates (``lazy_server_equivalent``).

pure-LDP 1.2.0 hashes ``str(index)`` with xxhash, which refuses ``str`` since xxhash 3 (the lock
pins 4.1.0): :func:`patch_xxhash` lets ``xxhash.xxh32`` hash a string's UTF-8 bytes again.

Timing: clients = from the values to the reports (ours includes encoding the strings; pure-LDP's
bit strings are prepared outside its timer, its ``privatise`` is called once per user, as its API
requires); collector = from the reports to the heavy hitters. CPU (process) and wall seconds;
medians over interleaved rounds (seed r for every implementation in round r).

Usage: ``OPENBLAS_NUM_THREADS=1 python benchmarks/heavy_hitters.py [--quick]`` (about 2-3 minutes;
``--quick``: 2 rounds). Writes ``benchmarks/results-heavy_hitters.json`` atomically.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, quick_flag  # noqa: E402

from localpriv.heavy_hitters.pem import PEMPlan, StringEncoding, pem_identify, pem_perturb, treehist_identify  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data" / "gowalla_nyc_checkins.tsv.gz"
OUT = HERE / "results-heavy_hitters.json"
RESULT_VERSION = 1
K = 10
EPS = (4.0,)
ENC = StringEncoding(7, "digits")


def load_ids() -> np.ndarray:
    with gzip.open(DATA, "rt") as fh:
        return np.array([line.rstrip("\n").split("\t")[4] for line in fh], dtype=object)


def bit_strings(values) -> list[str]:
    """Our 28-bit encoding of each id as '0'/'1' text: pure-LDP's input."""
    words, _ = ENC.encode(values)
    m = ENC.total_bits
    return [format(int(w) >> (64 - m), f"0{m}b") for w in words[:, 0]]


def decode_bits(bits: str) -> str:
    """A 28-bit candidate of pure-LDP back to its id; a bit string no client can send (a code above
    10, a digit after the padding) -- pure-LDP does not prune them -- becomes ``<invalid 0101...>``,
    a wrong answer that equals no id."""
    codes = [int(bits[i:i + 4], 2) for i in range(0, len(bits), 4)]
    end = codes.index(0) if 0 in codes else len(codes)
    if any(c > 10 for c in codes) or any(codes[end:]):
        return f"<invalid {bits}>"
    return "".join("0123456789"[c - 1] for c in codes[:end])


# ------------------------------------------------------------------------------------------------
# pure-LDP
# ------------------------------------------------------------------------------------------------
def patch_xxhash() -> None:
    """pure-LDP 1.2.0 hashes ``str(index)``; xxhash >= 3 refuses ``str`` ("Strings must be encoded
    before hashing"), so pure-LDP's OLH client fails with the pinned xxhash 4.1.0. We hash the
    string's UTF-8 bytes, which is what the xxhash releases pure-LDP was written against did."""
    import xxhash
    if getattr(xxhash.xxh32, "localpriv_shim", False):
        return
    original = xxhash.xxh32

    def xxh32(data=b"", seed=0):
        return original(data.encode("utf-8") if isinstance(data, str) else data, seed=seed)

    xxh32.localpriv_shim = True
    xxhash.xxh32 = xxh32


def lazy_server_class():
    import xxhash
    patch_xxhash()
    from pure_ldp.frequency_oracles.local_hashing import LHServer

    class LazyLHServer(LHServer):
        """pure-LDP's OLH server with aggregation deferred to the queried candidates (module doc)."""

        def __init__(self, epsilon):
            super().__init__(epsilon, 1, use_olh=True)

        def reset(self):
            self.reports = []
            self.aggregated_data = np.zeros(1)
            self.estimated_data = np.zeros(1)
            self.last_estimated = 0
            self.n = 0

        def aggregate(self, priv_data):
            self.reports.append(priv_data)
            self.n += 1

        def estimate_all(self, data_list, suppress_warnings=False, normalization=0):
            if normalization != 0:
                raise NotImplementedError("only pure-LDP's default (no normalization) is evaluated lazily")
            ys = np.array([r[0] for r in self.reports], dtype=np.int64)
            seeds = [r[1] for r in self.reports]
            h32, g = xxhash.xxh32_intdigest, self.g
            counts = np.empty(len(data_list))
            for j, x in enumerate(data_list):  # their aggregate's test, for the candidates asked
                s = str(self.index_mapper(x)).encode("utf-8")
                hashed = np.fromiter(map(h32, [s] * len(seeds), seeds), dtype=np.int64, count=len(seeds))
                counts[j] = np.count_nonzero(hashed % g == ys)
            a = self.g / (self.p * self.g - 1)
            b = self.n / (self.p * self.g - 1)
            return a * counts - b

    return LazyLHServer


def pure_ldp_run(bits: list[str], eps: float, seed: int, start: int, frag: int, lazy: bool = True):
    from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
    patch_xxhash()
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the other library draws from NumPy's global generator
    m = ENC.total_bits
    client = PEMClient(eps, start, m, frag)
    fo = lazy_server_class()(eps) if lazy else None
    server = PEMServer(eps, start, m, frag, fo_server=fo)
    c0, w0 = time.process_time(), time.perf_counter()
    reports = [client.privatise(b) for b in bits]
    c1, w1 = time.process_time(), time.perf_counter()
    for r in reports:
        server.aggregate(r)
    found, freqs = server.find_heavy_hitters(k=K)
    c2, w2 = time.process_time(), time.perf_counter()
    return ([decode_bits(b) for b in found], np.asarray(freqs, float) / len(bits),
            {"client_cpu": c1 - c0, "client_wall": w1 - w0, "collector_cpu": c2 - c1, "collector_wall": w2 - w1})


def check_lazy_equivalence(bits: list[str], eps: float) -> dict:
    """pure-LDP's own server and the lazy one on a problem small enough for the former (10-bit
    prefixes of the ids' bit strings, 200 users): same heavy hitters, same estimates."""
    from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
    patch_xxhash()
    short = [b[:10] for b in bits[:200]]
    out = []
    for lazy in (False, True):
        random.seed(7)
        np.random.seed(7)  # noqa: NPY002 - the other library draws from NumPy's global generator
        client = PEMClient(eps, 2, 10, 4)
        server = PEMServer(eps, 2, 10, 4, fo_server=lazy_server_class()(eps) if lazy else None)
        for b in short:
            server.aggregate(client.privatise(b))
        hh, fr = server.find_heavy_hitters(k=5)
        out.append((list(hh), [float(x) for x in fr]))
    same = out[0][0] == out[1][0] and np.allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-9)
    return {"equivalent": bool(same), "users": len(short), "bits": 10, "top5_original": out[0][0],
            "top5_lazy": out[1][0]}


# ------------------------------------------------------------------------------------------------
# localpriv
# ------------------------------------------------------------------------------------------------
def ours_run(values, eps: float, seed: int, start: int | None, eta: int | None, method: str = "pem"):
    plan = PEMPlan(eps, ENC, start, eta, final_group=method == "treehist")
    rng = np.random.default_rng(seed)
    c0, w0 = time.process_time(), time.perf_counter()
    reports = pem_perturb(values, plan, rng)
    c1, w1 = time.process_time(), time.perf_counter()
    res = pem_identify(reports, K) if method == "pem" else treehist_identify(reports, K)
    c2, w2 = time.process_time(), time.perf_counter()
    return (list(res.values), np.asarray(res.estimates, float),
            {"client_cpu": c1 - c0, "client_wall": w1 - w0, "collector_cpu": c2 - c1, "collector_wall": w2 - w1},
            res)


def scores(found, est, truth_top: list[str], share: dict) -> dict:
    hit = [v for v in found if v in set(truth_top)]
    errs = [abs(e - share[v]) for v, e in zip(found, est) if v in share]
    return {"precision": len(hit) / max(len(found), 1), "recall": len(hit) / len(truth_top),
            "found": len(found), "found_existing": sum(v in share for v in found) / max(len(found), 1),
            "mae_estimates_of_real_ids": float(np.mean(errs)) if errs else None}


def main() -> None:
    quick = quick_flag()
    rounds = 2 if quick else 5
    t_start = time.perf_counter()
    values = load_ids()
    n = values.size
    uniq, cnt = np.unique(values.astype(str), return_counts=True)
    order = np.argsort(-cnt, kind="stable")
    truth_top = [str(uniq[i]) for i in order[:K]]
    share = {str(u): c / n for u, c in zip(uniq, cnt)}
    bits = bit_strings(values)
    equivalence = check_lazy_equivalence(bits, 4.0)
    configs = {"localpriv (same parameters)": ("pem", 4, 4), "localpriv (defaults: 2 digits per round)":
               ("pem", None, None), "localpriv treehist (defaults)": ("treehist", None, None),
               "pure-LDP 1.2.0 PEM": ("pure", 4, 4)}
    raw: dict = {f"eps={e:g}": {name: [] for name in configs} for e in EPS}
    for r in range(rounds):  # interleaved: every implementation once per round, seed r
        for eps in EPS:
            for name, (impl, start, eta) in configs.items():
                cover = None
                if impl != "pure":
                    found, est, t, res = ours_run(values, eps, r, start, eta, impl)
                    cover = float(np.mean([lo <= share.get(v, 0.0) <= hi
                                           for v, lo, hi in zip(res.values, res.lower, res.upper)]))
                else:
                    found, est, t = pure_ldp_run(bits, eps, r, start, eta)
                row = {**scores(found, est, truth_top, share), **t, "interval_coverage": cover,
                       "found_values": found}
                raw[f"eps={eps:g}"][name].append(row)
                print(f"round {r + 1}/{rounds} eps {eps:g} {name}: precision {row['precision']:.2f}, "
                      f"clients {t['client_wall']:.2f} s, collector {t['collector_wall']:.2f} s", file=sys.stderr)
    summary: dict = {}
    for key, per in raw.items():
        summary[key] = {}
        for name, rows in per.items():
            med = {m: statistics.median(r[m] for r in rows) for m in
                   ("precision", "recall", "found_existing", "client_cpu", "client_wall", "collector_cpu",
                    "collector_wall")}
            med["clients_per_second_wall"] = n / med["client_wall"]
            med["clients_per_second_cpu"] = n / med["client_cpu"]
            med["precision_each_round"] = [r["precision"] for r in rows]
            if rows[0]["interval_coverage"] is not None:
                med["interval_coverage_mean"] = float(np.mean([r["interval_coverage"] for r in rows]))
            summary[key][name] = med
        ours, pure = summary[key]["localpriv (same parameters)"], summary[key]["pure-LDP 1.2.0 PEM"]
        summary[key]["client_speedup_cpu"] = pure["client_cpu"] / ours["client_cpu"]
        summary[key]["client_speedup_wall"] = pure["client_wall"] / ours["client_wall"]
    result = {
        "benchmark": "heavy_hitters", "version": RESULT_VERSION,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "OPENBLAS_NUM_THREADS=1 python benchmarks/heavy_hitters.py" + (" --quick" if quick else ""),
        "data": {"file": "../shared/data/gowalla_nyc_checkins.tsv.gz (column 5, location id)", "users": int(n),
                 "distinct": int(uniq.size), "true_top": truth_top,
                 "true_top_shares": [share[v] for v in truth_top]},
        "protocol": {"k": K, "eps": list(EPS), "encoding": ENC.describe(),
                     "same_parameters": {"start_bits": 4, "bits_per_round": 4, "groups": 6},
                     "localpriv_defaults": PEMPlan(4.0, ENC).describe()},
        "rounds": rounds, "statistic": "median over interleaved rounds (seed r in round r)",
        "metrics": {"precision": "found ids among the true top-k / ids found",
                    "recall": "true top-k ids found / k (equal to precision when k ids are found)",
                    "found_existing": "ids found that occur in the data at all / ids found",
                    "interval_coverage_mean": "answers whose 95 % interval holds their true share (0 for an id "
                                              "not in the data), averaged over the rounds' k answers"},
        "lazy_server_equivalent": equivalence,
        "summary": summary, "runs": raw, "machine": machine(),
        "elapsed_seconds": round(time.perf_counter() - t_start, 1),
    }
    tmp = OUT.with_name(f".{OUT.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2, default=float))
    os.replace(tmp, OUT)
    print(json.dumps({"summary": summary, "lazy_server_equivalent": equivalence["equivalent"],
                      "elapsed_seconds": result["elapsed_seconds"]}, indent=2, default=float))


if __name__ == "__main__":
    main()
