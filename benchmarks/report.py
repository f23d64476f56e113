"""Render ``benchmarks/RESULTS.md`` from the benchmarks' JSON files.

Every number in RESULTS.md comes from a JSON file in ``benchmarks/``: ``results.json`` (``make
bench``: ``run_all.py``) and the ``results-*.json`` of the other targets (``bench-em``,
``bench-memory``, ``bench-uncertainty``, ``bench-spark``, ``bench-import``, ``bench-service``,
``bench-service-mixed``, ``bench-service-profile``,
``bench-vocab``, ``bench-rappor-accuracy``). A section whose JSON is missing says "not measured"; a
section whose JSON has an unexpected shape says so and names the file, rather than guess. Each section
names its file, its date, the machine, the load average and how many rounds its medians are over.

    python benchmarks/report.py            # writes benchmarks/RESULTS.md (make bench-report)
    python benchmarks/report.py --check    # exit 1 if RESULTS.md differs from the rendering
    python benchmarks/report.py --dir D --out F

``tests/test_bench_report.py`` checks that the committed RESULTS.md is the rendering of the
committed JSON.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN_ALL = ["clients", "ibu", "planar", "gibu", "oracles", "memory", "uncertainty", "import_time", "spark"]
# results-<name>.json written by other targets (their own formats)
OWN_FILES = {"em": "results-em.json", "service": "results-service.json",
             "service_mixed": "results-service-mixed.json", "service_profile": "results-service-ingest-profile.json",
             "service_interleaved": "results-service-ingest-interleaved.json",
             "service_bodies": "results-service-ingest-bodies.json",
             "large_domains": "results-large_domains.json", "heavy_hitters": "results-heavy_hitters.json",
             "rappor_accuracy": "results-rappor-accuracy.json", "java_client": "results-java-client.json",
             "clients_all": "results-clients-all.json",
             "planar_certified": "results-planar_certified.json", "cost_curves": "results-cost_curves.json"}
TARGETS = {"clients": "make bench", "ibu": "make bench", "planar": "make bench", "gibu": "make bench",
           "oracles": "make bench", "memory": "make bench / make bench-memory",
           "uncertainty": "make bench / make bench-uncertainty", "import_time": "make bench / make bench-import",
           "spark": "make bench / make bench-spark", "em": "make bench-em", "service": "make bench-service",
           "service_mixed": "make bench-service-mixed", "service_profile": "make bench-service-profile",
           "service_interleaved": "make bench-service-interleaved-0075",
           "service_bodies": "make bench-service-interleaved",
           "large_domains": "make bench-vocab", "heavy_hitters": "make bench-vocab",
           "rappor_accuracy": "make bench-rappor-accuracy", "java_client": "make bench-java-client",
           "clients_all": "make bench-clients-all",
           "planar_certified": "make bench-planar-certified", "cost_curves": "make bench-cost"}
NOT_MEASURED = "Not measured: no JSON for this section in `benchmarks/` (run `{target}`)."


# ----------------------------------------------------------------------------------------- format

def num(x, digits: int = 3) -> str:
    """A number to ``digits`` significant digits, without exponent for ordinary sizes."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}".replace(",", " ") if abs(x) >= 10_000 else str(x)
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}".replace(",", " ")
    if abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits - 1 - math.floor(math.log10(abs(x)))}f}"


def sec(x) -> str:
    """Seconds with a unit: us, ms or s."""
    if x is None:
        return "-"
    x = float(x)
    if x < 1e-3:
        return f"{num(x * 1e6)} us"
    if x < 1:
        return f"{num(x * 1e3)} ms"
    return f"{num(x)} s"


def ratio(x) -> str:
    return "-" if x is None else f"{num(x)}x"


def spread_str(s, unit=sec) -> str:
    """``median (min-max)`` of a spread dict; just the median when there is one value."""
    if not isinstance(s, dict) or s.get("median") is None:
        return "-"
    if s.get("n", 2) <= 1 or s.get("min") == s.get("max"):
        return unit(s["median"])
    return f"{unit(s['median'])} ({unit(s['min'])} - {unit(s['max'])})"


def load_str(x) -> str:
    if not x:
        return "not recorded"
    return " / ".join(num(v, 2) for v in x[:3])


def table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def g(d, *keys, default=None):
    """``d[k1][k2]...`` or ``default`` when a key is missing or a level is not a dict."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


# ---------------------------------------------------------------------------------------- sources

def _date(doc) -> str | None:
    for keys in (("finished",), ("started",), ("date",), ("machine", "time")):
        v = g(doc, *keys)
        if isinstance(v, str):
            return v
    return None


BROKEN = "broken"


def _read(path: Path):
    """The parsed JSON, ``None`` if the file is missing, ``BROKEN`` if it is not valid JSON."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return BROKEN


def sources(directory: Path) -> dict:
    """Section name -> {"data", "file", "date", "machine", "load_before", "load_after", "quick"}."""
    found: dict = {}
    main = _read(directory / "results.json")
    if main == BROKEN:
        found["_broken_main"] = True
    for name in RUN_ALL:
        cands = []
        if isinstance(main, dict) and isinstance(g(main, "results", name), dict):
            d = main["results"][name]
            cands.append({"data": d, "file": "results.json", "date": _date(d) or _date(main), "rank": 0,
                          "machine": d.get("machine") or main.get("machine"), "quick": main.get("quick"),
                          "load_before": main.get("load_before"), "load_after": d.get("load_after")})
        own = _read(directory / f"results-{name}.json")
        if own == BROKEN and not cands:
            found[name] = {"broken": f"results-{name}.json"}
        if isinstance(own, dict):
            d = g(own, "results", name) if isinstance(g(own, "results", name), dict) else own
            cands.append({"data": d, "file": f"results-{name}.json", "date": _date(d) or _date(own), "rank": 1,
                          "machine": d.get("machine") or own.get("machine"), "quick": own.get("quick"),
                          "load_before": own.get("load_before"), "load_after": own.get("load_after")})
        if cands:  # the later run wins; a dated run beats an undated one; undated: the dedicated file
            found[name] = max(cands, key=lambda c: (c["date"] is not None, c["date"] or "", c["rank"]))
    for name, fname in OWN_FILES.items():
        d = _read(directory / fname)
        if d == BROKEN:
            found[name] = {"broken": fname}
        if isinstance(d, dict):
            found[name] = {"data": d, "file": fname, "date": _date(d), "machine": d.get("machine"),
                           "quick": d.get("quick"), "load_before": d.get("load_before"),
                           "load_after": d.get("load_after")}
    return found


def meta(src: dict, rounds=None, load_before=None, load_after=None) -> str:
    m = src.get("machine") or {}
    mem = m.get("memory") or (f"{m['memory_gib']} GiB" if m.get("memory_gib") else None)
    parts = [f"Source: `benchmarks/{src['file']}`", f"run {src['date'] or 'date not recorded'}"]
    if src.get("quick"):
        parts.append("**quick run (smaller sizes)**")
    parts.append(f"machine: {m.get('cpu') or 'CPU not recorded'}, {m.get('cores', '?')} cores, "
                 f"{mem or 'memory not recorded'}")
    threads = g(m, "threads", "bench_pin")
    if threads:
        parts.append(f"BLAS pinned to {threads} thread(s)")
    lb = load_before or src.get("load_before") or m.get("load")
    la = load_after or src.get("load_after")
    parts.append(f"load average (1/5/15 min) before: {load_str(lb)}, after: {load_str(la)}")
    if rounds:
        parts.append(f"{rounds} round(s)")
    return "_" + "; ".join(parts) + "._"


def versions(m: dict) -> str:
    keys = ("python", "numpy", "scipy", "numba", "multi-freq-ldpy", "pure-ldp", "xxhash")
    return ", ".join(f"{k} {m[k]}" for k in keys if m.get(k))


