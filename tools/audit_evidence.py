"""Audits of the portable clients for docs/audit.md (``make audit``; correctness only, no timings).

Writes docs/results/audit.json (atomically) and rewrites the generated tables of docs/audit.md and
decisions 0059-0060 and 0071 between the markers ``<!-- audit-evidence:NAME -->`` and ``<!-- /audit-evidence -->``
(``--docs-only`` re-renders them from the committed JSON; ``--broken-only`` reruns section 3 into
it; ``--quick`` is a smoke run: the Python client only, few trials, nothing written).

1. **power**: for every portable mechanism at a small and a large level, the default pair, the
   claimed level, the probability ``p1`` of the claimed channel's most informative event and the
   smallest excess over the claimed level detected with 80% power at 1,000, 10,000 and 100,000
   trials per value (:func:`localpriv.analysis.audit.detectable_excess`); no client runs.
2. **clients**: every portable mechanism audited through each client's command -- the Python
   ``localpriv client`` always, the JavaScript ``clients/js/bin/localpriv-client.js`` when it and
   ``node`` are present, the Java ``org.localpriv.client.Main`` when ``clients/java/build`` holds
   it (``make java-client``) -- with :data:`TRIALS` reports per value; memoized mechanisms in device
   mode, :data:`DEVICES` devices per value simulated in one run of each client's command
   (``--reports-per-device``: each input line a new device with its own memo), one report each.
   **memo**: the memoized mechanisms again, :data:`MEMO_ROUNDS` reports per device, against the
   memo's bound (the claimed level of repeated reports).
3. **broken**: the deliberately broken clients of ``tests/audit_clients.py`` (a biased k-RR coin,
   Piecewise computed in floating point, longitudinal reports without their permanent memo), and
   the correct L-GRR client in the same device mode as the last (its control).
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import shutil
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from audit_clients import run_variant  # noqa: E402

from localpriv.analysis.audit import (  # noqa: E402
    audit,
    channel_event_probability,
    command_runner,
    default_pair,
    detectable_excess,
    runner_of,
    simulates_devices,
)
from localpriv.data.formats import atomic_output  # noqa: E402
from localpriv.mechanisms.portable import PORTABLE_MEMOIZED, SystemSource, parse_portable  # noqa: E402
from localpriv.utils.validation import LocalPrivError  # noqa: E402

OUT = ROOT / "docs" / "results" / "audit.json"
DOCS = (ROOT / "docs" / "audit.md", ROOT / "docs" / "decisions" / "0059-black-box-audit-events.md",
        ROOT / "docs" / "decisions" / "0060-audit-devices-and-claimed-rounds.md",
        ROOT / "docs" / "decisions" / "0071-simulated-devices-in-one-client-run.md")
TRIALS = 10_000
#: devices per value of memoized mechanisms (simulated in one run of each client's command)
DEVICES = 1_000
#: reports per device of the memo section
MEMO_ROUNDS = 8
ROUNDS = 32
BROKEN_DEVICES = 400
CONFIDENCE = 0.95
POWER_TRIALS = (1_000, 10_000, 100_000)
SPECS = [
    "krr(k=4,eps=0.5)", "krr(k=4,eps=4.0)", "oue(k=3,eps=0.5)", "oue(k=3,eps=4.0)", "sue(k=3,eps=0.5)",
    "sue(k=3,eps=4.0)", "olh(k=4,eps=0.5,n_seeds=4)", "olh(k=4,eps=4.0,n_seeds=4)", "blh(k=4,eps=0.5,n_seeds=4)",
    "blh(k=4,eps=4.0,n_seeds=4)", "ss(k=4,eps=0.5)", "ss(k=4,eps=4.0)", "hr(k=4,eps=0.5)", "hr(k=4,eps=4.0)",
    "geometric(k=4,eps=0.5,lo=-2,hi=5)", "geometric(k=4,eps=4.0,lo=-2,hi=5)", "duchi(k=4,eps=0.5)",
    "duchi(k=4,eps=4.0)", "pm(k=3,eps=0.5)", "pm(k=3,eps=4.0)", "sw(k=4,eps=0.5)", "sw(k=4,eps=4.0)",
    "planar-geometric(eps=0.5,nrows=2,ncols=2)", "planar-geometric(eps=4.0,nrows=2,ncols=2)",
    "planar-laplace(eps=0.5,nrows=2,ncols=2)", "planar-laplace(eps=4.0,nrows=2,ncols=2)",
    "lgrr(k=3,eps_perm=1.0,eps_1=0.5)", "lgrr(k=3,eps_perm=4.0,eps_1=2.0)",
    "lsue(k=3,eps_perm=1.0,eps_1=0.5)", "lsue(k=3,eps_perm=4.0,eps_1=2.0)",
    "loue(k=3,eps_perm=1.0,eps_1=0.5)", "loue(k=3,eps_perm=4.0,eps_1=2.0)",
    "lsoue(k=3,eps_perm=1.0,eps_1=0.5)", "lsoue(k=3,eps_perm=4.0,eps_1=2.0)",
    "losue(k=3,eps_perm=1.0,eps_1=0.5)", "losue(k=3,eps_perm=4.0,eps_1=2.0)",
    "lblh(k=3,eps_perm=1.0,eps_1=0.5,n_seeds=2)", "lblh(k=3,eps_perm=4.0,eps_1=2.0,n_seeds=2)",
    "lolh(k=3,eps_perm=1.0,eps_1=0.5,n_seeds=2)", "lolh(k=3,eps_perm=4.0,eps_1=2.0,n_seeds=2)",
    "rappor(k=3,m=4,h=1,cohorts=2)", "rappor(k=3,m=4,h=1,cohorts=2,f=0.05,p=0.1,q=0.9)",
]
BROKEN = [("biased-krr", "krr(k=2,eps=1.0)", 1), ("float-pm", "pm(k=4,eps=1.0)", 1),
          ("float-pm", "pm(k=2,eps=4.0)", 1), ("no-memo", "lgrr(k=2,eps_perm=1.0,eps_1=0.9)", ROUNDS),
          ("correct", "lgrr(k=2,eps_perm=1.0,eps_1=0.9)", ROUNDS)]  # the control of no-memo


def clients(extra: list[str]) -> dict[str, str]:
    """The client commands present in this checkout (``{spec}``, ``{domain}``, ``{rounds}`` filled in by
    the audit), plus ``NAME=COMMAND`` pairs given with ``--with`` (e.g. a client built in another
    checkout; with ``{rounds}`` when it simulates devices)."""
    sim = "--reports-per-device {rounds}"
    found = {"python": f"{sys.executable} -m localpriv.cli.main client {{spec}} --domain {{domain}} {sim}"}
    js = ROOT / "clients" / "js" / "bin" / "localpriv-client.js"
    if js.exists() and shutil.which("node"):
        found["javascript"] = f"node {js} {{spec}} --domain {{domain}} {sim}"
    java = ROOT / "clients" / "java" / "build"
    if (java / "org" / "localpriv" / "client" / "Main.class").exists() and shutil.which("java"):
        found["java"] = f"java -cp {java} org.localpriv.client.Main {{spec}} --domain {{domain}} {sim}"
    for item in extra:
        name, _, command = item.partition("=")
        found[name] = command
    return found


def power_rows(specs: list[str]) -> list[dict]:
    rows = []
    for spec in specs:
        mech = parse_portable(spec)
        pair = default_pair(mech)
        claimed = float(mech.epsilon_ldp())
        p1 = channel_event_probability(mech, pair)
        excess = {str(n): (None if p1 is None else _finite(detectable_excess(p1, n - n // 2, claimed, CONFIDENCE)))
                  for n in POWER_TRIALS}
        rows.append({"spec": str(mech), "pair": list(pair), "claimed": claimed, "p1": p1, "detectable_excess": excess})
    return rows


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _row(name: str, res) -> dict:
    return {"client": name, "spec": res.spec, "pair": list(res.pair), "trials": res.trials, "rounds": res.rounds,
            "device_mode": res.device_mode, "devices_per_run": res.devices_per_run, "claimed": res.claimed,
            "lower_bound": res.lower_bound, "flagged": res.flagged, "view": res.view, "counts": res.counts,
            "detectable_excess": res.power.get("detectable_excess")}


def plan(commands: dict[str, str], specs: list[str], rounds: int = 1) -> list[tuple[str, str, int]]:
    """The (client, spec, rounds) audits of section 2: every spec at one report per device, and the
    memoized ones at ``rounds`` reports per device (the memo section) when ``rounds > 1``."""
    out = [(name, spec, 1) for name in commands for spec in specs]
    if rounds > 1:
        out += [(name, spec, rounds) for name in commands for spec in specs
                if parse_portable(spec).spec_name in PORTABLE_MEMOIZED]
    return out


def client_rows(commands: dict[str, str], audits: list[tuple[str, str, int]], trials: int, devices: int,
                confidence: float) -> list[dict]:
    rows = []
    for name, spec, rounds in audits:
        mech = parse_portable(spec)
        domain = f"0..{mech.k - 1}"
        memo = mech.spec_name in PORTABLE_MEMOIZED
        run = command_runner(commands[name], spec=str(mech), domain=domain, rounds=rounds)
        try:
            res = audit(mech, run, trials=devices if memo else trials, rounds=rounds, confidence=confidence,
                        devices_per_run=simulates_devices(commands[name]))
        except LocalPrivError as exc:  # a client that fails is a result too: recorded, not fatal
            rows.append({"client": name, "spec": str(mech), "rounds": rounds, "error": str(exc)})
            print(f"{name:10s} {mech}: {exc}", file=sys.stderr)
            continue
        rows.append(_row(name, res))
        print(f"{name:10s} {res.spec:50s} x{rounds} claimed {res.claimed:.4f} bound {res.lower_bound:.4f} "
              f"{'FLAGGED' if res.flagged else 'ok'}", file=sys.stderr)
    return rows


def broken_rows(trials: int, devices: int, confidence: float) -> list[dict]:
    rows = []
    script = ROOT / "tests" / "audit_clients.py"
    for variant, spec, rounds in BROKEN:
        mech = parse_portable(spec)
        domain = f"0..{mech.k - 1}"
        if rounds == 1:
            run = command_runner(f"{sys.executable} {script} {variant} {{spec}} --domain {{domain}}",
                                 spec=str(mech), domain=domain)
        else:  # one device per run: in process (the same function the command calls)
            src = SystemSource()
            run = runner_of(lambda lines, spec=spec, domain=domain, src=src, variant=variant:
                            run_variant(variant, spec, domain, lines, src))
        res = audit(mech, run, trials=devices if rounds > 1 else trials, rounds=rounds, confidence=confidence)
        rows.append({"variant": variant, **_row("python (broken)", res)})
        print(f"broken {variant:10s} {res.spec:40s} claimed {res.claimed:.4f} bound {res.lower_bound:.4f} "
              f"{'FLAGGED' if res.flagged else 'ok'}", file=sys.stderr)
    return rows


def _g(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"


def tables(out: dict) -> dict[str, str]:
    t: dict[str, str] = {}
    head = "| spec | pair | claimed | p1 | " + " | ".join(f"excess at {n:,}" for n in POWER_TRIALS) + " |\n"
    head += "|---|---|---|---|" + "---|" * len(POWER_TRIALS) + "\n"
    t["power"] = head + "".join(
        f"| `{r['spec']}` | {r['pair'][0]}, {r['pair'][1]} | {_g(r['claimed'], 4)} | {_g(r['p1'])} | "
        + " | ".join(_g(r["detectable_excess"][str(n)]) for n in POWER_TRIALS) + " |\n" for r in out["power"])
    every = out["clients"]
    names = sorted({r["client"] for r in every})

    def grid(rows: list[dict]) -> str:
        head = "| spec | claimed | " + " | ".join(f"{n}: bound" for n in names) + " |\n"
        head += "|---|---|" + "---|" * len(names) + "\n"
        body = ""
        for spec in dict.fromkeys(r["spec"] for r in rows):
            got = {r["client"]: r for r in rows if r["spec"] == spec}
            claimed = next((r["claimed"] for r in got.values() if "claimed" in r), None)
            cells = ["-" if n not in got else "error" if "error" in got[n]
                     else _g(got[n]["lower_bound"]) + (" **flagged**" if got[n]["flagged"] else "") for n in names]
            body += f"| `{spec}` | {_g(claimed, 4)} | " + " | ".join(cells) + " |\n"
        return head + body

    one = [r for r in every if r.get("rounds", 1) == 1]
    memo = [r for r in every if r.get("rounds", 1) > 1]
    flagged = sum(r.get("flagged", False) for r in every)
    errors = sum("error" in r for r in every)
    pr = out["params"]
    if "memo_rounds" not in pr:  # a JSON of the earlier make audit (memoized: a process per device)
        t["clients"] = grid(one) + (f"\n{len(every)} audits of {len(names)} clients ({', '.join(names)}), "
                                    f"{flagged} flagged, {errors} failed; {pr['trials']:,} reports per value; "
                                    f"memoized mechanisms {pr['devices']:,} devices per value in process (Python), "
                                    f"{pr['devices_command']:,} through a command (small level only); each bound "
                                    f"at confidence {pr['confidence_each']:.5f}, so that all {pr['audits']} bounds "
                                    f"(this table and the broken clients') hold together with probability "
                                    f"{pr['confidence']} (Bonferroni).\n")
        t["memo"] = "Not in `docs/results/audit.json` yet: the next `make audit` writes it.\n"
    else:
        t["clients"] = grid(one) + (f"\n{len(every)} audits of {len(names)} clients ({', '.join(names)}; this "
                                    f"table and the next), {flagged} flagged, {errors} failed; {pr['trials']:,} "
                                    f"reports per value; memoized mechanisms {pr['devices']:,} devices per value, "
                                    f"simulated in one run of each client's command; each bound at confidence "
                                    f"{pr['confidence_each']:.5f}, so that all {pr['audits']} bounds (these tables "
                                    f"and the broken clients') hold together with probability {pr['confidence']} "
                                    f"(Bonferroni).\n")
        t["memo"] = grid(memo) + (f"\n{pr['memo_rounds']} reports per device, {pr['devices']:,} devices per value; "
                                  f"claimed: the memo's bound on that many reports.\n")
    t["broken"] = ("| broken client | spec | rounds | claimed | lower bound | view | flagged |\n"
                   "|---|---|---|---|---|---|---|\n" + "".join(
                       f"| {r['variant']} | `{r['spec']}` | {r['rounds']} | {_g(r['claimed'], 4)} | "
                       f"{_g(r['lower_bound'])} | {r['view']} | {'yes' if r['flagged'] else 'no'} |\n"
                       for r in out["broken"]))
    return t


def render(out: dict, paths=DOCS) -> None:
    tabs = tables(out)
    for path in paths:
        if not path.exists():
            continue
        text = path.read_text()
        for name, table in tabs.items():
            text = re.sub(rf"(<!-- audit-evidence:{name} -->\n).*?(<!-- /audit-evidence -->)",
                          lambda m, table=table: m.group(1) + table + m.group(2), text, flags=re.S)
        path.write_text(text)


def main() -> None:
    args = sys.argv[1:]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])  # the clients' imports
    if "--docs-only" in args:
        render(json.loads(OUT.read_text()))
        return
    if "--broken-only" in args:  # rerun section 3 only, into the committed JSON
        out = json.loads(OUT.read_text())
        out["broken"] = broken_rows(TRIALS, BROKEN_DEVICES, out["params"]["confidence_each"])
        with atomic_output(OUT) as tmp:
            pathlib.Path(tmp).write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
        render(out)
        return
    quick = "--quick" in args
    t0 = time.monotonic()
    if quick:
        commands = {"python": clients([])["python"]}
        specs = ["krr(k=4,eps=0.5)", "pm(k=3,eps=4.0)", "lgrr(k=3,eps_perm=1.0,eps_1=0.5)"]
        out = {"power": power_rows(specs), "clients": client_rows(commands, plan(commands, specs, 4), 2_000, 40,
                                                                   CONFIDENCE),
               "broken": broken_rows(2_000, 120, CONFIDENCE),
               "params": {"trials": 2_000, "devices": 40, "confidence": CONFIDENCE, "quick": True}}
        print(json.dumps(out, indent=1, allow_nan=False))
        print(f"quick run: {time.monotonic() - t0:.0f} s", file=sys.stderr)
        return
    extra = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--with"]
    commands = clients(extra)
    audits = plan(commands, SPECS, MEMO_ROUNDS)
    # Bonferroni over the table: every bound of it holds together with probability CONFIDENCE
    each = 1.0 - (1.0 - CONFIDENCE) / (len(audits) + len(BROKEN))
    out = {"power": power_rows(SPECS), "clients": client_rows(commands, audits, TRIALS, DEVICES, each),
           "broken": broken_rows(TRIALS, BROKEN_DEVICES, each),
           "params": {"trials": TRIALS, "devices": DEVICES, "memo_rounds": MEMO_ROUNDS,
                      "devices_broken": BROKEN_DEVICES, "rounds_broken_memo": ROUNDS,
                      "confidence": CONFIDENCE, "confidence_each": each, "audits": len(audits) + len(BROKEN),
                      "power_trials": list(POWER_TRIALS), "quick": False,
                      "commands": {n: c.replace(str(ROOT), ".").replace(sys.executable, "python")
                                   for n, c in commands.items()}}}
    with atomic_output(OUT) as tmp:
        pathlib.Path(tmp).write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    render(out)
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
