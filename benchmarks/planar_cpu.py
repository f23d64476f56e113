"""Planar IBU, CPU time and FFT pairs per EM evaluation: the benchmark's data
(``benchmarks/planar.py``: planar geometric, eps = 10 per km on 0.1-km cells, n users from Gaussian
clusters, SQUAREM, seed 001's rule with delta = 1e-6 per report), one grid size per process.

``--mode new``: the engine as shipped (the mechanism's block is a
:class:`localpriv.likelihood.rfft.RfftClampedBlock`; SQUAREM makes one forward product per EM evaluation,
trials along the extrapolation path mostly without FFTs);
``--mode old``: the block as before the real-FFT one (:class:`localpriv.likelihood.structured._FlooredClampedConvBlock`,
complex-padded ``rfft2``/``irfft2`` with copies, SQUAREM's eager ``theta2`` product).
``--workers`` sets ``structured.FFT_WORKERS``. Prints one JSON object: CPU seconds
(``time.process_time``, all threads), wall seconds, EM evaluations, forward/backward products (each
one FFT pair), FFT pairs per evaluation (all of them, the start and rejected trials included,
divided by EM evaluations), the direct (FFT-free) products of the floor's few cells
(``sparse_floor_products``), log-likelihood and its certificate ``gap``, peak RSS.

    python benchmarks/planar_cpu.py --side 1000 --mode new --workers 1
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, peak_rss_gib  # noqa: E402
from planar import grid_users  # noqa: E402  (the same data as benchmarks/planar.py)

DELTA_PER_REPORT = 1e-6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=300)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--mode", choices=["new", "old"], default="new")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=10_000)
    ap.add_argument("--eager", action="store_true",
                    help="new block, but SQUAREM's eager theta2 forward product (costly_forward off)")
    args = ap.parse_args()

    import localpriv.likelihood.structured as structured
    import localpriv.mechanisms  # noqa: F401  (before structured: the mechanisms import it)
    from localpriv.estimators.em import em
    from localpriv.likelihood.rfft import RfftClampedBlock

    structured.FFT_WORKERS = args.workers
    side, n = args.side, args.n
    rng = np.random.default_rng(side)  # the data of benchmarks/planar.py
    dom, x, mech = grid_users(side, n, rng)
    reports = mech.sample(x, rng)
    z, c = np.unique(reports, return_counts=True)

    counts = {"forward": 0, "backward": 0, "sparse": 0}

    class Old(structured._FlooredClampedConvBlock):  # not replaced by the engine: the earlier path
        def forward(self, theta):
            counts["forward"] += 1
            return super().forward(theta)

        def backward(self, w):
            counts["backward"] += 1
            return super().backward(w)

    of, ob = RfftClampedBlock.forward, RfftClampedBlock.backward

    def fwd(self, theta):
        counts["forward"] += 1
        return of(self, theta)

    def bwd(self, w):
        counts["backward"] += 1
        return ob(self, w)

    osp = RfftClampedBlock.sparse_forward

    def sparse(self, cells, weights):
        counts["sparse"] += 1
        return osp(self, cells, weights)

    RfftClampedBlock.forward, RfftClampedBlock.backward, RfftClampedBlock.sparse_forward = fwd, bwd, sparse
    if args.eager:
        RfftClampedBlock.costly_forward = False

    c0, w0 = time.process_time(), time.perf_counter()
    block = mech.likelihood_block(z, c)
    if args.mode == "old":  # the same kernel, outputs and counts (the spectra built again, as before)
        block = Old(block.kernel, block.shape, block.outputs, block.counts)
    res = em([block], dom.size, accelerate="squarem", stop="loglik", delta=DELTA_PER_REPORT * n,
             max_iter=args.max_iter)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    pairs = counts["forward"] + counts["backward"]
    emit({"benchmark": "planar_cpu", "side": side, "cells": side * side, "n": n, "mode": args.mode,
          "lazy_theta2": args.mode == "new" and not args.eager,
          "fft_workers": args.workers, "distinct_reports": int(z.size), "cpu_seconds": cpu,
          "wall_seconds": wall, "iterations": res.iterations, "forward_products": counts["forward"],
          "backward_products": counts["backward"],
          "sparse_floor_products": counts["sparse"], "fft_pairs_per_evaluation": pairs / res.iterations,
          "loglik": res.loglik, "gap": res.gap, "converged": res.converged, "peak_rss_gib": peak_rss_gib()})


if __name__ == "__main__":
    main()
