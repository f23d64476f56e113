"""The theory as tools (seed 001 sections 4-8): privacy levels, identifiability, error bounds.

:func:`analyze_report` is what ``localpriv analyze`` and ``localpriv mechanism`` print.

Submodules: :mod:`.likelihood` (Eq. 2, Figs. 3 and 5), :mod:`.concavity` (Theorems 4.1 and 6.1,
rank tests), :mod:`.consistency` (section 6), :mod:`.bounds` (Theorem 4.4, Proposition 7.6, exact
INV error), :mod:`.likely` (section 8), :mod:`.examples` (small channels from the seeds),
:mod:`.shuffle` (amplification by shuffling, Feldman-McMillan-Talwar 2021).
"""
from __future__ import annotations

import warnings
from typing import Any, cast

import numpy as np

from localpriv.analysis.bounds import geometric_inv_lower_bound, inv_matrix, krr_inv_upper_bound
from localpriv.analysis.concavity import identifiable
from localpriv.analysis.consistency import dominance
from localpriv.domains import Domain, IntegerDomain
from localpriv.likelihood.blocks import dense_cap_override
from localpriv.mechanisms import KRR, Mechanism
from localpriv.mechanisms.base import ldp_level_within_budget
from localpriv.mechanisms.geometric import Geometric
from localpriv.utils.validation import PrivacyWarning

__all__ = ["analyze_report"]

#: Channels up to this many entries are analysed densely (SVD, inverse); beyond, cheaper paths.
DENSE_LIMIT = 4_000_000
#: Privacy levels and dominance read the channel up to this many entries.
PRIVACY_LIMIT = 16_000_000
#: INV error formulas need an inverse: only for k up to this size.
INVERSE_LIMIT = 2000


def _why(exc: BaseException | str) -> str:
    """The first line of an exception's message (reports hold one line per key)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _size(n: int) -> str:
    """An output count for display: exact below 10^12, else ``2^j`` or ``~10^d``."""
    if n < 10 ** 12:
        return str(n)
    if n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return f"~10^{len(str(n)) - 1}"


def analyze_report(mech: Mechanism, domain: Domain | None = None) -> dict[str, Any]:
    """A summary of a mechanism: sizes, computed privacy levels, identifiability, error bounds.

    Keys (those that apply):

    * ``epsilon_ldp (from channel)``, ``epsilon_geo (from channel)`` -- privacy levels computed
      from the channel, or from its exact structure in closed form where the mechanism has one
      (never building a channel too large to hold); ``privacy warning`` when the level protects no
      one (``inf``, or ``e^eps`` beyond float64: :class:`~localpriv.utils.validation.PrivacyWarning`);
    * ``channel rank`` and ``identifiable (|X| independent columns)`` -- seed 001 Theorem 6.1
      (iii): from the channel's structure where the mechanism knows its rank in closed form
      (:meth:`~localpriv.mechanisms.Mechanism.rank_from_structure`), else decided by
      :func:`localpriv.analysis.concavity.identifiable` (SVD of the column-normalized channel,
      ``tol = max(k, m) eps_machine sigma_max``); ``identifiability test`` says how;
    * ``dominance (Lemma 6.1 iv)`` and ``MLE consistency (seed 001 Lemma 6.1)``;
    * ``INV error bound ...`` -- Proposition 7.6 for k-RR (upper) and the linear geometric mechanism
      (lower, when ``e^-eps > 1/2``), as coefficients of ``1/n``;
    * ``INV exact n*E||v-theta||^2, uniform theta`` and ``... worst case <=`` -- the exact
      expected squared error of INV for any invertible channel (:mod:`.bounds`).

    Dense-only analyses (SVD, inverse, dominance on the channel) are skipped above
    :data:`DENSE_LIMIT` / :data:`PRIVACY_LIMIT` / :data:`INVERSE_LIMIT`, with one line saying why.

    Parameters
    ----------
    mech : Mechanism
        The mechanism analyzed.
    domain : Domain, optional
        Its domain (metric domains add the metric privacy level).

    Returns
    -------
    dict
        Readable keys to numbers or sentences (``localpriv analyze --json`` prints it).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _analyze(mech, domain)
    seen = []
    for w in caught:
        if issubclass(w.category, PrivacyWarning):
            msg = _why(w.message)
            if msg not in seen:
                seen.append(msg)
        else:  # not ours to swallow
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if seen:
        out["privacy warning"] = " | ".join(seen)
    return out


