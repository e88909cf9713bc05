r"""RDP amplification by subsampling *without replacement* (Wang, Balle, Kasiviswanathan 2019).

A mechanism M that reads a uniformly random subset of m of the n records (γ = m/n) and is
(α, ε(α))-RDP under replace-one adjacency is (α, ε'(α))-RDP, for integer α ≥ 2, with

.. math::

   ε'(α) = \frac{1}{α-1}\log\Big(1 + γ^2\binom{α}{2}\min\{4(e^{ε(2)}-1),\ 2e^{ε(2)}\}
           + \sum_{j=3}^{α} γ^j \binom{α}{j} b_j\Big)

(Wang et al. 2019, arXiv:1808.00087). Their Theorem 9 (general) gives
b_j = 2e^{(j-1)ε(j)} (the factor min{2, (e^{ε(∞)}-1)^j} is 2 for a Gaussian, whose ε(∞) = ∞).
Their Theorem 27 (the improved bound) gives

.. math::

   b_j = \min\Big\{4\sqrt{B(2\lfloor j/2\rfloor)\,B(2\lceil j/2\rceil)},\ 2e^{(j-1)ε(j)}\Big\},
   \qquad B(m) = \sum_{i=0}^{m} (-1)^i \binom{m}{i} e^{(i-1)ε(i)}.

**Which form, and why it is an upper bound.** For *even* m, B(m) is the m-th Pearson–Vajda
moment E_q[(p/q - 1)^m] of the worst-case pair when ε(·) is that pair's exact RDP curve, and is
non-negative. DP-CDA's seed (002, Theorem 1) prints the square root of B(2⌊j/2⌋)·B(⌈j/2⌉): for odd
j the second argument ⌈j/2⌉ is odd, where B can be negative, and it is not the moment the proof
bounds. We implement Wang et al.'s form, both arguments even. Theorem 27 needs a pair of
neighbours that is worst for every Rényi and Pearson–Vajda divergence at once, with ε(·) that
pair's exact curve (their Definition 26). It holds here because the base mechanism is Gaussian
(ε(α) = α/(2z²), z the noise-to-sensitivity ratio): a pair whose means differ by Δ' ≤ Δ is
Blackwell-dominated by the pair at distance Δ, so every f-divergence with convex f (Rényi,
(t-1)^m for even m) is largest there, and that pair's curve is exactly α/(2z²). Both b_j forms
are valid, so their minimum is. Amplification never hurts either (joint convexity of
e^{(α-1)D_α} under the coupling of the two subsets), so ε'(α) ≤ ε(α) too and we return the
smaller.

**Evaluating B without cancellation.** The alternating sum has terms up to binom(m, m/2) e^{ρm²}
and a result that can be smaller by hundreds of orders of magnitude (small ρ), so float64 returns
noise (or a negative number) from m ≈ 20 on. We sum it exactly enough in :mod:`mpmath` (the
arbitrary-precision library dp-accounting already depends on): the working precision is the
number of digits the sum can lose plus a margin, where the loss is bounded from a rigorous lower
bound on the result: B(m) = E_q|p/q - 1|^m ≥ (E_q|p/q - 1|)^m = (2·TV)^m by Jensen, and the
total variation of a Gaussian shift by μ = 1/z is 2Φ(μ/2) - 1.

**dp-accounting evaluates the same bound** (``SampledWithoutReplacementDpEvent`` of a
``GaussianDpEvent`` under ``NeighborRel.REPLACE_ONE``: Theorem 27 with the per-term minimum with
Theorem 9, as here). ``tests/test_accounting_dpcda.py`` checks the two are equal, per order and
in ε. We keep this evaluation for two reasons, both of which only ever make it *lower* than
dp-accounting's, each justified: (1) the minimum with the un-amplified curve α/(2z²), which
dp-accounting does not take and which decides the bound once γ ≳ 1/2 (l close to the class
size, where the DP-CDA study finds its best utility); (2) dp-accounting's float64 forward
differences drift upward at high orders when ρ is small (at γ = 1/2, z = 10: +1e-8 relative
at α = 34, +26 % at α = 66), where the arbitrary-precision sum above stays exact (checked
against the formula evaluated at 300 digits). At the orders that set ε in practice the two agree
to float rounding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import mpmath
import numpy as np
from scipy import special, stats

from maskdp_jax.accounting import inputs, numerics

BOUNDS = ("improved", "general")
"""``improved``: Wang et al. 2019 Theorem 27 (min with Theorem 9); ``general``: Theorem 9."""

_MARGIN_DIGITS = 30


def _log10_moment_lower_bound(m: int, rho: float) -> float:
    """A rigorous lower bound on log10 B(m), m even, for the precision rule.

    With L = p/q = e^{μZ - μ²/2}, Z ~ N(0, 1) under q, μ = √(2ρ), B(m) = E[(L-1)^m] is at least

    * (E|L-1|)^m = (2·TV)^m (Jensen), TV = 2Φ(μ/2) - 1: tight when ρ is small;
    * E[(L-1)^m; L ≥ 2] ≥ 2^{-m} E[L^m; L ≥ 2] = 2^{-m} e^{ρm(m-1)} Φ̄(z₀ - mμ) with
      z₀ = (log 2 + μ²/2)/μ (exponential tilting): tight when ρ is large.
    """
    mu = math.sqrt(2.0 * rho)
    jensen = m * math.log(2.0 * (2.0 * stats.norm.cdf(mu / 2.0) - 1.0))
    z0 = (math.log(2.0) + mu * mu / 2.0) / mu
    tilted = -m * math.log(2.0) + rho * m * (m - 1.0) + float(stats.norm.logsf(z0 - m * mu))
    return max(jensen, tilted) / math.log(10.0)


@functools.lru_cache(maxsize=4096)
def log_pearson_vajda_moment(m: int, rho: float) -> float:
    """log B(m) for a Gaussian mechanism with RDP curve ε(α) = ρα, m even.

    B(m) = Σ_{i=0}^{m} (-1)^i binom(m, i) e^{ρ i (i-1)} = E_q[(p/q - 1)^m] for the pair
    (N(1/z, 1), N(0, 1)) with ρ = 1/(2z²), evaluated in arbitrary precision (see the module
    docstring for the precision rule).

    Args:
      m: even order >= 2.
      rho: ρ > 0.

    Returns:
      log B(m) (float).
    """
    if m < 2 or m % 2:
        raise ValueError(f"B(m) is a moment only for even m >= 2; got m={m}.")
    if not rho > 0 or not math.isfinite(rho):
        raise ValueError(f"rho must be positive and finite; got {rho}.")
    i = np.arange(m + 1, dtype=np.float64)
    log10_largest = float(np.max((numerics.log_binom(m, i) + rho * i * (i - 1.0))
                                 / math.log(10.0)))
    digits = int(math.ceil(log10_largest - _log10_moment_lower_bound(m, rho)))
    with mpmath.workdps(digits + _MARGIN_DIGITS):
        r = mpmath.mpf(rho)
        total = mpmath.fsum(
            (-1) ** k * mpmath.binomial(m, k) * mpmath.exp(r * k * (k - 1)) for k in range(m + 1))
        if total <= 0:  # cannot happen for an even moment computed to this precision
            raise ArithmeticError(f"B({m}) at rho={rho} evaluated to {total}; precision too low.")
        return float(mpmath.log(total))


def _log_b_j(j: int, rho: float, bound: str) -> float:
    """log b_j of the module docstring for a Gaussian with ε(α) = ρα."""
    general = math.log(2.0) + rho * j * (j - 1.0)
    if bound == "general":
        return general
    lo, hi = 2 * (j // 2), 2 * ((j + 1) // 2)
    improved = math.log(4.0) + 0.5 * (log_pearson_vajda_moment(lo, rho)
                                      + log_pearson_vajda_moment(hi, rho))
    return min(improved, general)


def subsampled_gaussian_rdp(
    *,
    sampling_rate: float,
    noise_multiplier: float,
    orders: Sequence[int],
    bound: str = "improved",
) -> np.ndarray:
    """Per-draw RDP of a Gaussian mechanism run on a subset drawn without replacement.

    Args:
      sampling_rate: γ = m/n ∈ (0, 1]: the subset's share of the records it is drawn from.
      noise_multiplier: z > 0, the noise std over the replace-one L2 sensitivity, so the
        un-amplified mechanism is (α, α/(2z²))-RDP.
      orders: integer Rényi orders α >= 2.
      bound: ``"improved"`` (default) or ``"general"`` (see the module docstring).

    Returns:
      ``[len(orders)]`` ε'(α), each at most the un-amplified α/(2z²).
    """
    gamma = 1.0 if sampling_rate == 1 else inputs.check_q(sampling_rate)
    z = inputs.check_noise_multiplier(noise_multiplier, allow_zero=False)
    alphas = inputs.check_integer_orders(orders, bound="the without-replacement bound")
    inputs.check_choice("bound", bound, BOUNDS)
    rho = 1.0 / (2.0 * z * z)
    largest = int(alphas.max())
    log_b = np.array([_log_b_j(j, rho, bound) for j in range(3, largest + 1)])
    second = min(math.log(4.0) + float(numerics.log_expm1(2.0 * rho)),
                 math.log(2.0) + 2.0 * rho)
    out = np.empty(len(alphas))
    for n, alpha in enumerate(alphas):
        j = np.arange(3, alpha + 1, dtype=np.float64)
        log_terms = np.concatenate([
            [0.0, 2.0 * math.log(gamma) + math.log(alpha * (alpha - 1) / 2.0) + second],
            j * math.log(gamma) + numerics.log_binom(alpha, j) + log_b[: len(j)],
        ])
        amplified = float(special.logsumexp(log_terms)) / (alpha - 1.0)
        out[n] = min(amplified, rho * alpha)
    return out