# --------------------------------------------------------------------------------------- sections

def _ns(e, kind="cpu") -> str:
    """``median (min - max)`` ns per report of a clients entry, or why there is none."""
    if not isinstance(e, dict):
        return "-"
    if e.get("skipped"):
        return "not offered" if "offered" in str(e["skipped"]) else str(e["skipped"])
    if e.get("error"):
        return f"fails ({str(e['error'])[:70]})"
    s = e.get(f"{kind}_ns_per_report")
    if not isinstance(s, dict):
        return "-"
    return spread_str(dict(s, n=2), lambda v: f"{num(v)} ns")


def _dtype(e) -> str:
    if not isinstance(e, dict) or e.get("skipped") or (e.get("error") and not e.get("dtype")):
        return "-"
    b = e.get("bytes_per_report")
    return f"{e.get('dtype', '?')}" + (f", {num(b)} B" if b is not None else "")


def sec_clients(d) -> list[str]:
    rows = d.get("rows") or []
    if rows and isinstance(rows[0], dict) and "cpu_ns_per_report" not in (rows[0].get("ours") or {}):
        return _clients_legacy(d)
    out = [f"k = {d.get('k')}, eps = {d.get('eps')}. CPU time per report (`process_time`), median (min - max) over "
           f"{d.get('rounds')} interleaved rounds; ratios are of the medians (theirs / ours, CPU and wall). "
           f"localpriv and multi-freq-ldpy obfuscate the same n = {num(d.get('n'))} users; pure-ldp the first "
           f"{num(d.get('n_pure_ldp'))} of them (one call per user, so its cost per report does not depend on n). "
           f"localpriv runs on {d.get('threads_ours', 1)} thread unless the row says otherwise.", ""]
    body = []
    for r in rows:
        rat = r.get("ratios") or {}

        def rr(key, rat=rat):
            v = rat.get(key)
            return "-" if not isinstance(v, dict) else f"{ratio(v.get('cpu'))} ({ratio(v.get('wall'))} wall)"
        body.append([r.get("mechanism", "?"), _ns(r.get("ours")), _dtype(r.get("ours")),
                     _ns(r.get("multi-freq-ldpy")), _dtype(r.get("multi-freq-ldpy")), _ns(r.get("pure-ldp")),
                     rr("multi-freq-ldpy"), rr("pure-ldp")])
        for extra, label in (("ours_float64", "ours + conversion to float64"),
                             ("ours_two_threads", "ours on two threads")):
            if isinstance(r.get(extra), dict):
                key = "(ours as float64)" if extra == "ours_float64" else "(ours on two threads)"
                body.append([f"{r.get('mechanism')}: {label}", _ns(r[extra]), _dtype(r[extra]), "", "", "",
                             rr(f"multi-freq-ldpy {key}"), rr(f"pure-ldp {key}")])
    out += table(["mechanism", "localpriv ns/report (CPU)", "report", "multi-freq-ldpy ns/report (CPU)", "report",
                  "pure-ldp ns/report (CPU)", "ours vs multi-freq-ldpy", "ours vs pure-ldp"], body)
    out += ["", "localpriv obfuscates all users in one vectorised call; the other libraries offer one call per user, "
            "which is what is timed for them (their reports appended to a list, after a warm-up call that compiles "
            "multi-freq-ldpy's numba functions)."]
    if d.get("shim"):
        out += ["", f"OLH / BLH of the other libraries run through a shim: {d['shim']}."]
    floors = d.get("floors") or {}
    if floors:
        out += ["", "Random-number floors (the draws alone, same n, same rounds): "
                + "; ".join(f"`{k}` {_ns(v)}" for k, v in floors.items()) + "."]
    kf = d.get("krr_floor_ratio") or {}
    if kf:
        out += ["", "k-RR's cost over the floors (median (min - max) of the per-round ratios, CPU): "
                + "; ".join(f"{k.replace('_', ' ')} {spread_str(g(v, 'cpu'), num)}" for k, v in kf.items()) + "."]
    ob = d.get("oue_bits_ratio")
    if isinstance(ob, dict):
        out += ["", f"OUE's cost over drawing its random bits alone (CPU): {spread_str(ob.get('cpu'), num)}."]
    pk = d.get("krr_peak_memory")
    if isinstance(pk, dict):
        if pk.get("error"):
            out += ["", f"k-RR peak memory at n = {num(pk.get('n'))}: failed ({pk['error'][:100]})."]
        else:
            out += ["", f"k-RR at n = {num(pk.get('n'))} in a child process: output "
                    f"{num(pk.get('output_bytes', 0) / 2**20)} "
                    f"MiB, peak resident memory above the resident size before `sample` "
                    f"{num(pk.get('extra_peak_bytes', 0) / 2**20)} MiB (above the output: "
                    f"{num(pk.get('extra_minus_output_bytes', 0) / 2**20)} MiB), {sec(pk.get('sample_cpu_s'))} CPU."]
    return out


def _clients_legacy(d) -> list[str]:
    rows = d.get("rows") or []
    out = ["This JSON predates the current format (best of 3 wall times, no CPU time, the libraries timed at "
           "different n). Rerun `make bench`.", ""]
    libs = ["multi-freq-ldpy", "pure-ldp"]
    body = []
    for r in rows:
        ours = r.get("ours") or {}

        def rate(e):
            if not isinstance(e, dict):
                return "-"
            if e.get("error"):
                return f"fails ({e['error'][:60]})"
            v = e.get("reports_per_s")
            return (f"{num(v / 1e6)} M" if v else "-") + (f", n={num(e['n'])}" if e.get("n") else "")
        ratios = [ratio(r.get(key)) if r.get(key) is not None else "-" for key in ("ratio_vs_mfl", "ratio_vs_pure_ldp")]
        body.append([r.get("mechanism", "?"), rate(ours)] + [rate(r.get(lib)) for lib in libs] + ratios)
    out += table(["mechanism", "localpriv reports/s (wall)", "multi-freq-ldpy reports/s", "pure-ldp reports/s",
                  "ours / multi-freq-ldpy", "ours / pure-ldp"], body)
    return out


