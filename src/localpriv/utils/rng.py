"""Random generators for clients: reproducible for experiments, cryptographic for deployments.

Every sampler in localpriv draws from an explicit :class:`numpy.random.Generator`. Which bit
generator sits under it decides who can predict the draws.

* **Experiments, tests, reproductions**: ``make_generator(seed)`` with an integer seed gives
  ``numpy.random.default_rng(seed)`` (PCG64). Anyone who knows the seed can re-run the draws.
* **A real deployment** (a client obfuscating a user's true value): ``make_generator(None)`` or
  :func:`secure_generator` gives a generator over ``randomgen.ChaCha(rounds=20)`` (the ChaCha20
  stream cipher, Bernstein 2008) keyed with 256 bits from the operating system's entropy source
  (:func:`secrets.token_bytes`). PCG64 is a statistical generator, not a cryptographic one: its
  whole state follows from a short seed or can be recovered from a modest run of its output, and
  then every later (and earlier) draw is known. For randomized response that means knowing
  *which users told the truth*: the privacy guarantee is gone although every report has the
  right distribution. A cipher-based generator keyed from OS entropy cannot be predicted from
  its outputs (that is what the cipher's security means), so the guarantee rests on the
  mechanism alone.

Whatever the generator, a secure one only protects the draws if the *process* is trusted: the
key lives in memory, and a seed chosen by the data collector defeats the purpose. Never log it.

Large client calls split their draws over several streams (:func:`spawn_generators`); streams
spawned from a secure generator are secure too (each child is keyed with 256 fresh bits drawn
from the parent), streams spawned from a seeded generator stay reproducible from the seed.
"""
from __future__ import annotations

import secrets

import numpy as np

from localpriv.utils.validation import LocalPrivError

__all__ = ["secure_generator", "make_generator", "spawn_generators", "is_secure"]

#: ChaCha rounds: 20 is the standard (ChaCha20, RFC 8439); fewer rounds trade security for speed
CHACHA_ROUNDS = 20


def _secure_types() -> tuple:
    from randomgen import AESCounter, ChaCha

    return ChaCha, AESCounter


def secure_generator() -> np.random.Generator:
    """A generator over ``randomgen.ChaCha(rounds=20)`` keyed with 256 bits of OS entropy.

    The key is set directly (``ChaCha(key=...)``, not through a ``SeedSequence``, whose 128-bit
    pool would halve the key's entropy) from :func:`secrets.token_bytes` (``os.urandom``); the
    counter starts at 0. Use it for every client that perturbs real users' values; the draws
    cannot be reproduced, by design (see the module docstring).

    Returns
    -------
    numpy.random.Generator
    """
    from randomgen import ChaCha

    key = int.from_bytes(secrets.token_bytes(32), "little")
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=CHACHA_ROUNDS))


def make_generator(seed: int | None) -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` for an integer seed (reproducible experiments);
    :func:`secure_generator` for ``None`` (a real deployment).

    Parameters
    ----------
    seed : int or None
        A non-negative integer (reproducible PCG64 stream) or ``None`` (secure, unpredictable).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    LocalPrivError
        When ``seed`` is neither ``None`` nor a non-negative integer.
    """
    if seed is None:
        return secure_generator()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise LocalPrivError(f"seed must be a non-negative integer or None (secure), got {seed!r}")
    if seed < 0:
        raise LocalPrivError(f"seed must be a non-negative integer or None (secure), got {seed}")
    return np.random.default_rng(int(seed))


def is_secure(rng: object) -> bool:
    """Whether ``rng`` draws from one of randomgen's cipher-based bit generators."""
    bg = getattr(rng, "bit_generator", None)
    return isinstance(bg, _secure_types())


def spawn_generators(rng: np.random.Generator, n: int) -> list[np.random.Generator] | None:
    """``n`` independent child generators drawn from ``rng``, of the same kind.

    * Cipher-based (``ChaCha``, ``AESCounter``): each child gets a fresh key of the cipher's full
      size (256 / 128 bits) read from ``rng``'s raw stream, and the parent's number of rounds:
      the children are as unpredictable as the parent.
    * Any other bit generator: one ``SeedSequence`` made of four 63-bit integers drawn from
      ``rng``, spawned ``n`` times (NumPy's recommended independent streams) and given to the
      same bit-generator type: reproducible from the parent's seed.

    Returns ``None`` when the bit generator cannot be built from a ``SeedSequence``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The parent generator (its stream advances).
    n : int
        How many children.

    Returns
    -------
    list of numpy.random.Generator, or None
    """
    bg = rng.bit_generator
    chacha, aes = _secure_types()
    if isinstance(bg, chacha):
        rounds = int(bg.state["state"]["rounds"])
        keys = bg.random_raw(4 * n).reshape(n, 4)
        return [np.random.Generator(chacha(key=k.copy(), counter=0, rounds=rounds)) for k in keys]
    if isinstance(bg, aes):
        keys = bg.random_raw(2 * n).reshape(n, 2)
        return [np.random.Generator(aes(key=k.copy(), counter=0)) for k in keys]
    seed = np.random.SeedSequence(rng.integers(0, 1 << 63, size=4).tolist())
    try:
        return [np.random.Generator(type(bg)(s)) for s in seed.spawn(n)]
    except TypeError:
        return None
