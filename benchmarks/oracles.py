"""The pure LDP frequency oracles end to end, localpriv against multi-freq-ldpy and
pure-ldp: client, estimate, accuracy against the truth, the same users for every library.

Settings: k = 100, eps = 1, ``n`` users (10^5; quick 10^4) drawn from a fixed Gaussian-shaped law;
round ``r`` draws its own users (seed ``r``) and, mechanism by mechanism, runs every library on
those same users, in the same order each round (interleaved rounds; at least 5 by default). Per
library and round:

* ``client``: obfuscating all ``n`` users. localpriv's client is vectorised (one call); the other
  libraries obfuscate one user per Python call, which is their API and what is timed.
* ``estimate``: from the library's own reports to a distribution with its own frequency
  estimator: multi-freq-ldpy's ``*_Aggregator_MI`` (unbiased inversion, negatives clipped, then
  normalised), pure-ldp's server (``aggregate`` each report, ``estimate`` each item: unbiased
  inversion, no post-processing), localpriv's support counts + unbiased inversion (then the same
  clip-and-normalise as multi-freq-ldpy) and, separately, its IBU on the support counts (the
  certified maximum of that pseudo-likelihood: ``accelerate="newton"``, ``|dL| < 1e-6``).
* accuracy against the users' histogram ``n_x / n``: L1 and MSE of each library's output as it
  comes, and for pure-ldp's raw inversion also after the clip-and-normalise the other two apply
  (so estimators with the same post-processing are compared like with like).

CPU time (``process_time``) and wall time; median, min, max over rounds; ratios of medians (theirs /
ours). OLH and BLH of both other libraries hash ``str(value)`` with ``xxhash.xxh32``, which xxhash
>= 3 refuses for ``str`` ("Strings must be encoded before hashing"): they run through a shim that
encodes the string as UTF-8 bytes first (what xxhash < 3 did), installed in their modules only
(:func:`xxhash_shim`); its cost per hash is measured and reported (``shim``). The report type of
every library (Python type, dtype, bytes per report) is recorded.

``python benchmarks/oracles.py [--quick] [--rounds R]`` prints JSON. ``run(quick=False) -> dict`` is
what ``benchmarks/run_all.py`` calls.
"""
from __future__ import annotations

import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's reproductions/
from _common import clock, machine, now, quick_flag, rounds_arg, spread  # noqa: E402

from localpriv.estimators.em import em  # noqa: E402
from localpriv.estimators.oracles import pure_parameters  # noqa: E402
from localpriv.mechanisms import parse  # noqa: E402
from localpriv.utils.simplex import clip_normalize  # noqa: E402
from reproductions.oracles import DiagBlock  # noqa: E402

K, EPS = 100, 1.0
ROUNDS = 5
MECHANISMS = {"GRR": "krr", "SUE": "sue", "OUE": "oue", "SS": "ss", "THE": "the", "BLH": "blh", "OLH": "olh"}
LIBRARIES = ("localpriv", "multi-freq-ldpy", "pure-ldp")


def _truth(k):
    f = np.exp(-0.5 * ((np.arange(k) - k / 2) / (k / 8)) ** 2)
    return f / f.sum()


def _acc(est, truth) -> dict:
    est = np.asarray(est, dtype=float)
    return {"l1": float(np.abs(est - truth).sum()), "mse": float(np.mean((est - truth) ** 2))}


def _describe(reports, n: int) -> dict:
    """Python type / dtype / bytes per report of a library's reports."""
    if isinstance(reports, np.ndarray):
        return {"type": f"ndarray {reports.dtype} {list(reports.shape[1:])}", "bytes_per_report": reports.nbytes / n}
    first = reports[0]
    if isinstance(first, np.ndarray):
        return {"type": f"list of ndarray {first.dtype} {list(first.shape)}", "bytes_per_report": float(first.nbytes)}
    if isinstance(first, tuple):
        return {"type": "list of tuple (" + ", ".join(type(v).__name__ for v in first) + ")", "bytes_per_report": None}
    return {"type": f"list of {type(first).__name__}", "bytes_per_report": None}


def xxhash_shim():
    """A stand-in for the ``xxhash`` module whose ``xxh32`` encodes ``str`` input as UTF-8 first.

    xxhash 1.x hashed a ``str`` as its UTF-8 bytes; 3.x and later raise ``TypeError`` instead.
    Both other libraries' local hashing calls ``xxhash.xxh32(str(v), seed=s)`` in client and
    server alike, so encoding in one place restores their behaviour without touching their code.
    """
    import xxhash

    x32 = xxhash.xxh32
    return types.SimpleNamespace(xxh32=lambda s, seed=0: x32(s.encode() if isinstance(s, str) else s, seed=seed))