def sec_ibu(d) -> list[str]:
    rows = d.get("rows") or []
    if rows and "contenders" not in rows[0]:
        return _ibu_legacy(rows)
    out = ["Times are CPU time (`process_time`), median (min - max) over the rounds; wall time is in the "
           "JSON. Each round draws its own data set and runs every contender on it. "
           "\"speed-up\" = multi-freq-ldpy's median / ours. \"L(ours) - L(mfl)\" is the difference of "
           "log-likelihoods on the same counts: how much better the estimate fits the reports, which "
           "says nothing by itself about accuracy. Accuracy is the L1 distance to the users' histogram "
           "(median over the data sets); \"closer\" counts the rounds in which ours is closer to the truth "
           "than multi-freq-ldpy's.", ""]
    body = []
    for r in rows:
        c = r["contenders"]
        mfl = c.get("mfl")
        for name in ("ours_none", "ours_squarem", "ours_newton", "mfl"):
            e = c.get(name)
            if e is None:
                continue
            label = {"ours_none": "ours, plain EM", "ours_squarem": "ours, SQUAREM",
                     "ours_newton": "ours, Newton finish", "mfl": "multi-freq-ldpy"}[name]
            its = e.get("iterations") or {}
            conv = e.get("converged_rounds")
            it_s = "-" if its.get("median") is None else num(its["median"])
            if conv is not None:
                it_s += f" ({conv}/{r.get('rounds')} converged)"
            vs = e.get("vs_mfl") or {}
            body.append([r["mechanism"], r["k"], label, spread_str(e.get("cpu")), it_s,
                         ratio(vs.get("speedup_cpu")) if vs else "-",
                         spread_str(vs.get("loglik_minus_mfl"), num) if vs else "-",
                         spread_str(e.get("l1_to_truth"), num), num(g(e, "mse_to_truth", "median")),
                         f"{vs.get('rounds_ours_closer_l1')}/{r.get('rounds')}" if vs else "-"])
        if mfl is None and r.get("mfl_not_run"):
            body.append([r["mechanism"], r["k"], "multi-freq-ldpy", f"not run: {r['mfl_not_run']}",
                         "", "", "", "", "", ""])
    out += table(["mech", "k", "estimator", "CPU", "EM evaluations", "speed-up vs mfl (CPU)", "L(ours) - L(mfl)",
                  "L1 to truth", "MSE to truth", "ours closer (L1)"], body)
    out += ["", "Plain EM is the fixed-point map both libraries implement; SQUAREM (Varadhan and Roland 2008) "
            "extrapolates it; the Newton finish (`accelerate=\"newton\"`, `docs/performance.md`) runs SQUAREM "
            "cycles, then an active-set Newton step on the face of the simplex, accepted only when the KKT "
            "conditions certify the exact maximum of the likelihood, then plain EM steps until the stopping rule "
            "holds. The maxima of these problems lie on the boundary of the simplex (many coordinates exactly 0), "
            "where EM converges slowly."]
    capped = [r for r in rows if g(r, "contenders", "ours_none", "converged_rounds") == 0]
    closer = [r for r in rows if g(r, "contenders", "ours_newton", "vs_mfl", "rounds_ours_closer_l1") is not None
              and r["contenders"]["ours_newton"]["vs_mfl"]["rounds_ours_closer_l1"] * 2 < r.get("rounds", 0)]
    out.append("")
    if capped:
        out.append(f"Plain EM reached its iteration cap without meeting the tolerance in every round of "
                   f"{len(capped)} of {len(rows)} rows; multi-freq-ldpy runs the same fixed-point map (their "
                   "log-likelihoods agree with our plain EM's) and stops at the same cap.")
    if closer:
        out.append(f"In {len(closer)} of {len(rows)} rows the exact maximum of the likelihood (Newton finish) is "
                   "farther from the truth than multi-freq-ldpy's capped EM in most rounds: EM stopped early is "
                   "smoothed towards its uniform start, a regularisation that helps on these smooth, "
                   "concentrated distributions. A higher likelihood is not a better estimate.")
    return out


def _ibu_legacy(rows) -> list[str]:
    out = ["This JSON predates the current format: one data set, best of 3 wall times, no accuracy against "
           "the truth (not measured), no CPU time. Rerun `make bench`.", ""]
    body = []
    for r in rows:
        m = r.get("mfl")
        body.append([r.get("mechanism"), r.get("k"), sec(g(r, "ours_newton", "seconds")),
                     sec(g(r, "ours_squarem", "seconds")),
                     sec(m.get("seconds")) if isinstance(m, dict) else "not run",
                     ratio(r.get("speedup_newton")), num(r.get("loglik_gain"))])
    out += table(["mech", "k", "ours, Newton finish (wall)", "ours, SQUAREM (wall)", "multi-freq-ldpy (wall)",
                  "speed-up (Newton)", "L(ours) - L(mfl), log-likelihood"], body)
    return out


def sec_planar(d) -> list[str]:
    rows = d.get("rows") or []
    body = []
    for r in rows:
        if r.get("error") and not r.get("cells"):
            body.append([r.get("side"), "-", "-", f"error: {r['error'][-80:]}", "-", "-", "-", "-"])
            continue
        wall = r.get("ibu_seconds_spread") or {"median": r.get("ibu_seconds"), "n": 1}
        cpu = r.get("ibu_cpu_seconds_spread") or {"median": r.get("ibu_cpu_seconds"), "n": 1}
        rss = r.get("peak_rss_gib_spread") or {"median": r.get("peak_rss_gib"), "n": 1}
        body.append([f"{r.get('side')} x {r.get('side')}", num(r.get("cells")), num(r.get("distinct_reports")),
                     spread_str(cpu), spread_str(wall), num(r.get("iterations")),
                     spread_str(rss, lambda v: f"{num(v)} GiB"), num(r.get("l1_to_truth"))])
    out = table(["grid", "cells", "distinct reports", "IBU CPU", "IBU wall", "EM evaluations", "peak RSS",
                 "L1 to truth"], body)
    workers = d.get("fft_workers") or g(rows, 0, "fft_workers") if rows and isinstance(rows[0], dict) else None
    out += ["", f"FFT threads: {workers if workers else 'not recorded (2 in older runs)'}. "
            "Stopping rule: seed 001's |L(t) - L(t-1)| < delta with delta = 1e-6 per report (L is a sum "
            "over the reports), SQUAREM: the loose stop, not the certified default (whose cost is in the section "
            "on the certified planar MLE). Peak memory is the process's `VmHWM`; each grid runs in a "
            "fresh process."]
    return out


def sec_gibu(d) -> list[str]:
    cpu = d.get("gibu_cpu")
    wall = d.get("gibu_wall") or {"median": d.get("gibu_seconds"), "n": 1}
    out = table(["mechanisms", "reports", "GIBU CPU", "GIBU wall", "EM evaluations", "converged",
                 "L1 to truth", "data generation", "peak RSS"],
                [[num(d.get("mechanisms")), num(d.get("reports")), spread_str(cpu) if cpu else "not measured",
                  spread_str(wall), num(d.get("iterations")), num(d.get("converged")), num(d.get("l1_to_truth")),
                  sec(d.get("data_seconds")), f"{num(d.get('peak_rss_gib'))} GiB"]])
    out += ["", "Half k-RR, half truncated geometric mechanisms, k = 100; counts drawn exactly in aggregate. "
            f"Scheme: {g(d, 'settings', 'acceleration') or '-'}, stopping rule "
            f"{g(d, 'settings', 'stopping') or '-'} with delta = {num(g(d, 'settings', 'delta'))}."]
    return out


def sec_oracles(d) -> list[str]:
    mechs = d.get("mechanisms") or {}
    if mechs and not any("client_cpu" in (v or {}) for row in mechs.values() for v in row.values()
                         if isinstance(v, dict)):
        return ["This JSON predates the current format (the other libraries were timed on fewer users than "
                "ours, pure-ldp's accuracy was measured on a subset of the users, OLH/BLH of the other "
                "libraries did not run); not rendered. Rerun `make bench`."]
    n, rounds = d.get("n"), d.get("rounds")
    out = [f"k = {d.get('k')}, eps = {d.get('eps')}, the same n = {num(n)} users for every library in each round "
           f"(round r draws its own users). CPU time, median (min - max) over {rounds} rounds; \"theirs / ours\" "
           "is the ratio of medians. Each library runs its own client and its own estimator on its own reports.",
           ""]
    body = []
    for name, row in mechs.items():
        for lib in ("localpriv", "multi-freq-ldpy", "pure-ldp"):
            e = row.get(lib) or {}
            if e.get("skipped"):
                body.append([name, lib, "not offered" if "offered" in e["skipped"] else e["skipped"], "", "", ""])
                continue
            if e.get("error") and not e.get("rounds"):
                body.append([name, lib, f"fails: {e['error'][:80]}", "", "", ""])
                continue
            rt = e.get("ratio_theirs_over_ours") or {}
            rep = e.get("reports") or {}
            rep_s = rep.get("type", "-")
            if rep.get("bytes_per_report"):
                rep_s += f", {num(rep['bytes_per_report'])} B"
            body.append([name, lib, spread_str(e.get("client_cpu")), spread_str(e.get("estimate_cpu")),
                         f"{ratio(rt.get('client_cpu'))} / {ratio(rt.get('estimate_cpu'))}" if rt else "-",
                         rep_s])
    out += table(["mech", "library", "client CPU (all n users)", "estimate CPU", "theirs / ours: client / estimate",
                  "reports"], body)
    out += ["", "Accuracy against the users' histogram: MSE (x 10^-6), median over the rounds. multi-freq-ldpy's "
            "estimator clips negatives and renormalises; pure-ldp's returns the unbiased inversion as is (shown "
            "raw and after the same clip-and-normalise, applied by the benchmark); localpriv's is shown raw, "
            "clip-normalised and as IBU on the support counts.", ""]
    acc_body = []
    for name, row in mechs.items():
        cells = {}
        for lib in ("localpriv", "multi-freq-ldpy", "pure-ldp"):
            for key, a in (g(row, lib, "accuracy") or {}).items():
                cells[f"{lib}: {key}"] = g(a, "mse", "median")
        acc_body.append([name] + [num(cells[c] * 1e6) if cells.get(c) is not None else "-" for c in ACC_COLS])
    out += table(["mech"] + [c.replace("(by the benchmark)", "(by us)") for c in ACC_COLS], acc_body)
    shim = d.get("shim")
    if shim:
        out += ["", f"OLH and BLH of both other libraries run through a shim: {shim.get('what')} (xxhash "
                f"{shim.get('xxhash')} refuses `str`), installed in "
                f"{', '.join(f'`{m}`' for m in shim.get('modules', []))}. "
                f"Cost per hash: {num(shim.get('shim_ns_per_hash'))} ns with the shim against "
                f"{num(shim.get('direct_ns_per_hash'))} ns for the bare call (their clients hash once per user, "
                "their estimators k times per report, so the shim adds to their times)."]
    return out


