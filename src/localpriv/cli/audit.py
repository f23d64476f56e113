"""``localpriv audit``: a black-box empirical privacy audit of a client command
(:mod:`localpriv.analysis.audit`, docs/audit.md)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from localpriv.analysis.audit import AuditResult, audit, command_runner, simulates_devices
from localpriv.cli.common import console, fmt_number, friendly, print_json, report_table, status_of
from localpriv.data.formats import atomic_output
from localpriv.mechanisms.portable import PORTABLE_MEMOIZED, encode_value, parse_portable, portable_domain

#: exit status when the lower bound exceeds the claimed level
FLAGGED_EXIT = 3
#: default trials per value: reports (one-report mode), devices (device mode: one client run each)
DEFAULT_TRIALS = 20_000
DEFAULT_DEVICES = 1_000


@friendly
def audit_(
    client: str = typer.Option(..., "--client", help="the client command, e.g. \"localpriv client {spec} --domain "
                                                     "{domain}\" ({spec}, {domain} are filled in; with "
                                                     "{rounds}, e.g. --reports-per-device {rounds}, one run "
                                                     "simulates many devices)"),
    spec: str = typer.Option(..., "--spec", help="the portable spec the client claims, e.g. 'krr(k=10,eps=1.0)'"),
    domain: str | None = typer.Option(None, "--domain", "-d", help="the client's values: lo..hi or labels "
                                                                   "(default 0..k-1)"),
    pair: str | None = typer.Option(None, "--pair", help="x,x': the two values to compare (default: the two whose "
                                                         "channel rows differ most)"),
    trials: int | None = typer.Option(None, "--trials", "-n", help="reports per value, default 20,000 (devices per "
                                                                   "value in device mode, default 1,000)"),
    rounds: int = typer.Option(1, "--rounds", help="reports per device: above 1, each client run is one device "
                                                   "reporting its value this many times"),
    confidence: float = typer.Option(0.95, "--confidence", help="the lower bound holds with this probability"),
    jobs: int = typer.Option(1, "--jobs", "-j", help="client runs at once (device mode)"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds one client run may take"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    json_out: Path | None = typer.Option(None, "--json-out", help="also write the JSON result here"),
) -> None:
    """Audit a client: a lower confidence bound on the LDP level it delivers, beside the level its
    spec claims (exit status 3 when the bound exceeds it)."""
    dom_text = domain
    dom = portable_domain(domain) if domain is not None else None
    mech = parse_portable(spec, dom)
    if dom is None:
        dom_text = f"0..{mech.k - 1}"
        dom = portable_domain(dom_text)
    xy = None
    if pair is not None:
        parts = pair.split(",")
        if len(parts) != 2:
            raise typer.BadParameter(f"expected two values x,x' of the domain, got {pair!r}", param_hint="'--pair'")
        xy = (encode_value(dom, parts[0]), encode_value(dom, parts[1]))
    device = rounds > 1 or mech.spec_name in PORTABLE_MEMOIZED
    if trials is None:
        trials = DEFAULT_DEVICES if device else DEFAULT_TRIALS
    runner = command_runner(client, spec=str(mech), domain=str(dom_text), rounds=rounds, timeout=timeout)
    with status_of("audit", f"running the client on 2 x {trials:,} {'devices' if device else 'values'}") as st:
        task = st.task("runs", 2 * trials)
        res = audit(mech, runner, domain=dom, pair=xy, trials=trials, rounds=rounds, confidence=confidence,
                    jobs=jobs, progress=task.advance, devices_per_run=simulates_devices(client))
        task.close()
    doc = res.to_json()
    if json_out is not None:
        with atomic_output(json_out) as tmp:
            Path(tmp).write_text(_dumps(doc), encoding="utf-8")
    if as_json:
        print_json(doc)
    else:
        console.print(report_table(f"audit of {res.spec}", _rows(res)))
    if res.flagged:
        raise typer.Exit(FLAGGED_EXIT)


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _rows(res: AuditResult) -> dict:
    pw = res.power
    det = pw.get("detectable_excess")
    per_device = (f", {res.rounds} reports per device" + (", simulated many per run" if res.devices_per_run else "")
                  if res.device_mode else "")
    return {
        "pair": f"{res.values[0]} vs {res.values[1]}",
        "trials": f"{res.trials:,} per value ({res.counts['selection']:,} select the event, "
                  f"{res.counts['test']:,} test it){per_device}",
        "claimed level": fmt_number(res.claimed),
        f"lower bound ({res.confidence:g})": fmt_number(res.lower_bound),
        "verdict": ("FLAGGED: the client delivers more than its spec claims" if res.flagged
                    else "consistent with the claimed level"),
        "event": f"{res.view}: {', '.join(res.event[:5])}" + (" ..." if len(res.event) > 5 else ""),
        "counts in the test half": f"{res.counts['event_x']:,} vs {res.counts['event_x_prime']:,}",
        "detects (80% power)": ("an excess the test cannot measure (no event probability)" if pw.get("p1") is None
                                else "no excess up to 30" if det is None
                                else f"a level of {fmt_number(res.claimed + det)} or more "
                                     f"(excess {fmt_number(det)})"),
    }
