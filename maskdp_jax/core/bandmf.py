"""Correlated noise for the private pass: (amplified) banded matrix factorization (BandMF).

``privacy.noise = "banded"`` (with ``privacy.bands``) selects it in a
:class:`~maskdp_jax.core.plan.PrivacyPlan`, ``train.py`` and
:class:`maskdp_jax.core.mechanism.Mechanism` (docs/guides/bandmf.md).

DP-SGD adds independent noise ``σ C z_t`` at every step. BandMF (Choquette-Choo et al., "(Amplified)
Banded Matrix Factorization", NeurIPS 2023) adds ``σ C (𝐂⁻¹ z)_t`` instead, for a lower-triangular
strategy matrix 𝐂 with ``b`` bands and unit column norms: the noise of step t is correlated with the
last ``b − 1`` steps' so that it partly cancels in the model, the sum of the updates. Its privacy
holds when every example takes part at most once in any ``b`` consecutive steps (b-min-separation):
the cyclic Poisson sampler (:class:`maskdp_jax.core.sampling.PoissonSampler` with ``cycle_length =
b``) gives each example one of ``b`` groups, drawn independently and secretly, and step t samples
only group ``t mod b``, each of its members with probability ``b q`` (below 1: the plan refuses
``b B >= N``). The mechanism is then, for the accountant, DP-SGD with rate ``b q`` over
``ceil(T / b)`` rounds (:func:`maskdp_jax.accounting.events.banded_segment`, which
:meth:`maskdp_jax.core.plan.PrivacyPlan.accounted` applies; jax_privacy's ``amplified_bandmf_event``
states the same, and ``tests/test_maskdp_jax_bandmf.py`` compares the two).

MaskDP: the private pass is DP-SGD on the private views, so the same construction applies to it
unchanged; the public pass depends only on public pixels and the released model states, which is
what the masked-adjacency argument (docs/design.md) needs of it, whatever noise the private pass
adds. One band is DP-SGD exactly: 𝐂 is the identity and the noise is the independent draw.

What this module holds, and why not jax_privacy's privatizer: the strategy is jax_privacy's
(:func:`strategy`: the optimised banded Toeplitz coefficients,
``matrix_factorization.toeplitz.optimize_banded_toeplitz``, column-normalised by
``banded.ColumnNormalizedBanded``), and so is the streaming product with 𝐂⁻¹; the standard normal
``z_t`` is drawn by :mod:`maskdp_jax.core.noise` from the run's key folded with the step
(:func:`maskdp_jax.core.noise.step_key`), the project's one randomness policy, which jax_privacy's
privatizer (its own key splitting) would replace. The noise state is the last ``b`` vectors of
``𝐂⁻¹ z``: ``b`` times the trainable parameters in float32.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax.core import noise

PyTree = Any


def _jax_privacy():
    try:
        from jax_privacy.matrix_factorization import banded, toeplitz
    except ImportError as e:  # pragma: no cover - the extra is installed in CI
        raise ImportError("banded noise needs jax_privacy: pip install -e '.[audit]' (or "
                          "pip install -r requirements-dev.txt).") from e
    return banded, toeplitz


def require_jax_privacy() -> None:
    """Fail now, with what to install, if jax_privacy (the strategy's library) is missing: a
    banded plan checks it when it is made, before a run reads any data."""
    _jax_privacy()


def check_bands(bands: int, *, steps: int) -> int:
    """``bands`` as an int in ``[1, steps]``.

    Raises:
      ValueError: otherwise (a strategy has at most one band per step).
    """
    if isinstance(bands, bool) or not isinstance(bands, int) or not 1 <= bands <= steps:
        raise ValueError(f"bands must be an integer in [1, steps={steps}]; got {bands!r}.")
    return bands


@functools.lru_cache(maxsize=32)
def strategy_coefficients(steps: int, bands: int, *, optimizer_steps: int = 250) -> tuple:
    """The banded Toeplitz strategy's ``bands`` coefficients for ``steps`` steps, optimised for
    the mean squared error of the prefix sums (the model's parameters), unit norm; cached by
    its settings. One band is ``(1.0,)``: DP-SGD."""
    check_bands(bands, steps=steps)
    if bands == 1:
        return (1.0,)
    _, toeplitz = _jax_privacy()
    coefs = np.asarray(toeplitz.optimize_banded_toeplitz(steps, bands,
                                                         max_optimizer_steps=optimizer_steps))
    return tuple(float(c) for c in coefs / np.linalg.norm(coefs))


def strategy(steps: int, bands: int):
    """jax_privacy's ``ColumnNormalizedBanded`` strategy 𝐂 (``steps`` x ``steps``, ``bands``
    bands, unit column norms) of :func:`strategy_coefficients`."""
    banded, _ = _jax_privacy()
    return banded.ColumnNormalizedBanded.from_banded_toeplitz(
        steps, jnp.asarray(strategy_coefficients(steps, bands), jnp.float32))


class NoiseState(NamedTuple):
    """The streaming product's state: the step index and jax_privacy's buffers of the last
    ``bands`` back-substituted vectors (of the strategy before its column scaling;
    ``[bands, size]`` float32). Secret, like the noise key: it holds past noise."""

    index: jnp.ndarray
    buffers: jnp.ndarray


class BandedNoise:
    """``σ C (𝐂⁻¹ z)_t`` for a pytree, one step at a time (jit-compatible).

    Args:
      steps: T, the planned steps (the strategy's size).
      bands: b.
    """

    def __init__(self, *, steps: int, bands: int):
        self.steps, self.bands = steps, check_bands(bands, steps=steps)
        self._inverse = strategy(steps, bands).inverse_as_streaming_matrix()

    def init(self, tree: PyTree) -> NoiseState:
        """The state before step 0 for parameters shaped like ``tree``."""
        size = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))
        index, buffers = self._inverse.init_multiply(jnp.zeros((size,), jnp.float32))
        return NoiseState(index=index, buffers=buffers)

    def noise_like(self, tree: PyTree, key: jax.Array, state: NoiseState, *,
                   noise_multiplier: float, l2_clip_norm: float) -> tuple[PyTree, NoiseState]:
        """This step's noise shaped like ``tree`` and the next state; ``key`` is the step's key
        (:func:`maskdp_jax.core.noise.step_key`), whose standard normal draw is ``z_t``."""
        z = noise.standard_normal_flat(tree, key)
        y, (index, buffers) = self._inverse.multiply_next(z, (state.index, state.buffers))
        return (noise.unflatten_like(noise_multiplier * l2_clip_norm * y, tree),
                NoiseState(index=index, buffers=buffers))


@functools.lru_cache(maxsize=8)
def _banded_noise(steps: int, bands: int) -> BandedNoise:
    return BandedNoise(steps=steps, bands=bands)


def for_plan(plan) -> BandedNoise:
    """The :class:`BandedNoise` of a banded :class:`~maskdp_jax.core.plan.PrivacyPlan` (its planned
    steps and bands; cached)."""
    return _banded_noise(plan.steps, plan.bands)


def initial_state(plan, params: PyTree) -> NoiseState | None:
    """The noise state before a plan's first step for parameters shaped like ``params``; None
    for independent noise, which has none (what ``TrainState`` and ``MechanismState`` hold)."""
    return for_plan(plan).init(params) if plan.banded else None