ACC_COLS = ["localpriv: raw", "localpriv: clip-normalized", "localpriv: IBU (support counts)",
            "multi-freq-ldpy: clip-normalized", "pure-ldp: raw", "pure-ldp: clip-normalized (by the benchmark)"]


def sec_memory(d) -> list[str]:
    sizes = d.get("sizes") or {}
    steps = []
    for row in sizes.values():
        for k, v in row.items():
            if isinstance(v, dict) and k not in steps:
                steps.append(k)
    body = []
    for step in steps:
        cells = [step]
        for row in sizes.values():
            v = row.get(step)
            cells.append("-" if not isinstance(v, dict) else
                         f"{num(v.get('peak_rss_mib'))} MiB / {sec(v.get('cpu_s'))} / {sec(v.get('wall_s'))}"
                         + ("" if v.get("exit", 0) == 0 else f" (exit {v.get('exit')})"))
        body.append(cells)
    out = table(["step"] + [f"n = 10^{round(math.log10(int(n)))}: peak RSS / CPU / wall" for n in sizes], body)
    out += ["", "Each step is its own process; peak RSS is that child's `ru_maxrss`, CPU its user + system time "
            "(both from `wait4`), wall and CPU include the interpreter's start-up. k-RR reports on 0..99, "
            "`--memory-limit 256MB`, one run per step. Parquet is summed by DuckDB's own scan and checked on the "
            "distinct (mechanism, report) pairs (an anomaly falls back to the row-checked reader, which names the "
            "rows); CSV goes through the row-checked reader (blank lines, ragged rows, encodings and the end line "
            "are checked there). The hand-written `GROUP BY` checks nothing: it is the floor, not a competitor."]
    return out


def sec_uncertainty(d) -> list[str]:
    body = []
    for spec, m in (d.get("mechanisms") or {}).items():
        s = m.get("summary") or {}
        body.append([spec, spread_str(s.get("point_cpu")), spread_str(s.get("interval_cpu")),
                     spread_str(s.get("ratio_cpu"), num), spread_str(s.get("point_wall")),
                     spread_str(s.get("interval_wall")), num(m.get("iterations"))])
    out = table(["mechanism", "point estimate CPU", "interval CPU", "ratio interval / point (CPU)",
                 "point wall", "interval wall", "EM evaluations"], body)
    out += ["", f"Adult ages on 0..99, n = {num(d.get('n'))}, eps = 1; {d.get('rounds')} interleaved rounds of the "
            "point estimate (IBU, certified Newton finish) and of the uncertainty from scratch (95 % intervals of "
            "every cell, the mean and the median). Median (min - max) over rounds. Budget: 10x."]
    return out


def sec_import_time(d) -> list[str]:
    cases = d.get("cases") or {}
    body = [[f"`{name}`", spread_str({"median": c.get("cpu_median_s"), "min": c.get("cpu_min_s"),
                                      "max": c.get("cpu_max_s"), "n": c.get("runs")}),
             sec(c.get("wall_median_s")), num(c.get("runs")), ", ".join(c.get("heavy_modules", [])) or "-"]
            for name, c in cases.items()]
    out = table(["case", "CPU median (min - max)", "wall median", "processes", "heavy modules loaded"], body)
    out += ["", f"CPU = user + system time of a fresh child process (`wait4`), interpreter start-up included; "
            f"BLAS pinned to one thread in the children. Budget: {num(d.get('budget_cpu_s'))} s of CPU; within: "
            + ", ".join(f"`{k}` {num(v)}" for k, v in (d.get("within_budget") or {}).items()) + "."]
    return out


def sec_spark(d) -> list[str]:
    out = []
    body = []
    for n, s in (d.get("sizes") or {}).items():
        for meth, v in (s.get("methods") or {}).items():
            body.append([f"10^{round(math.log10(int(n)))}", meth, sec(v.get("median_cpu_s")),
                         sec(v.get("median_wall_s")),
                         f"{num(v.get('median_peak_rss_mib'))} MiB", sec(v.get("median_count_s")),
                         num(len(v.get("rounds") or []))])
    out += table(["reports", "method", "CPU (median)", "wall (median)", "peak RSS", "counting step", "rounds"], body)
    for n, s in (d.get("sizes") or {}).items():
        rs = [f"{k[len('ratio_'):].replace('_', ' ')} {num(v)}" for k, v in s.items() if k.startswith("ratio_")]
        loads = s.get("load_before_rounds") or []
        if rs or loads:
            out += ["", f"10^{round(math.log10(int(n)))} reports: ratios of medians: {'; '.join(rs) or '-'}. "
                    f"Load average before each round: {'; '.join(load_str(x) for x in loads) or 'not recorded'}."]
    em = d.get("em")
    if isinstance(em, dict):
        out += ["", f"EM over Spark partitions ({em.get('mechanism')}, n = {num(em.get('n'))}): median wall "
                f"{sec(em.get('median_wall_s'))}, CPU {sec(em.get('median_cpu_s'))}, "
                f"{num(em.get('median_seconds_per_pass'))} "
                f"s per pass over the data, peak RSS {num(em.get('median_peak_rss_mib'))} MiB, "
                f"{num(len(em.get('rounds') or []))} rounds."]
    if d.get("method"):
        out += ["", f"Method (from the JSON): {d['method'].rstrip(':').rstrip()}."]
    return out


