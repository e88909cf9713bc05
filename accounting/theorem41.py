r"""The papers' Theorem 4.1 (Schneider et al. 2024a) / Theorem 1 (Schneider et al. 2024b), as a
closed form.

For a dataset of N videos, expected batch B (q = B/N), T epochs (T·N/B = T/q
steps), clip norm C and Gaussian noise std σ_std = σ·C, MaskDP-SGD with
*decoupled* sampling is (α, ε_α)-MaskRDP for every integer α ≥ 2 with

.. math::

   ε_α = \frac{\text{steps}}{α-1} \log A_α,\qquad
   A_α = \sum_{l=0}^{α} \binom{α}{l} (1-q)^{α-l} q^l e^{(l-1) l C^2 / (2 σ_{std}^2)}

(the paper writes the l = 0, 1 terms as (1-q)^{α-1}(αq - q + 1) and the l = 2 term
with e^{C²/σ_std²}; C²/σ_std² = 1/σ²). This is Mironov et al. 2019's bound for the
Poisson-subsampled Gaussian, which the paper applies to the private tokens via its
Lemma 1. It is converted to (ε, δ) by Balle et al. 2020, Thm 21 (the paper's
Theorem 0.E.1):

.. math::

   ε = \min_α\; ε_α + \log\frac{α-1}{α} - \frac{\log δ + \log α}{α-1}.

The arithmetic is add/remove-style (sensitivity C), so it corresponds to the
``special`` adjacency, not to substitution; and it assumes the sampled batch is
hidden, so it holds for *decoupled* sampling only (see :mod:`maskdp_jax.accounting.coupled`).

This module exists to be checked against dp-accounting's RDP accountant; the
accountants in :mod:`maskdp_jax.accounting.accountant` do not use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from maskdp_jax.accounting import inputs, numerics

DEFAULT_ORDERS: tuple[int, ...] = tuple(range(2, 257)) + (320, 384, 448, 512, 768, 1024)
"""Integer Rényi orders searched by :func:`theorem41_epsilon`."""


def _log_a(q: float, noise_multiplier: float, alpha: int) -> float:
    """log A_α for one integer order, computed without cancellation.

    Since the binomial weights sum to one, A_α - 1 = Σ_{l≥2} binom(α,l) q^l
    (1-q)^{α-l} (e^{l(l-1)/(2σ²)} - 1): a sum of positive terms (the l = 0, 1 terms
    vanish). It is accumulated in log space and log A_α = log1p(A_α - 1), so tiny
    A_α - 1 (large σ, small q) keeps full relative precision.
    """
    ls = np.arange(2, alpha + 1, dtype=np.float64)
    log_terms = (
        numerics.log_binom(alpha, ls)
        + ls * math.log(q)
        + (alpha - ls) * math.log1p(-q)
        + numerics.log_expm1(ls * (ls - 1.0) / (2.0 * noise_multiplier**2))
    )
    log_a_minus_1 = special.logsumexp(log_terms)
    return float(np.logaddexp(0.0, log_a_minus_1))


def theorem41_rdp(
    *,
    q: float,
    noise_multiplier: float,
    steps: int,
    orders: Sequence[int] = DEFAULT_ORDERS,
) -> np.ndarray:
    """Rényi-DP curve of Theorem 4.1 (decoupled sampling, ``special`` adjacency).

    Args:
      q: Poisson sampling rate B/N, ``0 < q < 1``.
      noise_multiplier: σ > 0 (noise std over clip norm C; C cancels).
      steps: number of steps (the paper's T·N/B), >= 0.
      orders: integer Rényi orders α >= 2, shape ``[K]``.

    Returns:
      ``[K]`` float64 array of ε_α = steps/(α-1) · log A_α.

    Example:
      >>> rdp = theorem41_rdp(q=0.01, noise_multiplier=1.0, steps=100, orders=[2])
      >>> round(float(rdp[0]), 6)  # 100 · log(1 + q²(e - 1))
      0.017181
    """
    q = inputs.check_q(q)
    sigma = inputs.check_noise_multiplier(noise_multiplier, allow_zero=False)
    steps = inputs.check_steps(steps, minimum=0)
    alphas = inputs.check_integer_orders(orders, bound="Theorem 4.1")
    log_a = np.array([_log_a(q, sigma, int(a)) for a in alphas])
    return steps * log_a / (alphas - 1.0)


def balle2020_curve(*, rdp: np.ndarray, orders: Sequence[float], delta: float) -> np.ndarray:
    """``[K]``: the ε that each order's RDP value gives by Balle et al. 2020, Theorem 21,
    ε_α + log((α-1)/α) - (log δ + log α)/(α-1); :func:`balle2020_epsilon` is its minimum.

    Args:
      rdp: ``[K]`` RDP values ε_α.
      orders: ``[K]`` orders α > 1.
      delta: 0 < δ < 1.
    """
    delta = inputs.check_delta_range(delta)
    alphas = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    return rdp + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)


def balle2020_epsilon(*, rdp: np.ndarray, orders: Sequence[float], delta: float) -> float:
    """(ε, δ) from an RDP curve by Balle et al. 2020, Theorem 21: the minimum over the orders
    of :func:`balle2020_curve`, clipped at 0 (a negative value means (0, δ)-DP holds).

    Returns:
      ε >= 0 (``inf`` if every ε_α is infinite).
    """
    return max(0.0, float(np.min(balle2020_curve(rdp=rdp, orders=orders, delta=delta))))


def theorem41_epsilon(
    *,
    q: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    orders: Sequence[int] = DEFAULT_ORDERS,
) -> float:
    """ε of Theorem 4.1: ε-MaskDP for decoupled MaskDP-SGD at the given δ.

    Args:
      q: Poisson sampling rate B/N.
      noise_multiplier: σ > 0.
      steps: number of steps, T·N/B for T epochs.
      delta: 0 < δ < 1.
      orders: integer Rényi orders to minimise over.

    Returns:
      ε under the ``special`` masked adjacency (private tokens of one video
      replaced by "absent"); labels and public tokens are not protected.

    Example:
      >>> eps = theorem41_epsilon(q=128 / 40320, noise_multiplier=3.0, steps=47250,
      ...                         delta=1e-6)
      >>> round(eps, 2)
      1.08
    """
    rdp = theorem41_rdp(q=q, noise_multiplier=noise_multiplier, steps=steps, orders=orders)
    alphas = inputs.check_integer_orders(orders, bound="Theorem 4.1")
    return balle2020_epsilon(rdp=rdp, orders=alphas, delta=delta)
