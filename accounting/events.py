"""DP events and neighbouring relations for MaskDP-SGD training histories.

One logical step of MaskDP-SGD (decoupled sampling) is, for the private tokens,
the Poisson-subsampled Gaussian mechanism: every video is in the private batch
independently with probability ``q``, its private gradient is clipped to norm C
and Gaussian noise of std ``σ·C`` is added to the sum. As a dp-accounting event::

    PoissonSampledDpEvent(q, GaussianDpEvent(σ))

A run is a sequence of segments of identical steps, and its event is
``ComposedDpEvent([SelfComposedDpEvent(step_event, steps), ...])``.

Coupled sampling (one shared batch, see :mod:`maskdp_jax.accounting.coupled`) has no
dp-accounting event: the public gradient reveals the batch, which is outside the
event vocabulary of dp-accounting.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import dp_accounting
from dp_accounting import dp_event

from maskdp_jax.accounting import inputs


class Segment(NamedTuple):
    """``steps`` consecutive logical steps with the same sampling rate and noise.

    Attributes:
      q: Poisson sampling rate B/N of each step.
      noise_multiplier: σ, noise std over clip norm; 0 means no noise (ε = ∞).
      steps: number of steps in the segment, >= 1.
    """

    q: float
    noise_multiplier: float
    steps: int


def banded_segment(*, q: float, noise_multiplier: float, steps: int, bands: int) -> Segment:
    """``steps`` steps of amplified BandMF with ``bands`` bands (cyclic Poisson sampling at rate
    ``q`` overall) as the DP-SGD segment the accountant composes: rate ``bands q`` (each group's)
    over ``ceil(steps / bands)`` rounds (Choquette-Choo et al. 2023; jax_privacy's
    ``amplified_bandmf_event``). One band is the segment itself.

    >>> banded_segment(q=0.01, noise_multiplier=1.0, steps=10, bands=4)
    Segment(q=0.04, noise_multiplier=1.0, steps=3)
    """
    if isinstance(bands, bool) or not isinstance(bands, int) or bands < 1:
        raise ValueError(f"bands must be an integer >= 1; got {bands!r}.")
    return make_segment(q=bands * q, noise_multiplier=noise_multiplier,
                        steps=math.ceil(steps / bands))


def steps_for_epochs(*, num_examples: int, batch_size: int, epochs: float) -> int:
    """Logical steps of ``epochs`` epochs with expected batch B over N videos: the one rule of
    the trainer, the accounting CLI and the paper table.

    An epoch is ``ceil(N / B)`` Poisson steps, what Opacus' Poisson data loader takes per epoch
    (the papers' implementation); fractional epochs round the total up, so a run never takes
    fewer steps than ``epochs · N / B``.

    >>> steps_for_epochs(num_examples=9537, batch_size=128, epochs=300)
    22500
    >>> steps_for_epochs(num_examples=32, batch_size=8, epochs=1.5)
    6
    """
    if num_examples < 1 or batch_size < 1 or not epochs > 0:
        raise ValueError(f"num_examples, batch_size and epochs must be positive; got N="
                         f"{num_examples}, B={batch_size}, epochs={epochs}.")
    return math.ceil(epochs * math.ceil(num_examples / batch_size))


def make_segment(*, q: float, noise_multiplier: float, steps: int) -> Segment:
    """Returns a validated :class:`Segment` (plain Python floats and int)."""
    return Segment(
        q=inputs.check_q(q),
        noise_multiplier=inputs.check_noise_multiplier(noise_multiplier, allow_zero=True),
        steps=inputs.check_steps(steps, minimum=1),
    )


def neighboring_relation(adjacency: str) -> dp_accounting.NeighboringRelation:
    """Maps an adjacency name to dp-accounting's neighbouring relation.

    Args:
      adjacency: ``"special"``: the private tokens of one video are replaced by
        "absent" (they contribute exactly zero private gradient). For the Gaussian
        and Poisson-subsampled Gaussian mechanisms this gives the same numbers as
        add/remove-one. ``"replace"``: the private tokens of one video are replaced
        by arbitrary other values (the papers' Definition 2 read literally).

    Returns:
      ``REPLACE_SPECIAL`` or ``REPLACE_ONE``.
    """
    inputs.check_choice("adjacency", adjacency, inputs.ADJACENCIES)
    if adjacency == "special":
        return dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    return dp_accounting.NeighboringRelation.REPLACE_ONE


def step_event(*, q: float, noise_multiplier: float) -> dp_event.DpEvent:
    """The event of one decoupled MaskDP-SGD step (private pass only).

    The public pass is a function of public tokens and of a batch drawn
    independently of the private batch, so it adds nothing to the privacy loss of
    private tokens (Lemma 1 of the paper) and does not appear in the event.
    """
    return dp_event.PoissonSampledDpEvent(
        sampling_probability=q, event=dp_event.GaussianDpEvent(noise_multiplier)
    )


def decoupled_event(segments: tuple[Segment, ...]) -> dp_event.DpEvent:
    """The composed event of a training history with decoupled sampling.

    Args:
      segments: the history, oldest first.

    Returns:
      ``ComposedDpEvent([SelfComposedDpEvent(PoissonSampledDpEvent(q, Gaussian(σ)),
      steps), ...])``.
    """
    return dp_event.ComposedDpEvent(
        [
            dp_event.SelfComposedDpEvent(
                step_event(q=s.q, noise_multiplier=s.noise_multiplier), s.steps
            )
            for s in segments
        ]
    )
