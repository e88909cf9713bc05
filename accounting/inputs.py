"""Validation of the numbers an accountant is given.

Every public entry point of :mod:`maskdp_jax.accounting` validates its inputs here, so that a
bad input fails with one clear ``ValueError`` (or ``TypeError``) naming the
argument, instead of a silent wrong ε deep inside dp-accounting.
"""

from __future__ import annotations

import enum
import math
import numbers

import numpy as np


class Accountant(enum.StrEnum):
    """The accountants by name: privacy-loss distributions (tight) and Rényi DP (upper bound)."""

    PLD = "pld"
    RDP = "rdp"


class Adjacency(enum.StrEnum):
    """Neighbouring relations (``accounting/README.md``): ``special``, one video's private part
    replaced by an absent one (the add/remove numbers, Theorem 4.1); ``replace``, replaced by any
    other (Definition 2 read literally)."""

    SPECIAL = "special"
    REPLACE = "replace"


class Sampling(enum.StrEnum):
    """Batch sampling schemes of MaskDP-SGD (``accounting/README.md``): two independent Poisson
    draws per step (``decoupled``), or one shared by both passes (``coupled``, the papers'
    Algorithm 1, accounted with the revealed-sample bound)."""

    DECOUPLED = "decoupled"
    COUPLED = "coupled"


METHODS = tuple(m.value for m in Accountant)
"""The accountants' names (:class:`Accountant`)."""

ADJACENCIES = tuple(a.value for a in Adjacency)
"""The neighbouring relations' names (:class:`Adjacency`)."""

SAMPLINGS = tuple(s.value for s in Sampling)
"""The sampling schemes' names (:class:`Sampling`)."""


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """Returns ``value`` if it is one of ``choices``, else raises ``ValueError``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
    return value


def _check_real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    return value


def check_q(q: object) -> float:
    """Validates a Poisson sampling rate ``q = B / N``.

    Args:
      q: Probability that one video is in a logical batch (expected batch size
        over dataset size).

    Returns:
      ``q`` as a float.

    Raises:
      ValueError: unless ``0 < q < 1``. ``q >= 1`` means the expected batch is at
        least the whole dataset: there is no subsampling to account for and it is
        almost always a configuration mistake (batch size and dataset size swapped,
        or a dataset much smaller than intended).
    """
    q = _check_real("q (sampling rate B/N)", q)
    if q >= 1.0:
        raise ValueError(
            f"q (sampling rate B/N) must be < 1, got {q}: the expected batch size is at "
            "least the dataset size; check batch size and dataset size."
        )
    if q <= 0.0:
        raise ValueError(f"q (sampling rate B/N) must be > 0, got {q}.")
    return q


def check_noise_multiplier(noise_multiplier: object, *, allow_zero: bool) -> float:
    """Validates a noise multiplier σ (noise std divided by the clip norm C).

    Args:
      noise_multiplier: σ. Zero means "no noise": allowed in a ledger (the step is
        then not private and ε = ∞), not for calibration.
      allow_zero: whether σ = 0 is accepted.

    Returns:
      σ as a float.

    Raises:
      ValueError: if σ is negative, non-finite, or zero when not allowed.
    """
    sigma = _check_real("noise_multiplier", noise_multiplier)
    if sigma < 0.0 or (sigma == 0.0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"noise_multiplier must be {bound}, got {sigma}.")
    return sigma


def check_steps(steps: object, *, minimum: int) -> int:
    """Validates a number of steps (logical batches).

    Args:
      steps: the count; must be an integer (not a bool, not a float).
      minimum: smallest allowed value (0 for "nothing done yet", 1 for a segment).

    Returns:
      ``steps`` as an int.
    """
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"steps must be an integer, got {steps!r}.")
    steps = int(steps)
    if steps < minimum:
        raise ValueError(f"steps must be >= {minimum}, got {steps}.")
    return steps


def check_clip_norm(l2_clip_norm: object) -> float:
    """Validates the per-example clip norm C (the private sum's sensitivity): finite and > 0.
    The one check of this rule: the plan, the clipping function and the run config call it.

    Raises:
      TypeError: not a real number (a bool, a traced value, ...).
      ValueError: not finite, or ``<= 0``.
    """
    try:
        if isinstance(l2_clip_norm, bool):
            raise TypeError
        value = float(l2_clip_norm)
    except (TypeError, ValueError):
        raise TypeError(f"l2_clip_norm (C) must be a real number; got {l2_clip_norm!r}.") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"l2_clip_norm (C) must be finite and > 0; got {value}.")
    return value


def check_delta_range(delta: object) -> float:
    """Validates ``0 < δ < 1`` and returns δ as a float."""
    delta = _check_real("delta", delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta}.")
    return delta


def check_delta(*, delta: float, num_examples: int) -> None:
    """Refuses a δ that is meaningless for a dataset of ``num_examples`` videos.

    Policy: **refuse** (raise) when ``δ >= 1/N``. A mechanism that publishes one
    randomly chosen video in the clear is (0, 1/N)-DP, so a guarantee with
    ``δ >= 1/N`` allows the complete disclosure of a video (of its private
    tokens, under MaskDP) and protects nothing worth stating. We refuse rather
    than warn because the number would otherwise end up in a report or a paper
    table looking like a real guarantee. The papers' settings (δ = 1e-6 for NTU,
    1e-5 otherwise) are far below 1/N.

    Args:
      delta: the δ of the (ε, δ) guarantee.
      num_examples: N, the number of videos in the training set (the unit of
        privacy: one video's private tokens in ``maskdp`` mode, one video in ``dp``).

    Raises:
      ValueError: unless ``0 < δ < 1/N`` and ``N >= 1``.
      TypeError: if ``num_examples`` is not an integer.
    """
    delta = check_delta_range(delta)
    if isinstance(num_examples, bool) or not isinstance(num_examples, numbers.Integral):
        raise TypeError(f"num_examples must be an integer, got {num_examples!r}.")
    if num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}.")
    if delta >= 1.0 / num_examples:
        raise ValueError(
            f"delta={delta:g} is >= 1/N = {1.0 / num_examples:g} (N={num_examples}); such a "
            "delta allows publishing a whole video in the clear. Use delta << 1/N "
            "(e.g. 1e-5 or 1/N^1.1)."
        )


def check_epsilon_target(target_epsilon: object, *, name: str = "target_epsilon") -> float:
    """Validates a target ε for calibration: finite and > 0; ``name``: what the message calls
    it (the key the user set, e.g. ``release.epsilon``)."""
    eps = _check_real(name, target_epsilon)
    if eps <= 0.0:
        raise ValueError(f"{name} must be > 0, got {eps}.")
    return eps


def check_integer_orders(orders, *, bound: str) -> np.ndarray:
    """Validates Rényi orders for a bound defined at integers only (``bound`` names it in the
    message); returns them as an int64 array.

    Raises:
      ValueError: not a non-empty 1-D sequence, or an order that is not an integer >= 2.
    """
    arr = np.asarray(orders)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("orders must be a non-empty 1-D sequence of integers.")
    if not np.all(np.equal(np.mod(arr, 1), 0)) or np.any(arr < 2):
        raise ValueError(f"{bound} needs integer Rényi orders >= 2.")
    return arr.astype(np.int64)
