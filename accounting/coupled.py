"""Revealed-sample accounting for coupled sampling (the papers' Algorithm 1).

With *coupled* sampling one Poisson batch is used for both passes. The public
gradient is not noised and the public tokens are known to the adversary, so in
the worst case the public gradient reveals which videos were sampled. The private
pass then gets **no amplification by subsampling**: for a fixed video, a step is

* with probability ``1 - q``: the video is not in the (revealed) batch and the
  output does not depend on its private tokens (privacy loss exactly 0);
* with probability ``q``: the video is in the batch, known to be so, and the step
  is a plain Gaussian mechanism of sensitivity ``C`` (``special``) or ``2C``
  (``replace``: both the old and the new private part are clipped to C).

Because the branch is *revealed*, the per-step privacy-loss distribution is the
mixture ``(1 - q)·δ₀ + q·PLD_Gaussian`` and the per-step Rényi divergence of
order α is ``1/(α-1) · log(1 - q + q·exp((α-1)·α·Δ²/(2σ²)))`` with Δ = 1 or 2.
This is the bound the design prescribes for coupled sampling (docs/design.md); Theorem 4.1 does not
hold for it. Both quantities compose additively over steps like any mechanism.

The Gaussian PLD and the mixture are built with dp-accounting's PLD tools
(``from_gaussian_mechanism``, ``identity``, ``compute_mixture``), so the
discretisation is dp-accounting's pessimistic one.
"""

from __future__ import annotations

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from maskdp_jax.accounting import events


def _sensitivity(adjacency: str) -> float:
    # Under replace-one both the removed and the inserted private parts are clipped
    # to C, so the private sum moves by up to 2C; under replace-by-absent by up to C.
    return 2.0 if adjacency == "replace" else 1.0


def coupled_step_rdp(
    *, q: float, noise_multiplier: float, orders: np.ndarray, adjacency: str = "special"
) -> np.ndarray:
    """Per-step RDP of one coupled (revealed-sample) MaskDP-SGD step.

    Args:
      q: Poisson sampling rate of the shared batch, ``0 < q < 1``.
      noise_multiplier: σ > 0 (noise std over clip norm C).
      orders: Rényi orders α > 1, shape ``[K]``.
      adjacency: ``"special"`` (sensitivity C) or ``"replace"`` (sensitivity 2C).
        Unlike hidden-sample Poisson subsampling, the revealed-sample bound is
        exact for both relations, so RDP supports ``replace`` here.

    Returns:
      ``[K]`` float64 array, ``1/(α-1)·log(1 - q + q·exp((α-1)·α·Δ²/(2σ²)))``.

    Privacy meaning: an upper bound on the Rényi divergence between the outputs of
    one step on two neighbouring datasets when the batch membership is public.
    """
    orders = np.asarray(orders, dtype=np.float64)
    if np.any(orders <= 1.0):
        raise ValueError("Rényi orders must be > 1.")
    exponent = (orders - 1.0) * orders * _sensitivity(adjacency) ** 2 / (2.0 * noise_multiplier**2)
    # log(1 - q + q e^x): log1p(q·expm1(x)) is accurate for small x, logaddexp
    # avoids overflow for large x.
    small = np.log1p(q * np.expm1(np.minimum(exponent, 1.0)))
    large = np.logaddexp(np.log1p(-q), np.log(q) + exponent)
    return np.where(exponent <= 1.0, small, large) / (orders - 1.0)


def coupled_step_pld(
    *,
    q: float,
    noise_multiplier: float,
    adjacency: str,
    value_discretization_interval: float,
) -> pld_lib.PrivacyLossDistribution:
    """Per-step privacy-loss distribution ``(1 - q)·δ₀ + q·PLD_Gaussian(σ)``.

    Args:
      q: sampling rate of the shared batch.
      noise_multiplier: σ > 0.
      adjacency: ``"special"`` or ``"replace"`` (Gaussian of sensitivity 2).
      value_discretization_interval: PLD grid step (pessimistic rounding).

    Returns:
      A dp-accounting ``PrivacyLossDistribution`` of one step.
    """
    gaussian = pld_lib.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        sensitivity=1.0,
        value_discretization_interval=value_discretization_interval,
        neighboring_relation=events.neighboring_relation(adjacency),
    )
    absent = pld_lib.identity(value_discretization_interval=value_discretization_interval)
    return gaussian.compute_mixture(absent, self_weight=q)


def coupled_pld(
    segments: tuple[events.Segment, ...],
    *,
    adjacency: str,
    value_discretization_interval: float,
) -> pld_lib.PrivacyLossDistribution:
    """PLD of a whole coupled-sampling history (all σ > 0).

    Args:
      segments: the history; every segment must have ``noise_multiplier > 0``.
      adjacency: ``"special"`` or ``"replace"``.
      value_discretization_interval: PLD grid step.

    Returns:
      The composed ``PrivacyLossDistribution``.
    """
    total = None
    for seg in segments:
        step = coupled_step_pld(
            q=seg.q,
            noise_multiplier=seg.noise_multiplier,
            adjacency=adjacency,
            value_discretization_interval=value_discretization_interval,
        )
        composed = step.self_compose(seg.steps)
        total = composed if total is None else total.compose(composed)
    if total is None:
        raise ValueError("coupled_pld needs at least one segment.")
    return total