def sec_em(d) -> list[str]:
    out = []
    ib = g(d, "em_overhead", "ibu_k100") or {}
    if ib:
        body = []
        for path in ("numpy", "compiled"):
            p = ib.get(path) or {}
            body.append([path, f"{num(p.get('plain_us_per_evaluation'))} us"]
                        + [f"{sec(g(p, s, 'seconds'))} / {num(g(p, s, 'iterations'))}"
                           for s in ("none", "squarem", "newton")])
        stat = ib.get("statistic") or "best of 3 wall times, one process"
        out += [f"EM at k = {ib.get('k')}, n = {num(ib.get('n'))} (k-RR counts), {stat}:", ""]
        out += table(["engine", "plain EM, per evaluation", "plain to 1e-12: s / evaluations", "SQUAREM",
                      "Newton finish"],
                     body)
        if isinstance(ib.get("mfl"), dict):
            out += ["", f"multi-freq-ldpy's jitted IBU on the same counts: {sec(ib['mfl'].get('seconds'))}; ours "
                    f"(compiled) faster by {ratio(ib.get('vs_mfl_none'))} (plain), {ratio(ib.get('vs_mfl_squarem'))} "
                    f"(SQUAREM), {ratio(ib.get('vs_mfl_newton'))} (Newton finish). Same iterates NumPy vs compiled: "
                    f"{num(ib.get('same_iterates'))}."]
    jit = g(d, "em_overhead", "jit") or {}
    if jit:
        out += ["", "JIT cost in a fresh process (CPU): imports only " + sec(g(jit, "imports_only", "cpu_seconds"))
                + ", compile " + sec(g(jit, "compile", "cpu_seconds")) + ", from the cache "
                + sec(g(jit, "cached", "cpu_seconds")) + "."]
    gb = g(d, "em_overhead", "gibu_1000") or {}
    if gb:
        out += ["", f"GIBU, {num(gb.get('mechanisms'))} mechanisms, k = {gb.get('k')}: "
                f"{num(gb.get('batched_ms_per_evaluation'))} ms per EM evaluation batched by family against "
                f"{num(gb.get('per_block_ms_per_evaluation'))} ms with one block per mechanism "
                f"({ratio(gb.get('speedup'))}); iterates equal to {num(gb.get('max_rel_diff_after_25'))} relative."]
    pl = d.get("planar") or {}
    if pl:
        med = pl.get("median") or {}
        def cell(mode, key):
            lo_hi = g(pl, "range", mode, key)
            runs = [r.get(key) for r in g(pl, "runs", mode, default=[]) if isinstance(r, dict) and r.get(key)]
            if not lo_hi and runs:
                lo_hi = [min(runs), max(runs)]
            if not lo_hi:
                return sec(g(med, mode, key))
            return spread_str({"median": g(med, mode, key), "min": lo_hi[0], "max": lo_hi[1], "n": pl.get("rounds")})
        body = [[mode, cell(mode, "cpu_seconds"), cell(mode, "wall_seconds"),
                 num(g(med, mode, "fft_pairs_per_evaluation")), f"{num(g(med, mode, 'peak_rss_gib'))} GiB"]
                for mode in ("old", "new")]
        out += ["", f"Planar {pl.get('side')} x {pl.get('side')}, block before the real-FFT one (`old`) "
                f"against the real-FFT block (`new`), one FFT thread each, {pl.get('rounds')} interleaved rounds, "
                "each a fresh process, median (min - max):", ""]
        out += table(["block", "CPU", "wall", "FFT pairs per evaluation", "peak RSS"], body)
        out += ["", f"Ratio new / old: CPU {num(pl.get('ratio_cpu_new_to_old'))}, wall "
                f"{num(pl.get('ratio_wall_new_to_old'))}; largest relative difference of the log-likelihoods "
                f"{num(pl.get('max_rel_loglik_difference'))}."]
    return out


def sec_service(d) -> list[str]:
    body = []
    for b, s in (d.get("summary") or {}).items():
        rng = s.get("range_ingest_rate_before_kill") or [None, None]
        body.append([b, num(s.get("rounds")), f"{num(s.get('median_ingest_rate_before_kill_reports_per_s'))} "
                     f"({num(rng[0])} - {num(rng[1])})", num(s.get("median_ingest_rate_overall_reports_per_s")),
                     f"{num(s.get('median_p50_ms_outside_restart'))} / {num(s.get('median_p99_ms_outside_restart'))}",
                     sec(s.get("median_restart_downtime_s")), num(s.get("lost_reports_total")),
                     num(s.get("double_counted_reports_total"))])
    out = table(["backend", "rounds", "ingest reports/s before the kill, median (range)", "overall reports/s",
                 "latency p50 / p99 ms (outside restart)", "restart downtime", "lost", "double counted"], body)
    runs = d.get("runs") or {}
    loads = [r.get("load_average_1_5_15") for rs in runs.values() for r in rs if r.get("load_average_1_5_15")]
    if loads:
        out += ["", f"Load average after each round: {'; '.join(load_str(x) for x in loads)}. The server is "
                "killed with SIGKILL half-way through each round and restarted; clients retry."]
    return out


def sec_java_client(d) -> list[str]:
    """The Java client's reports per CPU second on one core, per mechanism and word source."""
    runs = d.get("runs") or {}
    sources = [s for s in ("secure", "secure-unbuffered", "chacha") if isinstance(runs.get(s), dict)]
    rows: dict = {}
    for source in sources:
        for m in runs[source].get("mechanisms") or []:
            row = rows.setdefault(m.get("spec"), {"bytes": m.get("bytes_per_report"),
                                                  "words": m.get("words_per_report")})
            row[source] = spread_str(dict(m.get("reports_per_cpu_second") or {}, n=2), num)
    body = [[f"`{spec}`", *[r.get(s, "-") for s in sources], num(r.get("bytes")), num(r.get("words"))]
            for spec, r in rows.items()]
    out = table(["mechanism (k = 100)", *[f"reports / CPU s, {s}" for s in sources], "bytes / report",
                 "words / report"], body)
    java = g(runs, sources[0], "java_version") if sources else None
    return out + ["", f"One thread pinned to one core; n = {num(d.get('n'))} reports per mechanism per round after "
                  f"{num(d.get('warmup'))} warm-up reports; Java {java or 'version not recorded'}. `secure`: "
                  "`SecureRandomSource` (256 words per `nextBytes`); `secure-unbuffered`: one `nextInt()` per word; "
                  "`chacha`: the test-only ChaCha20 stream. Bytes: the report's JSON text as posted."]


CLIENT_TITLES = {"python-portable": "Python portable", "python-vectorized": "Python vectorized",
                 "javascript": "JavaScript", "java": "Java"}
DOCS_CLIENTS = HERE.parent / "docs" / "clients.md"
DOCS_BEGIN = "<!-- clients-all:begin (generated by benchmarks/report.py from benchmarks/results-clients-all.json) -->"
DOCS_END = "<!-- clients-all:end -->"


def sec_clients_all(d) -> list[str]:
    """Reports per CPU second of every client, per mechanism, ratios against both Python clients."""
    clients = [c for c in d.get("clients") or CLIENT_TITLES if c in CLIENT_TITLES]
    body = []
    for m in d.get("mechanisms") or []:
        cells = []
        for c in clients:
            e = g(m, "clients", c) or {}
            cells.append(num(g(e, "reports_per_cpu_s", "median")) if isinstance(e.get("reports_per_cpu_s"), dict)
                         else str(e.get("skipped") or "-"))
        body.append([f"`{m.get('canonical') or m.get('spec')}`", *cells,
                     *[ratio(g(m, "vs_python_portable", c)) for c in clients if c != "python-portable"],
                     *[ratio(g(m, "vs_python_vectorized", c)) for c in clients if c not in ("python-portable",
                                                                                       "python-vectorized")],
                     num(m.get("bytes_per_report"))])
    header = ["mechanism", *[f"{CLIENT_TITLES[c]} reports / CPU s" for c in clients],
              *[f"{CLIENT_TITLES[c]} / Python portable" for c in clients if c != "python-portable"],
              *[f"{CLIENT_TITLES[c]} / Python vectorized" for c in clients
                if c not in ("python-portable", "python-vectorized")],
              "bytes / report"]
    v = d.get("versions") or {}
    facts = (f"Medians over {num(d.get('rounds'))} interleaved round(s); each client a child process pinned with "
             f"`{d.get('pinned') or 'no pinning'}`; n = {num(d.get('n'))} reports per mechanism per round "
             f"(vectorized: {num(d.get('n_vectorized'))}); Python {v.get('python') or '-'}, "
             f"Node {v.get('node') or '-'}, "
             f"{v.get('java') or 'Java -'}; load average before {load_str(d.get('load_before'))}, after "
             f"{load_str(d.get('load_after'))}. Reports per CPU second are of each client's own CPU clock around its "
             "sampling loop; ratios are of the medians (above 1: faster than the reference). Bytes: the report's "
             "JSON text as posted, from the Python portable client.")
    if d.get("quick"):
        facts += " **Quick smoke run: the numbers only show that the benchmark runs.**"
    return table(header, body) + ["", facts]


