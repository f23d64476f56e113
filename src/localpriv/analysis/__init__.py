"""The theory as tools (seed 001 sections 4-8): privacy levels, identifiability, error bounds.

:func:`analyze_report` is what ``localpriv analyze`` and ``localpriv mechanism`` print.

Submodules: :mod:`.likelihood` (Eq. 2, Figs. 3 and 5), :mod:`.concavity` (Theorems 4.1 and 6.1,
rank tests), :mod:`.consistency` (section 6), :mod:`.bounds` (Theorem 4.4, Proposition 7.6, exact
INV error), :mod:`.likely` (section 8), :mod:`.examples` (small channels from the seeds).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..mechanisms import Mechanism

__all__ = ["analyze_report"]

#: Channels up to this many entries are analysed densely (SVD, inverse); beyond, cheaper paths.
DENSE_LIMIT = 4_000_000
#: Privacy levels and dominance read the channel up to this many entries.
PRIVACY_LIMIT = 16_000_000
#: INV error formulas need an inverse: only for k up to this size.
INVERSE_LIMIT = 2000


def analyze_report(mech: Mechanism, domain=None) -> dict[str, Any]:
    """A summary of a mechanism: sizes, computed privacy levels, identifiability, error bounds.

    Keys (those that apply):

    * ``epsilon_ldp (from channel)``, ``epsilon_geo (from channel)`` -- privacy levels computed
      from the channel (or, for unbounded outputs, by the mechanism's own exact computation);
    * ``channel rank`` and ``identifiable (|X| independent columns)`` -- seed 001 Theorem 6.1
      (iii), decided by :func:`localpriv.analysis.concavity.identifiable` (SVD of the
      column-normalized channel, ``tol = max(k, m) eps_machine sigma_max``); ``identifiability
      test`` says how;
    * ``dominance (Lemma 6.1 iv)`` and ``MLE consistency (seed 001 Lemma 6.1)``;
    * ``INV error bound ...`` -- Proposition 7.6 for k-RR (upper) and the linear geometric mechanism
      (lower, when ``e^-eps > 1/2``), as coefficients of ``1/n``;
    * ``INV exact n*E||v-theta||^2, uniform theta`` and ``... worst case <=`` -- the exact
      expected squared error of INV for any invertible channel (:mod:`.bounds`).
    """
    from .bounds import geometric_inv_lower_bound, inv_matrix, krr_inv_upper_bound
    from .concavity import identifiable
    from .consistency import dominance

    out: dict[str, Any] = {"spec": str(mech), "inputs": mech.k}
    try:
        n_out = mech.n_outputs
    except Exception:  # noqa: BLE001 - a channel too large to build
        n_out = None
    out["outputs"] = "unbounded" if n_out is None else n_out
    dense = n_out is not None and mech.k * n_out <= DENSE_LIMIT
    dom = domain if domain is not None else getattr(mech, "domain", None)

    # ---- privacy --------------------------------------------------------------------------
    own_eps = type(mech).epsilon_ldp is not Mechanism.epsilon_ldp  # exact, structure-aware
    if own_eps or n_out is None or mech.k * n_out <= PRIVACY_LIMIT:
        try:
            out["epsilon_ldp (from channel)"] = float(mech.epsilon_ldp())
        except Exception as exc:  # noqa: BLE001 - e.g. unbounded outputs without an exact method
            out["epsilon_ldp (from channel)"] = f"not computed ({exc})"
    else:
        out["epsilon_ldp (from channel)"] = f"not computed (channel has {mech.k * n_out} entries)"
    metric = dom is not None and getattr(dom, "is_metric", False)
    if (metric or mech.spec_name == "geometric") and (n_out is None or mech.k * n_out <= PRIVACY_LIMIT):
        try:
            if metric:
                out["epsilon_geo (from channel)"] = float(mech.epsilon_geo(dom.distance_matrix()))
            else:
                out["epsilon_geo (from channel)"] = float(mech.epsilon_geo())
        except Exception as exc:  # noqa: BLE001
            out["epsilon_geo (from channel)"] = f"not computed ({exc})"

    # ---- identifiability (Theorem 6.1) ----------------------------------------------------
    try:
        rt = identifiable(mech, max_dense=DENSE_LIMIT)
        out["channel rank"] = rt.rank
        out["identifiable (|X| independent columns)"] = (
            rt.holds if (rt.holds or rt.method == "channel") else "not shown (rank deficient on a subset of outputs)")
        out["identifiability test"] = (f"SVD of column-normalized {rt.method}, tol={rt.tol:.2e}, smallest kept "
                                       f"singular value {rt.smallest_kept:.3g}" + (" (fragile)" if rt.fragile else ""))
    except Exception as exc:  # noqa: BLE001
        out["identifiable (|X| independent columns)"] = f"not decided ({exc})"

    # ---- consistency (Lemma 6.1) ------------------------------------------------------------
    dm = dominance(mech, max_dense=PRIVACY_LIMIT)
    out["dominance (Lemma 6.1 iv)"] = dm["reason"]
    ident = out.get("identifiable (|X| independent columns)")
    if ident is True and dm["holds"]:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "consistent (identification and dominance hold)"
    elif ident is False:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "NOT identifiable: the MLE need not converge"
    else:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "not established"

    # ---- error bounds (section 7.6) ---------------------------------------------------------
    name = mech.spec_name
    if name == "krr":
        out["INV error bound (Prop. 7.6, k-RR): n*E||v-theta||^2 <="] = krr_inv_upper_bound(mech.k, mech.eps)
    if name == "geometric":
        if np.exp(-mech.eps) > 0.5:
            out["INV error bound (Prop. 7.6, linear geometric): n*E||v-theta||^2 >="] = geometric_inv_lower_bound(mech.eps)
        else:
            out["INV error bound (Prop. 7.6, linear geometric)"] = "does not apply (needs e^-eps > 1/2)"
    if dense and mech.k <= INVERSE_LIMIT and out.get("identifiable (|X| independent columns)") is True:
        M = mech.channel()
        W = inv_matrix(M)
        a = M @ (W ** 2).sum(axis=1)  # a_x = sum_z M[x,z] ||W_z||^2
        out["INV exact n*E||v-theta||^2, uniform theta"] = float(a.mean() - 1.0 / mech.k)
        out["INV exact n*E||v-theta||^2, worst case <="] = float(a.max() - 1.0 / mech.k)
    return out
