"""``localpriv advise``: rank the mechanisms that meet a privacy target by predicted error."""
from __future__ import annotations

from pathlib import Path

import typer

from localpriv.advice.advisor import advise as advise_mechanisms
from localpriv.advice.protocols import advise_protocols
from localpriv.cli.common import DOMAIN_HELP, Table, console, fmt_number, friendly, print_json, status_of
from localpriv.cli.options import FORMAT_HELP, input_format
from localpriv.domains import ProductDomain, parse_domain
from localpriv.utils.errors import LocalPrivError


@friendly
def advise(
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    n: int = typer.Option(..., "--n", min=1, help="number of users"),
    eps: float | None = typer.Option(None, "--eps",
                                        help="LDP target: each spec's LDP eps, computed from the mechanism, is at most "
                                             "this"),
    metric_eps: float | None = typer.Option(None, "--metric-eps",
                                               help="metric target per unit of distance (per value on LO..HI, per km "
                                                    "on a grid); with --eps both hold"),
    goal: str | None = typer.Option(None, "--goal",
                                    help="what the estimate is for: emd | tv | mean | quantiles | topk (default: emd "
                                         "on LO..HI and grids, tv on labels)"),
    values: Path | None = typer.Option(None, "--values",
                                          help="a file of values like yours (CSV, TSV or Parquet): predictions assume "
                                               "their distribution (default: Zipf on labels, a bell on "
                                               "LO..HI and grids)"),
    column: str | None = typer.Option(None, "--column", "-c",
                                         help="--values: the column by name or number (default: the first); "
                                              "'lat,lon' for a grid"),
    top: int = typer.Option(10, "--top", min=1, help="--goal topk: how many of the most frequent values"),
    runs: int = typer.Option(5, "--runs", min=2, help="simulated data sets per mechanism"),
    method: str = typer.Option("auto", "--method",
                               help="auto (simulate where affordable, else analytic) | simulation | analytic"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the simulations"),
    shuffle: int | None = typer.Option(None, "--shuffle", min=1,
                                          help="central target under a shuffler: the number of shuffled reports "
                                               "(with --central-eps and --delta)"),
    central_eps: float | None = typer.Option(None, "--central-eps",
                                                help="with --shuffle: the shuffled release's central eps; the "
                                                     "mechanisms run at the largest local level meeting it (FMT21)"),
    delta: float | None = typer.Option(None, "--delta", help="with --shuffle: the central delta, in (0, 1)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
    fmt: str | None = typer.Option(None, "--format", "-f", help="--values: " + FORMAT_HELP),
    bind: str = typer.Option("report", "--bind",
                             help="several attributes (a product domain): the level --eps bounds, 'report' (any "
                                  "two tuples) or 'attribute' (tuples differing in one attribute)"),
) -> None:
    """Rank the mechanisms that meet a privacy target by predicted error; recommend one and say why.

    On a product domain (several attributes) it ranks the multi-attribute protocols (SPL, SMP, RS+FD,
    RS+RFD) by the predicted error of the marginals and by the sampled-attribute attack's risk."""
    dom = parse_domain(domain)
    if isinstance(dom, ProductDomain):
        _advise_protocols(dom, eps, n, runs, seed, bind, as_json)
        return
    with status_of("advise", "calibrating and simulating") as status:
        adv = advise_mechanisms(domain, eps_ldp=eps, eps_metric=metric_eps, n=n, goal=goal, values=values,
                                values_format=None if values is None else input_format(values, fmt),
                                column=column, rng=seed, runs=runs, top=top, method=method, progress=status.track,
                                shuffle=shuffle, central_eps=central_eps, delta=delta)
    if as_json:
        print_json(adv.to_dict())
        return
    unit = f" ({adv.unit})" if adv.unit else ""
    table = Table(title=f"{adv.goal} error{unit} for n={adv.n:,}; truth: {adv.truth}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("mechanism spec", overflow="fold")
    table.add_column("LDP eps", justify="right")
    if adv.metric_unit is not None:
        table.add_column(f"metric eps /{adv.metric_unit}", justify="right")
    if adv.shuffle is not None:
        table.add_column(f"central eps ({adv.shuffle:,} shuffled)", justify="right")
    table.add_column("predicted", justify="right")
    table.add_column(f"{adv.level:.0%} range", justify="right")
    table.add_column("estimator")
    table.add_column("how")
    for i, r in enumerate(adv.rows, 1):
        cells = [str(i), r.spec, fmt_number(r.eps_ldp)]
        if adv.metric_unit is not None:
            cells.append(fmt_number(r.eps_metric))
        if adv.shuffle is not None:
            cells.append(fmt_number(r.eps_central))
        cells += [fmt_number(r.error), f"{fmt_number(r.lower)}-{fmt_number(r.upper)}", r.estimator,
                  f"{r.how} ({r.runs})"]
        table.add_row(*cells)
    console.print(table)
    for name, why in adv.skipped.items():
        console.print(f"not evaluated: {name} ({why})", highlight=False, soft_wrap=True)
    console.print(f"recommended: {adv.recommended.spec} -- {adv.reason}", highlight=False, soft_wrap=True)


def _advise_protocols(dom: ProductDomain, eps: float | None, n: int, runs: int, seed: int, bind: str,
                      as_json: bool) -> None:
    """The multi-attribute table: levels, predicted marginal error and the attack-risk column."""
    if eps is None:
        raise LocalPrivError("several attributes: give --eps (the LDP target of the protocols)")
    with status_of("advise", "simulating the protocols"):
        adv = advise_protocols(dom, eps_ldp=eps, n=n, rng=seed, runs=runs, bind=bind)
    if as_json:
        print_json(adv.to_dict())
        return
    table = Table(title=f"marginal error (TV, mean over attributes) for n={adv.n:,}; truth: {adv.truth}",
                  title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("protocol", overflow="fold")
    for name in ("eps report", "eps 1 attr", "predicted", "range", "attack risk", "risk rank"):
        table.add_column(name, justify="right")
    risk_rank = {id(r): i for i, r in enumerate(adv.by_risk, 1)}
    for i, r in enumerate(adv.rows, 1):
        risk = "none" if r.attack_advantage is None else fmt_number(r.attack_advantage)
        table.add_row(str(i), r.spec, fmt_number(r.eps_report), fmt_number(r.eps_attribute), fmt_number(r.error),
                      f"{fmt_number(r.lower)}-{fmt_number(r.upper)}", risk, str(risk_rank[id(r)]))
    console.print(table)
    console.print("eps report: the level between any two tuples; eps 1 attr: between tuples differing in one "
                  "attribute (both computed). attack risk: the advantage (accuracy - 1/d)/(1 - 1/d) of naming "
                  "the sampled attribute (none: SPL samples none)", highlight=False, soft_wrap=True)
    for name, why in adv.skipped.items():
        console.print(f"not evaluated: {name} ({why})", highlight=False, soft_wrap=True)
    console.print(f"recommended: {adv.recommended.spec} -- {adv.reason}", highlight=False, soft_wrap=True)