def clients_docs_block(directory: Path = HERE) -> str:
    """The generated table of docs/clients.md (between its markers) from ``results-clients-all.json``."""
    d = _read(Path(directory) / OWN_FILES["clients_all"])
    if not isinstance(d, dict):
        body = ["Not measured: run `make bench-clients-all`."]
    else:
        m = d.get("machine") or {}
        body = [f"_Source: `benchmarks/results-clients-all.json`, run {_date(d) or 'date not recorded'} on "
                f"{m.get('cpu') or 'CPU not recorded'}._", "", *sec_clients_all(d)]
    return "\n".join([DOCS_BEGIN, *body, DOCS_END])


def splice_clients_docs(text: str, block: str) -> str:
    """``text`` (docs/clients.md) with the part between the markers replaced by ``block``."""
    head, sep, rest = text.partition(DOCS_BEGIN)
    if not sep or DOCS_END not in rest:
        raise SystemExit(f"error: {DOCS_CLIENTS} has no {DOCS_BEGIN!r} ... {DOCS_END!r} markers")
    return head + block + rest.split(DOCS_END, 1)[1]


def sec_service_mixed(d) -> list[str]:
    r = d["result"]
    m, w, f = r["mixed"], r["ingest_only"], r["floor"]
    kills = f"{num(m.get('kills_done', r['kills']))} of {num(r['kills'])}"
    out = []
    if d.get("smoke"):
        out += ["**Smoke run** (short, few clients, on a loaded machine): it checks the script; the full "
                "run is `make bench-service-mixed` on a quiet machine.", ""]
    out += table(["clients", "analysts", "seconds", "SIGKILLs done", "ingest reports/s (mixed)",
                  "ingest p50 / p99 ms (outside restarts)", "estimate p50 / p99 ms", "peak RSS MiB (server tree)",
                  "lost", "double counted"],
                 [[num(r["clients"]), num(r["analysts"]), num(r["seconds"]), kills,
                   num(m["ingest_reports_per_s"]),
                   f"{num(m['ingest_latency_ms_outside_restarts']['p50'])} / "
                   f"{num(m['ingest_latency_ms_outside_restarts']['p99'])}",
                   f"{num(m['estimate_latency_ms']['p50'])} / {num(m['estimate_latency_ms']['p99'])}",
                   num(m["peak_server_tree_rss_mib"]), num(r["lost_reports"]), num(r["double_counted_reports"])]])
    out += ["", *table(["server CPU us/report (ingest only)", "floor: upsert us/report",
                        "floor: decode + count + upsert us/report", "server / floor"],
                       [[num(w["server_cpu_us_per_report"]), num(f["floor_upsert_cpu_us_per_report"]),
                         num(f["floor_decode_count_upsert_cpu_us_per_report"]),
                         f"{ratio(r['ratio_server_to_floor_upsert'])} "
                         f"({ratio(r['ratio_server_to_floor_decode_count_upsert'])} against the decoding floor)"]])]
    return out

def sec_service_profile(d) -> list[str]:
    runs = d["runs"]
    keys = ["read_json_ms", "decode_batch_ms", "count_digest_and_rest_ms", "store_ingest_ms", "collector_ingest_ms",
            "server_bare_request_ms", "http_rest_ms", "server_batch_ms", "floor_upsert_ms",
            "floor_decode_count_upsert_ms"]
    body = [[label, num(run["reports_per_batch"])] + [num(run["ms_per_batch"].get(k)) for k in keys]
            + [ratio(run["ms_per_batch"].get("ratio_server_to_floor"))] for label, run in runs.items()]
    return table(["run", "reports/batch", "read JSON", "decode", "count, digest, rest", "SQLite txn",
                  "collector in process", "HTTP bare request", "HTTP rest", "server per batch", "floor",
                  "floor with decoding", "server / floor"], body) + ["", "CPU milliseconds per batch (decision 0065)."]


def sec_service_interleaved(d) -> list[str]:
    keys = ["before_ms", "after_ms", "floor_ms"]
    body = [[label, str(run.get("commit")), num(run["reports_per_batch"]), num(run.get("batches"))]
            + [num(run["ms_per_batch"].get(k)) for k in keys]
            + [ratio(run["ms_per_batch"].get(k)) for k in ("ratio_before_to_floor", "ratio_after_to_floor")]
            for label, run in d["runs"].items()]
    return table(["run", "before (commit)", "reports/batch", "batches", "server before", "server after", "floor",
                  "before / floor", "after / floor"], body) + [
        "", "CPU milliseconds per batch, the two servers and the floor interleaved in one run (decision 0075)."]


def sec_service_bodies(d) -> list[str]:
    keys = ["before_ms", "json_ms", "binary_ms", "binary_h11_ms", "floor_ms"]
    body = [[label, str(run.get("commit")), num(run["reports_per_batch"]), num(run.get("batches"))]
            + [num(run["ms_per_batch"].get(k)) for k in keys]
            + [ratio(run["ms_per_batch"].get(k)) for k in ("ratio_before_to_floor", "ratio_json_to_floor",
                                                           "ratio_binary_to_floor")]
            for label, run in d["runs"].items()]
    return table(["run", "before (commit)", "reports/batch", "batches", "before (JSON, h11)", "JSON",
                  "binary (client default)", "binary, h11", "floor", "before / floor", "JSON / floor",
                  "binary / floor"], body) + [
        "", "CPU milliseconds per batch, four servers and the floor interleaved in one run (decision 0082)."]


def sec_large_domains(d) -> list[str]:
    body = []
    for name, c in (d.get("cells") or {}).items():
        body.append([name, num(c.get("k")), num(c.get("n")), num(c.get("mse_ours_unbiased")),
                     num(c.get("mse_pure_ldp")),
                     num(g(c, "ibu_round0", "mse_ibu")), ratio(c.get("client_speedup_cpu")),
                     ratio(c.get("client_speedup_wall"))])
    out = table(["mechanism", "k", "n", "MSE ours (unbiased)", "MSE pure-ldp", "MSE ours IBU (round 0)",
                 "client speed-up CPU", "client speed-up wall"], body)
    out += ["", f"{d.get('data', '')}; {d.get('rounds')} rounds, {d.get('statistic', '')}."]
    hr = d.get("hr_at_2_20")
    if isinstance(hr, dict):
        out += ["", f"Hadamard response at k = {num(hr.get('k'))}, n = {num(hr.get('n'))}: client "
                f"{sec(hr.get('client_cpu_s'))} CPU, one forward product {sec(hr.get('forward_cpu_s'))}, unbiased "
                f"estimate {sec(hr.get('unbiased_cpu_s'))} (one run)."]
    return out


def sec_heavy_hitters(d) -> list[str]:
    body = []
    for eps, s in (d.get("summary") or {}).items():
        for name, v in s.items():
            if not isinstance(v, dict):
                continue
            body.append([eps, name, num(v.get("precision")), num(v.get("recall")), sec(v.get("client_cpu")),
                         sec(v.get("collector_cpu")), num(v.get("interval_coverage_mean"))])
    out = table(["eps", "method", "precision", "recall", "client CPU", "collector CPU", "interval coverage"], body)
    out += ["", f"{g(d, 'data', 'users')} users, {g(d, 'data', 'distinct')} distinct ids, top-{g(d, 'protocol', 'k')}; "
            f"{d.get('rounds')} rounds, {d.get('statistic', '')}."]
    return out


