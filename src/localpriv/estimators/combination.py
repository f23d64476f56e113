"""Estimators for reports of many mechanisms (free-will privacy, seed 003 sections 4-6).

Every user may pick his own mechanism; the observations hold one block (the triplet
``(Z^A, q^A, n^A)`` of seed 003 section 6) per distinct mechanism ``A``. Estimators:

* ``gibu`` -- GIBU, seed 003 Algorithm 1: the maximum-likelihood estimate over all blocks. It is
  :func:`localpriv.estimators.ibu.ibu` (the one EM engine), never a copy; its cost per iteration
  is ``O(sum_A |Z^A| k)`` whatever ``n``.
* ``[e]R`` (seed 003 Eqs. 7-8): run estimator ``e`` on each block alone and average the results
  with weights ``n^A / n``. Names ``inv-n-r``, ``inv-p-r``, ``ibu-r``, ``rap-n-r``, ``rap-p-r``.
* ``[INV]M`` (Eq. 10): ``theta = q[n] A[n]^{-1}`` with the average mechanism
  ``A[n] = sum_A (n^A/n) A`` and the pooled empirical distribution ``q[n]``; post-processed by
  normalization (``inv-n-m``) or projection onto the simplex (``inv-p-m``).
* ``[IBU]M`` (section 5.3): IBU on ``A[n]`` and ``q[n]`` (``ibu-m``), i.e. the EM engine with a
  single dense block -- which is *not* the MLE unless all mechanisms are equal (Eq. 14).
* ``[RAP]M`` (Eqs. 16-17): for unary-encoding (basic RAPPOR) reports with per-user parameters,
  ``theta = (s[n] - qbar) / (pbar - qbar)`` where ``s[n]`` is the mean reported bit vector and
  ``pbar, qbar`` the user-averaged probabilities of reporting a 1 for a 1 and for a 0. For RAPPOR
  ``q_i = 1/(1+e^{eps_i/2})``, ``p_i = 1 - q_i`` and this is exactly Eqs. 16-17
  (``rap-n-m``, ``rap-p-m``); ``rap-n``/``rap-p`` are the single-mechanism estimator RAP.

``[INV]M``, ``[IBU]M`` need one shared output alphabet (same finite number of outputs) and
``[RAP]M``/``[e]R`` with ``e = RAP`` need unary-encoding mechanisms; otherwise they raise a
:class:`LocalPrivError` naming the estimator that applies (``gibu`` always does).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from localpriv.utils.validation import LocalPrivError
from localpriv.estimators.result import Fit
from localpriv.likelihood.packed import PackedSupport
from localpriv.likelihood.blocks import DenseBlock, LikelihoodBlock
from localpriv.data.observations import Observations
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.estimators.registry import NO_SETTINGS, Setting, em_settings_declared, register_estimator
from localpriv.estimators.em import DEFAULT_ACCELERATE, DEFAULT_DELTA, DEFAULT_MAX_ITER, DEFAULT_STOP, log_likelihood
from localpriv.estimators.ibu import em_settings, ibu, run_em
from localpriv.estimators.inv import inv

__all__ = ["gibu", "merge_blocks", "batch_blocks", "BatchedScaledIdentityBlock", "BatchedExpKernelBlock",
           "BatchedSupportBlock", "combine_results", "average_mechanism", "inv_m", "ibu_m", "rap", "rap_m",
           "unary_statistics", "COMBINABLE"]


# --------------------------------------------------------------------------------------------
# GIBU
# --------------------------------------------------------------------------------------------
#: a block is merged when its dense likelihood ``k x m_A`` has at most this many entries
MERGE_BLOCK_MAX = 1 << 17
#: merged blocks are packed into dense chunks of at most this many entries (2 MiB of float64: a
#: chunk that stays in a core's L2 cache; one 6 MiB chunk was 15x slower per iteration, measured)
MERGE_CHUNK_MAX = 1 << 18


def merge_blocks(blocks, keep_batchable: bool = False) -> list:
    """The likelihood blocks of ``blocks`` with small finite-channel ones merged into dense chunks.

    The GIBU sum over mechanisms, ``sum_A sum_j c^A_j G^A[x, j] / (theta @ G^A)_j``, is the same
    sum over the columns of ``[G^1 | G^2 | ...]`` with the counts concatenated: one matrix product
    per chunk instead of one Python-level product per mechanism (seed 003 asks for the sum over
    mechanisms vectorized). Merged: blocks of mechanisms with a finite output alphabet whose
    ``k x m_A`` likelihood has at most :data:`MERGE_BLOCK_MAX` entries -- there the per-block call
    overhead, or an FFT on a padded grid, costs more than the dense product; chunks hold at most
    :data:`MERGE_CHUNK_MAX` entries. With ``keep_batchable`` (what :func:`gibu` uses), blocks of the
    families the EM engine batches (:func:`batch_blocks`: k-RR and other scaled-identity channels,
    the exponential kernels of the linear geometric and Laplace mechanisms, the support blocks of
    the pure protocols) keep their structured block: batched, they cost ``O(total reports)`` per
    product, less than a dense chunk (1,000 k-RR mechanisms at ``k = 100``: 10^7 dense entries
    read twice per EM evaluation). Other blocks keep their own (structured) likelihood block.
    """
    out, chunk, size = [], [], 0

    def flush():
        if len(chunk) == 1:
            out.append(chunk[0].likelihood_block())
        elif chunk:
            G = np.hstack([b.mechanism.likelihood(b.reports) for b in chunk])
            out.append(DenseBlock(G, np.concatenate([b.counts for b in chunk]).astype(float)))

    for b in blocks:
        entries = b.mechanism.k * b.counts.size
        if b.mechanism.n_outputs is None or entries > MERGE_BLOCK_MAX:
            out.append(b.likelihood_block())
            continue
        if keep_batchable:
            lb = b.likelihood_block()
            if _family(lb) is not None:
                out.append(lb)
                continue
        if size + entries > MERGE_CHUNK_MAX:
            flush()
            chunk, size = [], 0
        chunk.append(b)
        size += entries
    flush()
    return out


@dataclass
class _Merged(Observations):
    """The same observations, presented to the EM engine with small blocks merged."""

    def likelihood_blocks(self):
        return merge_blocks(self.blocks, keep_batchable=True)


def gibu(obs: Observations, *, merge: bool = True, **settings) -> Fit:
    """GIBU (seed 003 Algorithm 1): the MLE of ``theta`` from the reports of all mechanisms.

    ``theta'_x = sum_A (n^A/n) sum_{z in Z^A} q^A_z theta_x A_xz / sum_u theta_u A_uz``. Runs
    :func:`~localpriv.estimators.ibu.ibu`, the same EM engine (settings are passed through), so
    by default it returns the certified maximum (``stop="gap"``: per-report log-likelihood within
    ``delta = 1e-9`` of the maximum; Newton finish where the blocks allow it, SQUAREM otherwise).
    With ``merge`` (default) the blocks of small finite-channel mechanisms are merged into dense
    chunks, except those of the families the engine batches into one block each (k-RR, linear
    geometric / Laplace, pure protocols: :func:`merge_blocks` with ``keep_batchable``,
    :func:`batch_blocks`): the same iteration, evaluated with fewer, larger products (equal to the
    per-block evaluation up to floating-point rounding).
    """
    many = merge and len(obs.blocks) > 1
    est = ibu(_Merged(obs.blocks, obs.domain, obs.meta) if many else obs, **settings)
    est.estimator = "gibu"
    est.settings["merge"] = many
    return est


def _post(v: np.ndarray, post: str) -> np.ndarray:
    post = post.lower()
    if post == "n":
        return clip_normalize(v)
    if post == "p":
        return project_simplex(v)
    raise LocalPrivError(f"post-processing must be 'n' (normalize) or 'p' (project), got {post!r}")


def _finish(theta, obs, name, settings, extra=None, **kw) -> Fit:
    """An Estimate whose log-likelihood is the true (GIBU) one over all blocks, for comparison."""
    L = log_likelihood(obs.likelihood_blocks(), theta)
    return Fit(theta, obs.domain, name, settings, loglik=L, n=obs.n, extra=extra or {}, **kw)


# --------------------------------------------------------------------------------------------
# Batched blocks: one block per family of mechanisms (issue 22)
# --------------------------------------------------------------------------------------------
def _family(b) -> str | None:
    """The batchable family of likelihood block ``b`` (exact types only: subclasses may change the
    products), or ``None``."""
    from localpriv.mechanisms.unary import SupportBlock
    from localpriv.likelihood.structured import ExpKernelBlock, ScaledIdentityBlock

    t = type(b)
    if t is ScaledIdentityBlock:
        return "scaled-identity"
    if t is ExpKernelBlock:
        return "exp-kernel"
    if t is SupportBlock:
        return "support"
    return None


def batch_blocks(blocks) -> list:
    """``blocks`` with the blocks of each family batched into one block (the engine calls this).

    GIBU's E-step is a sum over mechanisms (seed 003 Algorithm 1); per mechanism, a structured
    block costs a few NumPy calls whatever its size (48 us per mechanism and evaluation in issue
    22's measurement), so 1,000 mechanisms cost ~48 ms per EM evaluation. Blocks of one family with the same ``k`` are stacked
    into one block whose columns are the members' columns in order (counts concatenated), with
    products vectorized over all of them:

    * k-RR and other scaled-identity channels (:class:`BatchedScaledIdentityBlock`);
    * exponential kernels -- linear geometric, Laplace with unit bins or grid reports -- with
      different rates (:class:`BatchedExpKernelBlock`);
    * support blocks of the pure protocols (unary encodings, local hashing, subset selection;
      :class:`BatchedSupportBlock`).

    Every product equals the members' products up to floating-point rounding (the forward
    products of scaled-identity batches are the members' own operations, bit for bit), so EM's
    iterates are the same up to rounding. Blocks with no reports, lone members
    and other blocks are returned unchanged; batched blocks take the place of their first member.
    """
    groups: dict = {}
    order: list = []
    for b in blocks:
        fam = _family(b) if b.size else None
        key = None if fam is None else (fam, int(b.k))
        if key is None or key not in groups:
            order.append(key if key is not None else b)
            if key is not None:
                groups[key] = []
        if key is not None:
            groups[key].append(b)
    out = []
    for item in order:
        if not isinstance(item, tuple):
            out.append(item)
            continue
        members = groups[item]
        if len(members) == 1:
            out.append(members[0])
        elif item[0] == "scaled-identity":
            out.append(BatchedScaledIdentityBlock(members))
        elif item[0] == "exp-kernel":
            out.append(BatchedExpKernelBlock(members))
        else:
            out.append(BatchedSupportBlock(members))
    return out


def _segment_ids(sizes) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.repeat(np.arange(sizes.size), sizes), starts


class BatchedScaledIdentityBlock(LikelihoodBlock):
    """Scaled-identity blocks ``G^A[x, j] = b_A + (a_A - b_A) [x == z^A_j]`` of ``M`` mechanisms
    (k-RR with different eps, seed 001 Eq. 5; support-count channels, seed 002) as one block.

    With ``d_A = a_A - b_A``, over the concatenated columns (member ``A(j)`` of column ``j``)::

        (theta @ G)_j = d_{A(j)} theta[z_j] + b_{A(j)} sum(theta)
        (G @ w)_x     = sum_{j: z_j = x} d_{A(j)} w_j + sum_A b_A sum_{j in A} w_j

    ``O(k + sum_A m_A)`` in a few vector operations whatever ``M``. When every member observed
    all ``k`` outputs in order, the columns form an ``M x k`` matrix and ``G @ w`` is
    ``d @ W + b . W 1`` (two matrix-vector products).
    """

    hessian_diagonal = None  # set per instance below

    def __init__(self, members):
        self.members = list(members)
        self.k = int(self.members[0].k)
        a = np.array([m.a for m in self.members])
        b = np.array([m.b for m in self.members])
        sizes = [m.outputs.size for m in self.members]
        seg, self._starts = _segment_ids(sizes)
        self._a, self._b, self._d = a, b, a - b
        self.outputs = np.concatenate([m.outputs for m in self.members])
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self._seg = seg
        self._dcol = self._d[seg]
        self._bcol = self._b[seg]
        self._matrix = all(getattr(m, "_all", False) for m in self.members)
        self._M = len(self.members)
        self._d2 = a * a - b * b
        self._d2col = self._d2[seg]
        self.hessian_diagonal = self._hessian_diagonal

    def _segsum(self, w):
        if self._matrix:
            return w.reshape(self._M, self.k).sum(axis=1)
        return np.add.reduceat(w, self._starts)

    def forward(self, theta):
        theta = np.asarray(theta, dtype=float)
        S = theta.sum()
        if self._matrix:
            out = (self._d[:, None] * theta[None, :]).ravel()
        else:
            out = self._dcol * theta[self.outputs]
        out += self._bcol * S
        return out

    def backward(self, w):
        w = np.asarray(w, dtype=float)
        if self._matrix:
            out = self._d @ w.reshape(self._M, self.k)
        else:
            out = np.bincount(self.outputs, weights=self._dcol * w, minlength=self.k)
        out += float(self._b @ self._segsum(w))
        return out

    def _hessian_diagonal(self, w):
        """``sum_j w_j G[x, j]^2 = sum_{j: z_j = x} (a^2 - b^2)_{A(j)} w_j + sum_A b_A^2 sum_{j in A} w_j``."""
        w = np.asarray(w, dtype=float)
        if self._matrix:
            out = self._d2 @ w.reshape(self._M, self.k)
        else:
            out = np.bincount(self.outputs, weights=self._d2col * w, minlength=self.k)
        out += float((self._b * self._b) @ self._segsum(w))
        return out

    def dense(self):
        return np.hstack([m.dense() for m in self.members])


class BatchedExpKernelBlock(LikelihoodBlock):
    """Exponential-kernel blocks ``G^A[x, j] = a_j e^{-rate_A |p_j - x|}`` of ``M`` mechanisms with
    different rates (linear geometric, seed 001 Eqs. 6-7; Laplace with unit bins or on a grid) as
    one block.

    For member ``A`` with ``r_A = e^{-rate_A}`` the recurrences of
    :class:`~localpriv.likelihood.structured.ExpKernelBlock` (``A_t = r_A A_{t-1} + theta_t``,
    ``B_t = r_A B_{t+1} + theta_t``) are run for all members at once on an ``M x k`` array by a
    compiled kernel (:mod:`localpriv.estimators._kernels`; a NumPy loop over ``k`` when numba is
    disabled), then gathered per column; ``G @ w`` scatters the columns' weights into ``M x k``
    arrays and sums the transposed recurrences over the members. Diagonal entries and exact
    columns (the clamped end bins) are vectorized over all members. ``O(M k + sum_A m_A)``.

    ``hessian_diagonal`` (``sum_j w_j G[x, j]^2``, for the Newton finish) is offered when every
    member is small enough for the finish to have tabulated it (``k m_A <=
    newton.DENSE_DIAGONAL_MAX``), so that batching never changes which scheme runs: ``G^2`` is the
    same kernel with ``r_A^2`` and squared weights, diagonal entries and exact columns.
    """

    hessian_diagonal = None

    def __init__(self, members):
        from localpriv.estimators.newton import DENSE_DIAGONAL_MAX

        self.members = list(members)
        k = self.k = int(self.members[0].k)
        M = self._M = len(self.members)
        sizes = [m.counts.size for m in self.members]
        seg, starts = _segment_ids(sizes)
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self._r = np.array([m._r for m in self.members])
        rowoff = seg * k
        self._il = rowoff + np.concatenate([m._tl for m in self.members])
        self._ir = rowoff + np.concatenate([m._tr for m in self.members])
        self._left = np.concatenate([m._left for m in self.members])
        self._right = np.concatenate([m._right for m in self.members])
        self._diag_idx = np.concatenate([st + m._diag_idx for st, m in zip(starts, self.members)])
        self._diag_x = np.concatenate([m._diag_x if m._diag_idx.size else np.zeros(0, dtype=np.int64)
                                       for m in self.members]).astype(np.int64)
        self._diag_val = np.concatenate([m._diag_val if m._diag_idx.size else np.zeros(0)
                                         for m in self.members])
        self._fix_idx = np.concatenate([st + m._fix_idx for st, m in zip(starts, self.members)])
        cols = [m._fix_cols for m in self.members if m._fix_idx.size]
        self._fix_cols = np.ascontiguousarray(np.hstack(cols)) if cols else np.zeros((k, 0))
        if all(k * s <= DENSE_DIAGONAL_MAX for s in sizes):
            self.hessian_diagonal = self._hessian_diagonal
        self._sq = None

    # ---- recurrences over all members ----------------------------------------------------
    @staticmethod
    def _rows(r, theta):
        from localpriv.estimators import _kernels

        if _kernels.enabled():
            return _kernels.kernels()["exp_rows"](r, theta)
        M, k = r.size, theta.size
        A, B = np.empty((M, k)), np.empty((M, k))
        a = np.zeros(M)
        for t in range(k):
            a = theta[t] + r * a
            A[:, t] = a
        a = np.zeros(M)
        for t in range(k - 1, -1, -1):
            a = theta[t] + r * a
            B[:, t] = a
        return A, B

    @staticmethod
    def _rows_back(r, U, V):
        from localpriv.estimators import _kernels

        if _kernels.enabled():
            return _kernels.kernels()["exp_rows_back"](r, U, V)
        M, k = U.shape
        out = np.zeros(k)
        a = np.zeros(M)
        for t in range(k - 1, -1, -1):
            a = U[:, t] + r * a
            out[t] += a.sum()
        a = np.zeros(M)
        for t in range(k):
            a = V[:, t] + r * a
            out[t] += a.sum()
        return out

    def forward(self, theta):
        theta = np.ascontiguousarray(theta, dtype=float)
        A, B = self._rows(self._r, theta)
        with np.errstate(under="ignore"):
            out = A.ravel()[self._il] * self._left + B.ravel()[self._ir] * self._right
        if self._diag_idx.size:
            out[self._diag_idx] += self._diag_val * theta[self._diag_x]
        if self._fix_idx.size:
            out[self._fix_idx] = theta @ self._fix_cols
        return out

    def _back(self, w, r, left, right, diag_val, fix_cols):
        size = self._M * self.k
        with np.errstate(under="ignore"):
            U = np.bincount(self._il, weights=w * left, minlength=size).reshape(self._M, self.k)
            V = np.bincount(self._ir, weights=w * right, minlength=size).reshape(self._M, self.k)
        out = self._rows_back(r, U, V)
        if self._diag_idx.size:
            out += np.bincount(self._diag_x, weights=diag_val * w[self._diag_idx], minlength=self.k)
        if self._fix_idx.size:
            out += fix_cols @ w[self._fix_idx]
        return out

    def backward(self, w):
        return self._back(np.asarray(w, dtype=float), self._r, self._left, self._right, self._diag_val,
                          self._fix_cols)

    def _hessian_diagonal(self, w):
        """``sum_j w_j G[x, j]^2``: the same recurrences with ``r^2`` and squared entries."""
        if self._sq is None:
            with np.errstate(under="ignore"):
                self._sq = (self._r * self._r, self._left * self._left, self._right * self._right,
                            self._diag_val * self._diag_val, self._fix_cols * self._fix_cols)
        return self._back(np.asarray(w, dtype=float), *self._sq)

    def dense(self):
        return np.hstack([m.dense() for m in self.members])


def _as_csr(Z):
    """A member's support matrix as CSR (packed bits unpacked by chunks)."""
    import scipy.sparse as sp

    return Z.tocsr() if isinstance(Z, PackedSupport) else sp.csr_matrix(Z)


class BatchedSupportBlock(LikelihoodBlock):
    """Support blocks of ``M`` pure protocols (unary encodings, local hashing, subset selection;
    seed 002) as one: ``G[x, j] = u_j + v_j Z[j, x]`` over the stacked reports.

    ``u``, ``v`` concatenated, the support matrices ``Z`` stacked (sparse when any member's is);
    ``forward(theta) = u sum(theta) + v (Z theta)``, ``backward(w) = u . w + Z^T (v w)``:
    one sparse (or dense) product for all mechanisms. ``log_offset`` is the members' sum.
    """

    def __init__(self, members):
        import scipy.sparse as sp

        self.members = list(members)
        self.k = int(self.members[0].k)
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self.u = np.concatenate([np.broadcast_to(m.u, m.counts.shape) for m in self.members])
        self.v = np.concatenate([np.broadcast_to(m.v, m.counts.shape) for m in self.members])
        self.log_offset = float(sum(m.log_offset for m in self.members))
        Zs = [m.Z for m in self.members]
        packed = [isinstance(Z, PackedSupport) for Z in Zs]
        if all(packed):
            self.Z = PackedSupport.vstack(Zs)
        elif any(packed) or any(sp.issparse(Z) for Z in Zs):
            self.Z = sp.vstack([_as_csr(Z) for Z in Zs], format="csr")
        else:
            self.Z = np.ascontiguousarray(np.vstack(Zs))
        self._Z2 = None

    def forward(self, theta):
        return self.u * theta.sum() + self.v * (self.Z @ theta)

    def backward(self, w):
        return self.u @ w + self.Z.T @ (self.v * w)

    def hessian_diagonal(self, w):
        """``sum_j w_j (u_j + v_j Z[j, x])^2``."""
        import scipy.sparse as sp

        if getattr(self.Z, "binary", False):  # 0/1 entries: Z * Z == Z
            return (self.u * self.u) @ w + self.Z.T @ ((2.0 * self.u + self.v) * self.v * w)
        if self._Z2 is None:
            self._Z2 = self.Z.multiply(self.Z).tocsr() if sp.issparse(self.Z) else self.Z * self.Z
        return (self.u * self.u) @ w + 2.0 * (self.Z.T @ (self.u * self.v * w)) + self._Z2.T @ (self.v * self.v * w)

    def dense(self):
        return np.hstack([m.dense() for m in self.members])


# --------------------------------------------------------------------------------------------
# RAP (single unary-encoding mechanism) and the unary statistics it needs
# --------------------------------------------------------------------------------------------
def _unary_pq(mech) -> tuple[float, float]:
    for pn, qn in (("p_star", "q_star"), ("p", "q")):
        p, q = getattr(mech, pn, None), getattr(mech, qn, None)
        if isinstance(p, (float, np.floating)) and isinstance(q, (float, np.floating)):
            return float(p), float(q)
    raise LocalPrivError(
        f"RAP estimators need unary-encoding (basic RAPPOR) reports with bit probabilities p*, q*; "
        f"{mech} is not one: use gibu (any mechanisms) or inv-p-m / ibu-m (shared output alphabet)")


def unary_statistics(block) -> tuple[np.ndarray, float, float, float]:
    """``(ones, n, p, q)`` of a unary-encoding block: per-bit counts of 1s, users, bit probabilities.

    Mechanisms with ``support_counts`` (the pure protocols of seed 002: SUE = basic RAPPOR, OUE,
    ...) give the counts themselves; otherwise reports are ``n x k`` 0/1 arrays (or bit-packed
    ``n x ceil(k/8)`` uint8, big-endian bit order).
    ``p = P(bit = 1 | bit was 1)``, ``q = P(bit = 1 | bit was 0)`` (for RAPPOR, seed 003 Eq. 15:
    ``p = e^{eps/2}/(1+e^{eps/2})``, ``q = 1 - p``).
    """
    mech = block.mechanism
    p, q = _unary_pq(mech)
    if hasattr(mech, "support_counts"):  # pure protocols (seed 002): C_v = #reports supporting v
        ones = np.asarray(mech.support_counts(block.reports, block.counts), dtype=float)
        return ones, float(block.counts.sum()), p, q
    V = np.asarray(block.reports)
    k = mech.k
    if V.ndim != 2:
        raise LocalPrivError(f"{mech}: unary reports must be bit vectors (2-D), got shape {V.shape}")
    if V.shape[1] != k:
        if V.shape[1] == -(-k // 8):
            V = np.unpackbits(V.astype(np.uint8), axis=1)[:, :k]
        else:
            raise LocalPrivError(f"{mech}: reports have {V.shape[1]} columns, expected {k} bits")
    ones = block.counts @ V.astype(float)
    return ones, float(block.counts.sum()), p, q


def rap(obs: Observations, *, post: str = "n") -> Fit:
    """RAP: ``theta = (s - q) / (p - q)`` for one unary mechanism (seed 003 Eq. 17 with eps[n]=eps).

    ``s`` is the mean reported bit vector; post-processed by normalization or projection.
    """
    block = obs.single(f"rap-{post}")
    ones, n, p, q = unary_statistics(block)
    v = (ones / n - q) / (p - q)
    return _finish(_post(v, post), obs, f"rap-{post}", {"post": post}, {"raw_inverse": v})


def rap_m(obs: Observations, *, post: str = "n") -> Fit:
    """[RAP]M, seed 003 Eqs. 16-17: RAP with the user-averaged bit probabilities.

    ``theta = (s[n] - qbar) / (pbar - qbar)`` with ``s[n] = (1/n) sum_i V^i``,
    ``qbar = sum_A (n^A/n) q_A``, ``pbar = sum_A (n^A/n) p_A``. For RAPPOR (``p = 1 - q``,
    ``q = 1/(1+e^{eps/2})``) ``qbar = 1/(1+e^{eps[n]/2})`` defines ``eps[n]`` (Eq. 16) and this
    is Eq. 17: ``theta = (e^{eps[n]/2}+1)/(e^{eps[n]/2}-1) s[n] - 1/(e^{eps[n]/2}-1)``.
    """
    stats = [unary_statistics(b) for b in obs.blocks]
    n = sum(s[1] for s in stats)
    s = sum(s[0] for s in stats) / n
    pbar = sum(st[1] * st[2] for st in stats) / n
    qbar = sum(st[1] * st[3] for st in stats) / n
    if not pbar > qbar:
        raise LocalPrivError("[RAP]M: the averaged mechanism carries no information (pbar <= qbar); use gibu")
    v = (s - qbar) / (pbar - qbar)
    return _finish(_post(v, post), obs, f"rap-{post}-m", {"post": post},
                   {"raw_inverse": v, "p_bar": pbar, "q_bar": qbar})


# --------------------------------------------------------------------------------------------
# Combining results: [e]R
# --------------------------------------------------------------------------------------------
COMBINABLE = {
    "inv-n": lambda o: inv(o, post="n"),
    "inv-p": lambda o: inv(o, post="p"),
    "ibu": lambda o, **kw: ibu(o, **kw),
    "rap-n": lambda o: rap(o, post="n"),
    "rap-p": lambda o: rap(o, post="p"),
}


def combine_results(obs: Observations, estimator: str, **settings) -> Fit:
    """``[e]R`` (seed 003 Eqs. 7-8): ``theta = sum_A (n^A/n) e(A, D^A)``.

    Each block is estimated alone by ``estimator`` (one of ``COMBINABLE``); ``settings`` go to
    IBU (``delta``, ``max_iter``, ...).
    """
    func = COMBINABLE.get(estimator)
    if func is None:
        raise LocalPrivError(f"[e]R: unknown estimator {estimator!r}; known: {', '.join(COMBINABLE)}")
    theta = np.zeros(obs.k)
    parts, iters, conv = [], 0, True
    for b in obs.blocks:  # one iteration per distinct mechanism
        sub = Observations([b], obs.domain)
        try:
            est = func(sub, **settings) if settings else func(sub)
        except LocalPrivError as exc:
            raise LocalPrivError(f"[{estimator}]R cannot use the block of {b.mechanism}: {exc}") from None
        theta += (b.n / obs.n) * est.distribution
        parts.append(est.distribution)
        iters += est.iterations or 0
        conv = conv and (est.converged is not False)
    return _finish(theta, obs, f"{estimator}-r", {"estimator": estimator, **settings},
                   {"per_mechanism": np.asarray(parts)},
                   iterations=iters or None, converged=conv if estimator == "ibu" else None)


# --------------------------------------------------------------------------------------------
# Combining mechanisms: [INV]M and [IBU]M
# --------------------------------------------------------------------------------------------
def average_mechanism(obs: Observations, estimator: str = "[e]M") -> tuple[np.ndarray, np.ndarray]:
    """``A[n] = sum_A (n^A/n) A`` and the pooled counts ``n q[n]`` (seed 003 Eqs. 9-10).

    All mechanisms must share one finite output alphabet (same number of outputs, reports
    indexing it); otherwise a :class:`LocalPrivError` says that ``gibu`` applies.
    """
    sizes = {b.mechanism.n_outputs for b in obs.blocks}
    if None in sizes or len(sizes) != 1:
        raise LocalPrivError(
            f"{estimator} needs all mechanisms to share one finite output alphabet, got output sizes "
            f"{sorted(str(s) for s in sizes)}; use gibu (GIBU applies to any mix of mechanisms)")
    m = sizes.pop()
    A = np.zeros((obs.k, m))
    counts = np.zeros(m)
    for b in obs.blocks:
        A += (b.n / obs.n) * b.mechanism.channel()
        counts += b.count_vector()
    return A, counts


def inv_m(obs: Observations, *, post: str = "n") -> Fit:
    """[INV]M, seed 003 Eq. 10: ``theta = q[n] A[n]^{-1}``, then normalization or projection.

    Raises when the output alphabets differ or ``A[n]`` is singular (use ``gibu`` or ``ibu-m``).
    """
    A, counts = average_mechanism(obs, f"[INV]M (inv-{post}-m)")
    q = counts / counts.sum()
    k, m = A.shape
    cond = np.linalg.cond(A) if k == m else np.inf
    if k == m and cond < 1e12:
        v = np.linalg.solve(A.T, q)
    elif k != m and np.linalg.matrix_rank(A) == k:
        v, *_ = np.linalg.lstsq(A.T, q, rcond=None)
    else:
        raise LocalPrivError(
            f"[INV]M: the average mechanism A[n] is singular (condition number {cond:.3g}); "
            "use gibu (the MLE, always defined) or ibu-m")
    return _finish(_post(v, post), obs, f"inv-{post}-m", {"post": post}, {"raw_inverse": v})


def ibu_m(obs: Observations, *, theta0=None, delta: float = DEFAULT_DELTA, max_iter: int = DEFAULT_MAX_ITER,
          callback=None, accelerate: str | None = DEFAULT_ACCELERATE, stop: str = DEFAULT_STOP,
          progress=False) -> Fit:
    """[IBU]M, seed 003 section 5.3: IBU (Eq. 13) on the average mechanism ``A[n]`` and ``q[n]``.

    Uses the one EM engine on a single dense block, with its settings and defaults (certified
    ``stop="gap"``, Newton finish; see :func:`~localpriv.estimators.ibu.ibu`); maximizes the
    likelihood of the *wrong* hypothesis that every report came from ``A[n]`` (not the MLE unless
    all mechanisms agree), so ``gap_reached`` refers to that likelihood.
    """
    A, counts = average_mechanism(obs, "[IBU]M (ibu-m)")
    live = counts > 0
    res = run_em([DenseBlock(A[:, live], counts[live])], obs.k, progress=progress, label="ibu-m", theta0=theta0,
                 delta=delta, max_iter=max_iter, callback=callback, accelerate=accelerate, stop=stop)
    return _finish(res.theta, obs, "ibu-m", em_settings(res, delta, max_iter, theta0),
                   {"loglik_average_mechanism": res.loglik, "gap": res.gap},
                   iterations=res.iterations, converged=res.converged)


# --------------------------------------------------------------------------------------------
_MIX = {"mixture"}
register_estimator("gibu", gibu, tags={"mle", "iterative", "mixture"},
                   settings=em_settings_declared() + (Setting("merge", "bool", True, "merge the blocks of small "
                                                              "finite-channel mechanisms into dense chunks"),),
                   summary="GIBU: the maximum-likelihood estimate from the reports of all mechanisms")
register_estimator("rap-n", lambda obs, **kw: rap(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags={"single-mechanism", "unary"},
                   summary="RAP: (s - q) / (p - q) on the mean bit vector of one unary encoding, normalized")
register_estimator("rap-p", lambda obs, **kw: rap(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags={"single-mechanism", "unary"},
                   summary="RAP: (s - q) / (p - q) on the mean bit vector of one unary encoding, projected")
_R_TAGS = {"inv-n": {"finite-channel"}, "inv-p": {"finite-channel"}, "ibu": {"iterative"},
           "rap-n": {"unary"}, "rap-p": {"unary"}}
for _e in COMBINABLE:
    register_estimator(f"{_e}-r", lambda obs, _e=_e, **kw: combine_results(obs, _e, **kw),
                       settings=em_settings_declared() if _e == "ibu" else NO_SETTINGS, tags=_MIX | _R_TAGS[_e],
                       summary=f"[{_e}]R: {_e} on each mechanism's reports alone, averaged with weights n^A / n")
register_estimator("inv-n-m", lambda obs, **kw: inv_m(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"shared-alphabet", "finite-channel"},
                   summary="[INV]M: inversion of the average mechanism on the pooled counts, normalized")
register_estimator("inv-p-m", lambda obs, **kw: inv_m(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"shared-alphabet", "finite-channel"},
                   summary="[INV]M: inversion of the average mechanism on the pooled counts, projected")
register_estimator("ibu-m", ibu_m, settings=em_settings_declared(keep_trace=False),
                   tags=_MIX | {"shared-alphabet", "iterative"},
                   summary="[IBU]M: IBU on the average mechanism and the pooled counts (not the MLE)")
register_estimator("rap-n-m", lambda obs, **kw: rap_m(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"unary"},
                   summary="[RAP]M: RAP with the user-averaged bit probabilities, normalized")
register_estimator("rap-p-m", lambda obs, **kw: rap_m(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"unary"},
                   summary="[RAP]M: RAP with the user-averaged bit probabilities, projected")