def install_shim() -> dict:
    """Put :func:`xxhash_shim` into the other libraries' local-hashing modules; measure its cost."""
    import xxhash

    shim = xxhash_shim()
    done = []
    for mod in ("multi_freq_ldpy.pure_frequency_oracles.LH", "pure_ldp.frequency_oracles.local_hashing.lh_client",
                "pure_ldp.frequency_oracles.local_hashing.lh_server"):
        try:
            m = __import__(mod, fromlist=["_"])
        except ImportError:
            continue
        m.xxhash = shim
        done.append(mod)
    reps = 200_000
    t = time.process_time()
    for _ in range(reps):
        xxhash.xxh32(b"57", seed=12345).intdigest()
    direct = time.process_time() - t
    t = time.process_time()
    for _ in range(reps):
        shim.xxh32("57", seed=12345).intdigest()
    shimmed = time.process_time() - t
    return {"modules": done, "direct_ns_per_hash": 1e9 * direct / reps, "shim_ns_per_hash": 1e9 * shimmed / reps,
            "what": "xxhash.xxh32(str(v)) -> xxhash.xxh32(str(v).encode('utf-8'))", "xxhash": xxhash.VERSION}


# -- the three libraries: (client(x) -> reports, estimate(reports, n) -> {output name: distribution}) --

def _ours(name, spec):
    mech = parse(f"{spec}(k={K},eps={EPS})")
    p, q = pure_parameters(mech)
    state = {}

    def client(x):
        return mech.sample(x, state["rng"])

    def estimate(r, n):
        C = np.bincount(r, minlength=K).astype(float) if name == "GRR" else mech.support_counts(r)
        raw = (C / n - q) / (p - q)
        return {"raw": raw, "clip-normalized": clip_normalize(raw), "_counts": C}

    def ibu(C):
        res = em([DiagBlock(p, q, C)], K, max_iter=100_000, accelerate="newton", stop="loglik", delta=1e-6)
        return res.theta, res.iterations

    return client, estimate, ibu, state


def _mfl(name):
    from multi_freq_ldpy.pure_frequency_oracles import GRR, HE, LH, SS, UE

    if name == "GRR":
        return (lambda x: [GRR.GRR_Client(int(v), K, EPS) for v in x],
                lambda r, n: {"clip-normalized": GRR.GRR_Aggregator_MI(np.asarray(r), K, EPS)})
    if name in ("SUE", "OUE"):
        opt = name == "OUE"
        return (lambda x: [UE.UE_Client(int(v), K, EPS, opt) for v in x],
                lambda r, n: {"clip-normalized": UE.UE_Aggregator_MI(np.asarray(r), EPS, opt)})
    if name in ("BLH", "OLH"):
        opt = name == "OLH"
        return (lambda x: [LH.LH_Client(int(v), K, EPS, opt) for v in x],
                lambda r, n: {"clip-normalized": LH.LH_Aggregator_MI(r, K, EPS, opt)})
    if name == "SS":
        return (lambda x: [SS.SS_Client(int(v), K, EPS) for v in x],
                lambda r, n: {"clip-normalized": SS.SS_Aggregator_MI(r, K, EPS)})
    if name == "THE":
        return (lambda x: [HE.HE_Client(int(v), K, EPS) for v in x],
                lambda r, n: {"clip-normalized": HE.HE_Aggregator_MI(np.asarray(r), K, EPS, True)})
    return None


def _pure_ldp(name):
    if name == "GRR":
        from pure_ldp.frequency_oracles.direct_encoding import DEClient as C
        from pure_ldp.frequency_oracles.direct_encoding import DEServer as S
        ckw = skw = {}
    elif name in ("SUE", "OUE"):
        from pure_ldp.frequency_oracles.unary_encoding import UEClient as C
        from pure_ldp.frequency_oracles.unary_encoding import UEServer as S
        ckw = skw = {"use_oue": name == "OUE"}
    elif name in ("BLH", "OLH"):
        from pure_ldp.frequency_oracles.local_hashing import LHClient as C
        from pure_ldp.frequency_oracles.local_hashing import LHServer as S
        ckw = skw = {"use_olh": name == "OLH"}  # g = 2 (BLH) by default
    elif name == "THE":
        from pure_ldp.frequency_oracles.histogram_encoding import HEClient as C
        from pure_ldp.frequency_oracles.histogram_encoding import HEServer as S
        ckw, skw = {}, {"use_the": True}
    else:
        return None
    client = C(EPS, K, **ckw)  # every pure-ldp client takes (epsilon, d, ...); items are 1..d

    def estimate(r, n):
        server = S(EPS, K, **skw)
        for rep in r:
            server.aggregate(rep)
        raw = np.array([server.estimate(i + 1, suppress_warnings=True) for i in range(K)]) / n
        return {"raw": raw, "clip-normalized (by the benchmark)": clip_normalize(raw)}

    return (lambda x: [client.privatise(int(v) + 1) for v in x]), estimate