def _analyze(mech: Mechanism, domain: Domain | None = None) -> dict[str, Any]:

    k = mech.k
    out: dict[str, Any] = {"spec": str(mech), "inputs": k}
    try:
        n_out = mech.n_outputs
    except Exception:  # noqa: BLE001 - a mechanism that cannot state its size
        n_out = None
    try:
        space = mech.output_space_size()
    except Exception:  # noqa: BLE001
        space = n_out
    if n_out is not None:
        out["outputs"] = n_out
    elif space is not None:
        out["outputs"] = f"{_size(space)} (finite, too many to enumerate)"
    else:
        out["outputs"] = "unbounded"
    entries = None if n_out is None else k * n_out
    dense = entries is not None and entries <= DENSE_LIMIT
    dom = domain if domain is not None else getattr(mech, "domain", None)

    # ---- privacy --------------------------------------------------------------------------
    key = "epsilon_ldp (from channel)"
    own_eps = type(mech).epsilon_ldp is not Mechanism.epsilon_ldp  # exact, structure-aware
    if own_eps or (entries is not None and entries <= PRIVACY_LIMIT):
        try:  # bounded: a level needing a dense matrix above the limit is refused before it is built
            out[key] = ldp_level_within_budget(mech, PRIVACY_LIMIT)
        except Exception as exc:  # noqa: BLE001 - e.g. unbounded outputs without an exact method
            out[key] = f"not computed ({_why(exc)})"
    elif entries is None:
        out[key] = "not computed (the outputs cannot be enumerated and the mechanism has no closed form)"
    else:
        out[key] = f"not computed (the channel has {entries} entries, above the analysis limit {PRIVACY_LIMIT})"
    metric = dom is not None and getattr(dom, "is_metric", False)
    if metric or mech.spec_name == "geometric":
        key = "epsilon_geo (from channel)"
        structural = mech.spec_name == "geometric" and (dom is None or type(dom) is IntegerDomain)
        try:
            with dense_cap_override(PRIVACY_LIMIT):  # no distance matrix or channel above the limit
                if structural:  # |x - x'| in index units: the mechanism's own (closed-form) computation
                    out[key] = float(mech.epsilon_geo())
                elif k * k > PRIVACY_LIMIT:
                    out[key] = (f"not computed (needs the {k} x {k} distance matrix, {k * k} entries, above the "
                                f"analysis limit {PRIVACY_LIMIT})")
                elif entries is not None and entries > PRIVACY_LIMIT:
                    out[key] = (f"not computed (the channel has {entries} entries, above the analysis limit "
                                f"{PRIVACY_LIMIT})")
                elif metric and dom is not None and getattr(mech, "domain", None) != dom:
                    out[key] = float(mech.epsilon_geo(dom.distance_matrix()))
                else:
                    out[key] = float(mech.epsilon_geo())
        except Exception as exc:  # noqa: BLE001
            out[key] = f"not computed ({_why(exc)})"

    # ---- identifiability (Theorem 6.1) ----------------------------------------------------
    ident_key = "identifiable (|X| independent columns)"
    try:
        structure = mech.rank_from_structure()
    except Exception:  # noqa: BLE001
        structure = None
    if structure is not None:
        rank, why = structure
        out["channel rank"] = int(rank)
        out[ident_key] = bool(rank >= k)
        out["identifiability test"] = why
    else:
        try:
            rt = identifiable(mech, max_dense=DENSE_LIMIT)
            out["channel rank"] = rt.rank
            out[ident_key] = (rt.holds if (rt.holds or rt.method == "channel")
                              else "not shown (rank deficient on a subset of outputs)")
            out["identifiability test"] = (f"SVD of column-normalized {rt.method}, tol={rt.tol:.2e}, smallest kept "
                                           f"singular value {rt.smallest_kept:.3g}"
                                           + (" (fragile)" if rt.fragile else ""))
        except Exception as exc:  # noqa: BLE001
            out[ident_key] = f"not decided ({_why(exc)})"

    # ---- consistency (Lemma 6.1) ------------------------------------------------------------
    try:
        dm = dominance(mech, max_dense=PRIVACY_LIMIT)
    except Exception as exc:  # noqa: BLE001
        dm = {"holds": None, "reason": f"not decided ({_why(exc)})"}
    out["dominance (Lemma 6.1 iv)"] = dm["reason"]
    ident = out.get(ident_key)
    if ident is True and dm["holds"]:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "consistent (identification and dominance hold)"
    elif ident is False:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "NOT identifiable: the MLE need not converge"
    else:
        out["MLE consistency (seed 001 Lemma 6.1)"] = "not established"

    # ---- error bounds (section 7.6) ---------------------------------------------------------
    name = mech.spec_name
    if name == "krr":
        out["INV error bound (Prop. 7.6, k-RR): n*E||v-theta||^2 <="] = krr_inv_upper_bound(
            mech.k, cast(KRR, mech).eps)
    if name == "geometric":
        geo_eps = cast(Geometric, mech).eps
        if np.exp(-geo_eps) > 0.5:
            out["INV error bound (Prop. 7.6, linear geometric): n*E||v-theta||^2 >="] = (
                geometric_inv_lower_bound(geo_eps))
        else:
            out["INV error bound (Prop. 7.6, linear geometric)"] = "does not apply (needs e^-eps > 1/2)"
    if out.get(ident_key) is True and space is not None:
        if dense and k <= INVERSE_LIMIT:
            try:
                M = mech.channel()
                W = inv_matrix(M)
                a = M @ (W ** 2).sum(axis=1)  # a_x = sum_z M[x,z] ||W_z||^2
                out["INV exact n*E||v-theta||^2, uniform theta"] = float(a.mean() - 1.0 / mech.k)
                out["INV exact n*E||v-theta||^2, worst case <="] = float(a.max() - 1.0 / mech.k)
            except Exception as exc:  # noqa: BLE001
                out["INV exact n*E||v-theta||^2"] = f"not computed ({_why(exc)})"
        elif not dense:
            size = f"{entries} entries" if entries is not None else f"{_size(space)} outputs"
            out["INV exact n*E||v-theta||^2"] = (f"not computed (needs the dense channel and its inverse: "
                                                 f"{size}, above the analysis limit {DENSE_LIMIT})")
        else:
            out["INV exact n*E||v-theta||^2"] = (f"not computed (needs the inverse of a {k} x {k} matrix; "
                                                 f"k above the analysis limit {INVERSE_LIMIT})")
    return out