def sec_rappor_accuracy(d) -> list[str]:
    """``benchmarks/rappor.py --accuracy-only``: accuracy per arm, and the paired comparisons with
    their sign tests (no timing in this file)."""
    out = []
    if d.get("complete") is False:
        out += [f"**Incomplete run**: {d.get('rounds')} of {d.get('rounds_requested')} rounds "
                f"({d.get('stopped') or 'interrupted'}).", ""]
    body, pairs = [], []
    for fkey, c in d["cells"].items():
        for arm, a in c["accuracy"].items():
            body.append([fkey, arm, spread_str(a["mse"], num), num(a["precision_at_10"]["mean"]),
                         num(a["precision_at_50"]["mean"])])
        for p in c["paired"]:
            pairs.append([fkey, p["arm"], p["against"]]
                         + [f"{p[k]['better']} / {p[k]['equal']} / {p[k]['worse']} (p = {num(p[k]['sign_test_p'], 2)})"
                            for k in ("mse", "precision_at_10", "precision_at_50")])
    out += table(["f", "arm", "MSE, median (min - max)", "precision at 10, mean", "precision at 50, mean"], body)
    out += ["", "Paired by round (same seed, same values): rounds where the arm is better / equal / worse than "
            "the other (lower MSE, higher precision), and the two-sided sign test on the untied rounds.", ""]
    out += table(["f", "arm", "against", "MSE", "top 10", "top 50"], pairs)
    out += ["", f"{d.get('data', '')}; n = {num(d.get('n'))}, m = {d.get('m')}, h = {d.get('h')}, "
            f"{d.get('cohorts')} cohorts, PRR only; seeds {d.get('seeds')}. Timing: {d.get('timing', 'not recorded')}."]
    return out


def _pipes(text) -> str:
    """A stopping rule inside a table cell (its ``|`` escaped)."""
    return str(text).replace("|", "\\|")


def sec_planar_certified(d) -> list[str]:
    runs = d.get("runs") or {}
    body = []
    for name in ("loose", "certified"):
        r = runs.get(name) or {}
        st = r.get("settings") or {}
        body.append([name, sec(r.get("cpu_seconds")), num(r.get("iterations")), num(r.get("products")),
                     num(r.get("converged")), num(st.get("gap_reached")),
                     f"{_pipes(st.get('stopping', '-'))} (delta {num(st.get('delta'))}), "
                     f"{st.get('acceleration', '-')}"])
    out = [f"Grid {d.get('side')} x {d.get('side')} ({num(d.get('distinct_reports'))} distinct reports), "
           f"n = {num(d.get('n'))}; both through `localpriv.estimate(obs, \"ibu\", ...)`, set-up included.", ""]
    out += table(["run", "CPU", "EM evaluations", "Newton products", "converged", "certificate (per report)",
                  "stopping rule, acceleration"], body)
    out += ["", f"CPU certified / loose: {num(d.get('cpu_ratio_certified_to_loose'))}; the loose stop is within "
            f"{num(d.get('loose_within_per_report'))} per report of the maximum (the certified run's certificate "
            "plus the difference of log-likelihoods)."]
    return out


def sec_cost_curves(d) -> list[str]:
    rows = [r for r in d.get("curves") or [] if "cpu_seconds" in r]
    body = [[r.get("axis"), num(r.get("x")), r.get("method"), sec(r.get("cpu_seconds")), num(r.get("iterations")),
             _pipes(r.get("stopping")) + (f" (delta {num(r.get('delta'))}, {r.get('acceleration')})"
                                      if r.get("delta") is not None else ""),
             num(r.get("converged"))] for r in rows]
    refused = sum("refused" in r for r in d.get("curves") or [])
    out = table(["axis", "value", "estimator", "CPU (public call)", "EM evaluations", "stopping rule", "converged"],
                body)
    out += ["", f"Axes: reports = distinct k-RR reports (k), mechanisms = free-will collection size, n = users "
            f"(counts drawn directly). {refused} (point, estimator) pairs refused the input (recorded with their "
            "one-line refusal in the JSON)."]
    return out


def acceptance(src: dict) -> list[str]:
    """The EM engine's and clients' measurable targets, each read from the section that measures it."""
    rows = []
    em = g(src, "em", "data") or {}
    gb = g(em, "em_overhead", "gibu_1000") or {}
    if gb.get("batched_ms_per_evaluation") is not None:
        v = gb["batched_ms_per_evaluation"]
        rows.append([f"1. GIBU, {num(gb.get('mechanisms'))} mechanisms (target at 1000): <= 5 ms per EM evaluation",
                     f"{num(v)} ms "
                     f"({num(gb.get('per_block_ms_per_evaluation'))} ms one block per mechanism)", num(v <= 5)])
    ibu_rows = g(src, "ibu", "data", "rows") or []
    for r in ibu_rows:
        if not isinstance(r, dict) or r.get("k") != 100 or not isinstance(r.get("contenders"), dict):
            continue
        nt = g(r, "contenders", "ours_newton", "vs_mfl", "speedup_cpu")
        if nt is not None:
            rows.append([f"2. IBU at k = 100 ({r.get('mechanism')}) >= 5x multi-freq-ldpy end to end (CPU, median)",
                         f"{ratio(nt)} (Newton finish; SQUAREM "
                         f"{ratio(g(r, 'contenders', 'ours_squarem', 'vs_mfl', 'speedup_cpu'))})", num(nt >= 5)])
    pl = em.get("planar") or {}
    if pl.get("ratio_cpu_new_to_old") is not None:
        v, pairs = pl["ratio_cpu_new_to_old"], g(pl, "median", "new", "fft_pairs_per_evaluation")
        # every evaluation makes one forward and one backward product; the run adds one forward
        # product for its starting point: 2 + 1 / evaluations is two pairs per evaluation
        evals = [r.get("iterations") for r in (g(pl, "runs", "new") or []) if isinstance(r, dict)]
        start = 1.0 / min(evals) if evals and all(evals) else 0.0
        extra = (" (2 per evaluation and one for the starting point)"
                 if pairs is not None and 2.0 < pairs <= 2.0 + start + 1e-12 else "")
        rows.append([f"3. Planar {pl.get('side')} x {pl.get('side')}: half the CPU time, 2 FFT pairs per evaluation",
                     f"CPU new / old {num(v)}, {num(pairs)} FFT pairs per evaluation{extra}",
                     num(v <= 0.5 and pairs is not None and pairs <= 2.0 + start + 1e-12)])
    crow = g(src, "clients", "data", "rows") or []
    ratios = {}
    for r in crow:
        if not isinstance(r, dict):
            continue
        v = g(r, "ratios", "multi-freq-ldpy", "cpu")
        if v is None:
            v = r.get("ratio_vs_mfl")
        if v is not None:
            ratios[r.get("mechanism")] = v
    if ratios:
        worst = min(ratios, key=ratios.get)
        missing = [r.get("mechanism") for r in crow if isinstance(r, dict) and r.get("mechanism") not in ratios]
        ns = {g(r, side, "n") for r in crow if isinstance(r, dict) for side in ("ours", "multi-freq-ldpy")} - {None}
        met = num(min(ratios.values()) >= 10 and not missing)
        if len(ns) > 1:
            met = "not comparable (libraries timed at different n)"
        rows.append(["4. Clients >= 10x multi-freq-ldpy, every mechanism",
                     ", ".join(f"{m} {ratio(v)}" for m, v in ratios.items()) + f" (lowest: {worst})"
                     + (f"; no ratio for {', '.join(missing)}" if missing else ""), met])
    kf = g(src, "clients", "data", "krr_floor_ratio", "vs_raw64_words", "cpu", "median")
    if kf is not None:
        rows.append(["4. k-RR client within 2x of the random-number floor (one 64-bit word per user)",
                     f"{num(kf)}x the floor's CPU time (median of per-round ratios)", num(kf <= 2)])
    pk = g(src, "clients", "data", "krr_peak_memory") or {}
    if pk.get("extra_minus_output_bytes") is not None:
        rows.append([f"4. Clients chunked: peak memory bounded by the chunk (k-RR, n = {num(pk.get('n'))})",
                     f"peak above input and output: {num(pk['extra_minus_output_bytes'] / 2**20)} MiB "
                     f"(output {num(pk.get('output_bytes', 0) / 2**20)} MiB)", "see value"])
    labels = {"1.": "1. GIBU, 1000 mechanisms: <= 5 ms per EM evaluation (`make bench-em`)",
              "2.": "2. IBU at k = 100 >= 5x multi-freq-ldpy end to end (`make bench`, current format)",
              "3.": "3. Planar 1000 x 1000: half the CPU time, 2 FFT pairs per evaluation (`make bench-em`)",
              "4.": "4. Clients >= 10x multi-freq-ldpy, every mechanism (`make bench`)"}
    have = {r[0][:2] for r in rows}
    rows += [[label, "not measured", "-"] for key, label in labels.items() if key not in have]
    rows.sort(key=lambda r: r[0][:2])  # stable: a target's lines stay in the order above
    out = ["Each line is read from the section below that measures it (its file, date and load are given "
           "there); a target is only as trustworthy as that run.", ""]
    return out + table(["target", "measured", "met"], rows)