def run(quick: bool = False, rounds: int | None = None) -> dict:
    """Per mechanism and library: client and estimate times, accuracy; medians over rounds."""
    n = 10_000 if quick else 100_000
    rounds = rounds or (2 if quick else ROUNDS)
    f_true = _truth(K)
    out = {"benchmark": "oracles", "started": now(), "machine": machine(), "k": K, "eps": EPS, "n": n,
           "rounds": rounds, "quick": quick, "order": list(LIBRARIES), "mechanisms": {}}
    try:
        out["shim"] = install_shim()
    except ImportError:
        out["shim"] = None
    libs = {}
    for name, spec in MECHANISMS.items():
        libs[name] = {"localpriv": _ours(name, spec)}
        for lib, make in (("multi-freq-ldpy", _mfl), ("pure-ldp", _pure_ldp)):
            try:
                got = make(name)
            except ImportError:
                got = "not installed"
            libs[name][lib] = got if got is not None else "not offered"
    rec = {name: {lib: {"client_cpu": [], "client_wall": [], "estimate_cpu": [], "estimate_wall": [],
                        "acc": {}, "ibu_cpu": [], "ibu_wall": [], "ibu_iterations": []}
                  for lib in LIBRARIES} for name in MECHANISMS}
    errors: dict = {}
    warm = np.arange(20) % K
    for name in MECHANISMS:  # warm-up: numba JIT, lazy imports and tables (not timed)
        for lib in LIBRARIES:
            impl = libs[name][lib]
            if isinstance(impl, str):
                continue
            try:
                if lib == "localpriv":
                    impl[3]["rng"] = np.random.default_rng(10 ** 6)
                impl[1](impl[0](warm), warm.size)
            except Exception as exc:  # another library failing is a result, not a crash
                errors[(name, lib)] = f"{type(exc).__name__}: {exc}"[:300]
    for r in range(rounds):
        rng = np.random.default_rng(r)
        x = rng.choice(K, size=n, p=f_true)
        truth = np.bincount(x, minlength=K) / n
        for name in MECHANISMS:
            for lib in LIBRARIES:
                impl = libs[name][lib]
                if isinstance(impl, str) or (name, lib) in errors:
                    continue
                d = rec[name][lib]
                try:
                    if lib == "localpriv":
                        impl[3]["rng"] = np.random.default_rng([r, 1])
                    reports, c_cpu, c_wall = clock(impl[0], x)
                    ests, e_cpu, e_wall = clock(impl[1], reports, n)
                except Exception as exc:
                    errors[(name, lib)] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                d["client_cpu"].append(c_cpu)
                d["client_wall"].append(c_wall)
                d["estimate_cpu"].append(e_cpu)
                d["estimate_wall"].append(e_wall)
                if r == 0:
                    d["reports"] = _describe(reports, n)
                for key, est in ests.items():
                    if not key.startswith("_"):
                        d["acc"].setdefault(key, []).append(_acc(est, truth))
                if lib == "localpriv":
                    (theta, its), i_cpu, i_wall = clock(impl[2], ests["_counts"])
                    d["ibu_cpu"].append(i_cpu)
                    d["ibu_wall"].append(i_wall)
                    d["ibu_iterations"].append(its)
                    d["acc"].setdefault("IBU (support counts)", []).append(_acc(theta, truth))
        print(f"# oracles: round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    for name in MECHANISMS:
        row = {}
        for lib in LIBRARIES:
            impl, d = libs[name][lib], rec[name][lib]
            if isinstance(impl, str):
                row[lib] = {"skipped": f"{lib}: {impl}"}
                continue
            entry = {key: spread(d[key]) for key in ("client_cpu", "client_wall", "estimate_cpu", "estimate_wall")}
            entry["rounds"] = len(d["client_cpu"])
            entry["reports"] = d.get("reports")
            entry["accuracy"] = {key: {"l1": spread(a["l1"] for a in accs), "mse": spread(a["mse"] for a in accs)}
                                 for key, accs in d["acc"].items()}
            if lib == "localpriv":
                entry["ibu_cpu"], entry["ibu_wall"] = spread(d["ibu_cpu"]), spread(d["ibu_wall"])
                entry["ibu_iterations"] = spread(d["ibu_iterations"])
            if entry["client_wall"]["median"]:
                entry["client_reports_per_s_wall"] = n / entry["client_wall"]["median"]
            if (name, lib) in errors:
                entry["error"] = errors[(name, lib)]
            row[lib] = entry
        ours = row["localpriv"]
        for lib in LIBRARIES[1:]:
            th = row[lib]
            if "client_cpu" in th and th["client_cpu"]["median"] and ours.get("client_cpu", {}).get("median"):
                th["ratio_theirs_over_ours"] = {
                    f"{step}_{kind}": th[f"{step}_{kind}"]["median"] / ours[f"{step}_{kind}"]["median"]
                    for step in ("client", "estimate") for kind in ("cpu", "wall")
                    if th[f"{step}_{kind}"]["median"] and ours[f"{step}_{kind}"]["median"]}
        out["mechanisms"][name] = row
    out["load_after"] = machine()["load"]
    out["finished"] = now()
    return out


if __name__ == "__main__":
    from _common import emit

    emit(run(quick=quick_flag(), rounds=rounds_arg(0) or None))
