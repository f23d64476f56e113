"""Deliberately broken clients for the audit's tests (test-only; never for real reports).

Each variant follows the client command's contract (docs/clients.md): values one per line on
standard input, one JSON report per line on standard output. Run as a command:

    python tests/audit_clients.py VARIANT SPEC --domain 0..9 [--seed S] < values.txt

Variants:

* ``correct``: the portable protocol itself (as ``localpriv client``);
* ``biased-krr``: k-RR whose coin keeps the true value with probability ``(1 + p) / 2`` instead of
  ``p = 1 / (1 + (k - 1) e^-eps)``;
* ``float-pm``: Piecewise whose window report is computed in floating point from the real-valued
  centre ``(C + 1) t / 2`` of the textbook mechanism (``C = (e^(eps/2) + 1) / (e^(eps/2) - 1)``,
  ``t = (2x + 1) / k - 1``) plus a grid offset: every report is within the mechanism's range and
  its window has the right size and probability, but its offset from the grid (its low bits) is a
  function of ``x``;
* ``no-memo``: a memoized mechanism that draws a new permanent randomization for every report,
  so that repeated reports of one device average the permanent noise away.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from localpriv.mechanisms.piecewise import Piecewise
from localpriv.mechanisms.portable import (
    ChaCha20Source,
    SystemSource,
    WordSource,
    bernoulli,
    encode_value,
    parse_portable,
    perturb_lines,
    portable_domain,
    sample_portable,
    uniform_int,
)

VARIANTS = ("correct", "biased-krr", "float-pm", "no-memo")


def _biased_krr(k: int, eps: float, x: int, src: WordSource) -> int:
    p = 1.0 / (1.0 + (k - 1) * math.exp(-eps))
    if bernoulli(src, (1.0 + p) / 2.0):
        return x
    r = uniform_int(src, k - 1)
    return r + 1 if r >= x else r


def _float_pm(mech: Piecewise, x: int, src: WordSource) -> float:
    N, W, D = mech.n_points, mech.width, mech.step
    keep = 1.0 / (1.0 + ((N - W) / W) * math.exp(-mech.eps))
    if N == W or bernoulli(src, keep):
        s = math.exp(mech.eps / 2)
        C = (s + 1) / (s - 1)
        t = (2 * x + 1) / mech.k - 1
        centre = (C + 1) / 2 * t * (mech.z_max / C)  # the textbook centre, scaled to the grid's range
        return centre + (uniform_int(src, W) - (W - 1) / 2) * mech.grid
    a = (D + D % 2) // 2 + x * D
    u = uniform_int(src, N - W)
    i = u if u < a else u + W
    return float(2 * i - (N - 1)) * (0.5 * mech.grid)


def run_variant(variant: str, spec: str, domain: str, lines: Sequence[str], src: WordSource) -> list[Any]:
    """The reports of one run of ``variant`` (one process: memos live as long as the run)."""
    if variant == "correct":
        return perturb_lines(spec, domain, lines, src).reports
    dom = portable_domain(domain)
    mech = parse_portable(spec, dom)
    xs = [encode_value(dom, line) for line in lines]
    if variant == "biased-krr":
        return [_biased_krr(mech.k, mech.eps, x, src) for x in xs]
    if variant == "float-pm":
        assert isinstance(mech, Piecewise)
        return [_float_pm(mech, x, src) for x in xs]
    if variant == "no-memo":
        return [sample_portable(mech, x, src) for x in xs]  # a fresh memo for every report
    raise SystemExit(f"unknown variant {variant}; one of {', '.join(VARIANTS)}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("spec")
    ap.add_argument("--domain", "-d", required=True)
    ap.add_argument("--seed")
    args = ap.parse_args(argv)
    src: WordSource = ChaCha20Source(args.seed) if args.seed is not None else SystemSource()
    lines = sys.stdin.read().splitlines()
    reports = run_variant(args.variant, args.spec, args.domain, lines, src)
    sys.stdout.write("".join(json.dumps(r) + "\n" for r in reports))


if __name__ == "__main__":
    main()