SECTIONS = [
    ("clients", "Client throughput against multi-freq-ldpy and pure-ldp", sec_clients),
    ("ibu", "IBU on counts against multi-freq-ldpy, same tolerance", sec_ibu),
    ("oracles", "Frequency oracles end to end, the same users for every library", sec_oracles),
    ("em", "EM engine: per-evaluation cost, batched GIBU, planar FFT block (`make bench-em`)", sec_em),
    ("planar", "Planar IBU on 10^4 - 10^6 cells", sec_planar),
    ("gibu", "GIBU: 10^3 mechanisms, 10^8 aggregated reports", sec_gibu),
    ("memory", "Peak memory of the data path", sec_memory),
    ("uncertainty", "Cost of a 95 % interval", sec_uncertainty),
    ("import_time", "Start-up cost", sec_import_time),
    ("spark", "DuckDB path, hand-written SQL and Spark", sec_spark),
    ("service", "Collector service load test", sec_service),
    ("service_mixed", "Collector under mixed load, against a one-process SQLite floor", sec_service_mixed),
    ("service_profile", "Collector ingest: CPU per batch of each step", sec_service_profile),
    ("service_interleaved", "Collector ingest: before and after against the floor, interleaved",
     sec_service_interleaved),
    ("service_bodies", "Collector ingest: JSON and binary bodies against the floor, interleaved",
     sec_service_bodies),
    ("large_domains", "Large domains: Hadamard response and count-mean sketches", sec_large_domains),
    ("heavy_hitters", "Heavy hitters on Gowalla place ids", sec_heavy_hitters),
    ("rappor_accuracy", "RAPPOR accuracy against pure-LDP's RAPPOR, no timing", sec_rappor_accuracy),
    ("java_client", "Java client throughput on one core (`make bench-java-client`)", sec_java_client),
    ("clients_all", "Every client side by side on one core (`make bench-clients-all`)", sec_clients_all),
    ("planar_certified", "The certified planar MLE against the loose stop (`make bench-planar-certified`)",
     sec_planar_certified),
    ("cost_curves", "Cost curves through `localpriv.estimate` (`make bench-cost`)", sec_cost_curves),
]


def _rounds_of(d) -> int | None:
    r = d.get("rounds") if isinstance(d, dict) else None
    return r if isinstance(r, int) else None


def render(directory: Path = HERE) -> str:
    """RESULTS.md's text from the JSON files in ``directory``."""
    src = sources(Path(directory))
    lines = ["# Benchmark results", "",
             "<!-- generated by benchmarks/report.py from the JSON files in benchmarks/: do not edit; "
             "run `make bench-report` -->", "",
             "Every number below is read from a JSON file in `benchmarks/` written by the benchmark named in its "
             "section; `make bench` reruns `benchmarks/run_all.py` and renders this file, `make bench-report` only "
             "renders it. Each section names its file, date, machine and load average: compare numbers within a "
             "section (same run, same machine), not across sections. Benchmarks are meant to run on a quiet "
             "machine (nothing else running); a load average well above 0 means the times are inflated. "
             "Ratios are of medians over interleaved rounds where the section says so, CPU time is "
             "`process_time` (user + system) unless stated.", ""]
    if src.get("_broken_main"):
        lines += ["`benchmarks/results.json` is not valid JSON: its sections are not rendered.", ""]
    lines += ["## Targets, from the sections below", ""] + acceptance(src) + [""]
    machines = {}
    for name, title, fn in SECTIONS:
        lines += [f"## {title}", ""]
        s = src.get(name)
        if s is None:
            lines += [NOT_MEASURED.format(target=TARGETS[name]), ""]
            continue
        if "broken" in s:
            lines += [f"Not rendered: `benchmarks/{s['broken']}` is not valid JSON.", ""]
            continue
        d = s["data"]
        lines += [meta(s, rounds=_rounds_of(d), load_before=g(d, "load_before") or g(d, "machine", "load")
                       or g(d, "load_average") or g(d, "load_average_1_5_15"),
                       load_after=g(d, "load_after")), ""]
        if isinstance(d, dict) and d.get("error") and len(d) <= 3:
            lines += [f"The run failed: `{str(d['error']).strip().splitlines()[-1][:200]}`", ""]
            continue
        try:
            body = fn(d)
        except Exception as exc:  # an unexpected shape is reported, not guessed at
            body = [f"Not rendered: `{s['file']}` has an unexpected shape for this section "
                    f"({type(exc).__name__}: {str(exc)[:100]})."]
        lines += body + [""]
        if s.get("machine"):
            machines[versions(s["machine"])] = True
    known = {"results.json"} | {f"results-{n}.json" for n in RUN_ALL} | set(OWN_FILES.values())
    others = sorted(p.name for p in Path(directory).glob("results-*.json")
                    if p.name not in known and not p.name.endswith("-quick.json"))
    if others:
        lines += ["## Other benchmark files", "",
                  "Present in `benchmarks/` but without a section in this report (see the benchmark that writes "
                  "each): " + ", ".join(f"`{o}`" for o in others) + ".", ""]
    lines += ["## Software", ""]
    vs = [v for v in machines if v]
    lines += ([f"- {v}" for v in vs] if vs else ["Not recorded."]) + [""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    directory, out = HERE, HERE / "RESULTS.md"
    if "--dir" in args:
        directory = Path(args[args.index("--dir") + 1])
    if "--out" in args:
        out = Path(args[args.index("--out") + 1])
    text = render(directory)
    if "--check" in args:
        same = out.exists() and out.read_text() == text
        if directory == HERE and DOCS_CLIENTS.exists():
            same = same and DOCS_CLIENTS.read_text() == splice_clients_docs(DOCS_CLIENTS.read_text(),
                                                                           clients_docs_block(directory))
        print(f"{out}: {'up to date' if same else 'differs from the rendering of the JSON'}")
        return 0 if same else 1
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    if directory == HERE and DOCS_CLIENTS.exists():  # the generated table of docs/clients.md
        docs = splice_clients_docs(DOCS_CLIENTS.read_text(), clients_docs_block(directory))
        tmp = DOCS_CLIENTS.with_suffix(".md.tmp")
        tmp.write_text(docs)
        tmp.replace(DOCS_CLIENTS)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
