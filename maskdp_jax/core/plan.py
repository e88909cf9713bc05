"""The privacy plan of a run: one frozen object that the step, the guard and the report read.

A :class:`PrivacyPlan` bundles everything that decides the run's (ε, δ) guarantee: the training
:class:`Mode`, the adjacency relation, the *effective* sampling scheme (what the accountant
composes), the sampling rate ``q = B / N``, the number of logical steps, δ, the clip norm C, the
noise multiplier σ and the accountant that set σ. It is built and validated once
(:meth:`PrivacyPlan.calibrate`); nothing downstream re-derives or re-checks these numbers. In the
spirit of jax_privacy's ``DPExecutionPlan`` (a calibrated bundle of the mechanism's settings), but
for one fixed mechanism, the (Masked) DP-SGD step of :mod:`maskdp_jax.core.train_step`.

Privacy meaning of the fields:

* ``mode``: what is protected. ``maskdp``: the private tokens of one video (labels, masks and
  public tokens are not); ``dp``: one whole video; ``public_only``: the private tokens, which it
  never reads (ε = 0); ``nonprivate``: nothing (ε = ∞).
* ``sampling``: ``decoupled`` (independent public and private Poisson draws: the private pass
  keeps its amplification by subsampling) or ``coupled`` (one draw, revealed by the noise-free
  public gradient: accounted with the revealed-sample bound). Only ``maskdp`` has a public pass
  that could reveal the batch, so the other modes always run and account ``decoupled``
  (:meth:`Mode.sampling_scheme`).
* ``batch_size``: the *expected* batch size B, the divisor of the update (never the sampled size).

>>> plan = PrivacyPlan.calibrate(
...     mode="maskdp", num_examples=1024, batch_size=64, epochs=4, l2_clip_norm=1.0, delta=1e-5,
...     noise_multiplier=1.0)
>>> plan.mode, plan.q, plan.steps, plan.sampling
(<Mode.MASKDP: 'maskdp'>, 0.0625, 64, <Sampling.DECOUPLED: 'decoupled'>)
>>> PrivacyPlan.calibrate(mode="dp", num_examples=1024, batch_size=64, epochs=4,
...     l2_clip_norm=1.0, delta=1e-5, noise_multiplier=1.0, sampling="coupled").sampling
<Sampling.DECOUPLED: 'decoupled'>
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from dp_accounting import dp_event

import maskdp_jax.accounting as accounting
from maskdp_jax.accounting import accountant, events, inputs
from maskdp_jax.core import bandmf


class Mode(enum.StrEnum):
    """The training mode: which passes run and what the guarantee protects.

    A ``str`` enum, so ``Mode("dp") == "dp"`` and configs, reports and JSON keep plain strings.
    """

    MASKDP = "maskdp"
    DP = "dp"
    PUBLIC_ONLY = "public_only"
    NONPRIVATE = "nonprivate"

    @classmethod
    def _missing_(cls, value):
        raise ValueError(f"mode must be one of {tuple(m.value for m in cls)}; got {value!r}.")

    @property
    def has_public_pass(self) -> bool:
        """An unclipped, noise-free pass (public views in ``maskdp`` and ``public_only``, full
        videos in ``nonprivate``)."""
        return self is not Mode.DP

    @property
    def has_private_pass(self) -> bool:
        """A clipped, noised pass (private views in ``maskdp``, full videos in ``dp``)."""
        return self in (Mode.MASKDP, Mode.DP)

    @property
    def is_private(self) -> bool:
        """Whether the run adds noise and its ε comes from the accountant (a private pass)."""
        return self.has_private_pass

    @property
    def uses_views(self) -> bool:
        """Whether the passes see token views of a video (needs masks) rather than the video."""
        return self in (Mode.MASKDP, Mode.PUBLIC_ONLY)

    @property
    def fixed_epsilon(self) -> float | None:
        """ε that needs no accountant, or None for the noisy modes (``maskdp``, ``dp``).

        ``nonprivate``: ∞ (the whole video enters an unnoised gradient). ``public_only``: 0, with
        δ = 0, under either masked adjacency: the run reads the public views alone, a function
        of the public pixels and the masks, so two datasets that differ only in one video's
        private tokens give the same output distribution. Its labels, masks and public tokens
        are no more protected than in ``maskdp``.
        """
        return {Mode.NONPRIVATE: math.inf, Mode.PUBLIC_ONLY: 0.0}.get(self)

    def sampling_scheme(self, requested: str) -> str:
        """The sampling scheme this mode runs and is accounted with, given the requested one.

        Only ``maskdp`` has both a noise-free public pass that could reveal its batch and a
        private pass; ``dp`` (no public pass), ``public_only`` and ``nonprivate`` (no private
        pass) always draw
        one independent Poisson batch per pass, i.e. ``decoupled``.
        """
        inputs.check_choice("sampling", requested, inputs.SAMPLINGS)
        return requested if self is Mode.MASKDP else "decoupled"


MODES = tuple(m.value for m in Mode)
class Noise(enum.StrEnum):
    """The private pass's noise: DP-SGD's fresh Gaussian at every step, or banded correlated
    noise (:mod:`maskdp_jax.core.bandmf`)."""

    INDEPENDENT = "independent"
    BANDED = "banded"


NOISES = tuple(n.value for n in Noise)


def _batch_hint(num_examples: int) -> str:
    """A batch size to suggest for ``num_examples`` videos: the default run's sampling rate."""
    return (f" For N = {num_examples} videos, B = {max(1, num_examples // 16)} keeps the default "
            "run's sampling rate q = B / N = 1/16 (train.py: --config.batch_size and "
            "--config.physical_batch_size).")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyPlan:
    """The calibrated, validated privacy settings of one run (hashable: jitted code closes over it).

    Keyword-only: C, σ and δ are all floats, so a positional call could swap them silently.

    Attributes:
      mode: :class:`Mode`.
      num_examples: N, training videos (the number the unit of privacy is counted in).
      batch_size: B, the expected Poisson batch size and the divisor of the update.
      steps: planned logical steps. :class:`maskdp_jax.core.mechanism.Mechanism` and ``train.py``'s
        guard refuse to run past them; :meth:`record_step` (the low-level call) does not.
      l2_clip_norm: C, per-example clip norm of the private pass.
      noise_multiplier: σ; the noise on the clipped sum has std ``σ C``. 0 without a private pass.
      delta: δ of the guarantee (``0 < δ < 1/N`` in private modes).
      adjacency: ``"special"`` (private part replaced by absent; add/remove numbers) or
        ``"replace"`` (the papers' Definition 2 read literally).
      sampling: the *effective* scheme (:meth:`Mode.sampling_scheme`), what the sampler draws
        and the accountant composes.
      accountant: ``"pld"`` or ``"rdp"``: the accountant that calibrated σ and that the ε budget
        is checked with.
      target_epsilon: the ε σ was calibrated to, or None when σ was given (no ε budget to
        enforce beyond the planned steps) or the mode has no private pass.
      noise: ``"independent"`` (DP-SGD's fresh Gaussian at every step) or ``"banded"``
        (BandMF's correlated noise on the private pass, :mod:`maskdp_jax.core.bandmf`).
      bands: b, the banded strategy's bands and the cyclic sampler's groups (1 when
        independent). ε is composed by :meth:`accounted`.
    """

    mode: Mode
    num_examples: int
    batch_size: int
    steps: int
    l2_clip_norm: float
    noise_multiplier: float
    delta: float
    adjacency: inputs.Adjacency = inputs.Adjacency.SPECIAL
    sampling: inputs.Sampling = inputs.Sampling.DECOUPLED
    accountant: inputs.Accountant = inputs.Accountant.PLD
    target_epsilon: float | None = None
    noise: Noise = Noise.INDEPENDENT
    bands: int = 1

    def __post_init__(self):
        object.__setattr__(self, "mode", Mode(self.mode))
        if isinstance(self.num_examples, bool) or not isinstance(self.num_examples, int) \
                or self.num_examples < 1:
            raise ValueError(f"num_examples must be an integer >= 1; got {self.num_examples!r}.")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) \
                or not 0 < self.batch_size <= self.num_examples:
            raise ValueError(f"batch_size (expected B) must be an integer in [1, N] with N = "
                             f"{self.num_examples}; got {self.batch_size!r}."
                             f"{_batch_hint(self.num_examples)}")
        inputs.check_steps(self.steps, minimum=1)
        inputs.check_choice("sampling", self.sampling, inputs.SAMPLINGS)
        if self.sampling != self.mode.sampling_scheme(self.sampling):
            raise ValueError(f"mode {self.mode.value!r} runs decoupled sampling only; got "
                             f"{self.sampling!r} (use Mode.sampling_scheme).")
        inputs.check_choice("adjacency", self.adjacency, inputs.ADJACENCIES)
        inputs.check_choice("accountant", self.accountant, inputs.METHODS)
        for name, kind in (("adjacency", inputs.Adjacency), ("sampling", inputs.Sampling),
                           ("accountant", inputs.Accountant)):
            object.__setattr__(self, name, kind(getattr(self, name)))
        self._check_noise()
        if not self.mode.is_private:
            if self.noise_multiplier != 0.0 or self.target_epsilon is not None:
                raise ValueError(f"a {self.mode.value} plan (no private pass) has "
                                 "noise_multiplier 0 and no target ε.")
            return
        inputs.check_delta(delta=self.delta, num_examples=self.num_examples)
        inputs.check_q(self.q)
        inputs.check_clip_norm(self.l2_clip_norm)
        inputs.check_noise_multiplier(self.noise_multiplier, allow_zero=True)
        if self.target_epsilon is not None:
            inputs.check_epsilon_target(self.target_epsilon)
            accountant.check_combination(self.accountant, self.adjacency, self.sampling)

    def _check_noise(self) -> None:
        inputs.check_choice("noise", self.noise, NOISES)
        object.__setattr__(self, "noise", Noise(self.noise))
        if isinstance(self.bands, bool) or not isinstance(self.bands, int) or self.bands < 1:
            raise ValueError(f"bands must be an integer >= 1; got {self.bands!r}.")
        if self.noise == "independent":
            if self.bands != 1:
                raise ValueError(f"bands = {self.bands} needs noise = 'banded' (independent "
                                 "noise has one band).")
            return
        if not self.mode.is_private:
            raise ValueError(f"noise = 'banded' is the private pass's noise; mode "
                             f"{self.mode.value!r} has no private pass.")
        if self.sampling != "decoupled":
            raise ValueError("banded noise samples the private batch cyclically; it needs the "
                             "decoupled scheme (an independent public draw), not 'coupled'.")
        if self.bands > self.steps:
            raise ValueError(f"bands = {self.bands} exceeds the planned steps ({self.steps}).")
        bandmf.require_jax_privacy()  # before any data is read: the strategy needs it
        if self.bands * self.batch_size >= self.num_examples:
            raise ValueError(
                f"bands × B = {self.bands} × {self.batch_size} must be below N = "
                f"{self.num_examples}: each cyclic group of N / bands videos is sampled at rate "
                "bands × B / N, which must be < 1. Use fewer bands or a smaller batch.")

    @property
    def banded(self) -> bool:
        """Whether the private pass adds banded correlated noise (:mod:`maskdp_jax.core.bandmf`)."""
        return self.noise == "banded"

    def accounted(self, ledger: accounting.Ledger) -> accounting.Ledger:
        """The ledger the accountant composes for the executed steps in ``ledger``: itself for
        independent noise; for banded noise each segment of steps becomes the amplified BandMF
        segment (rate ``bands q``, ``ceil(steps / bands)`` rounds,
        :func:`maskdp_jax.accounting.events.banded_segment`). Segments convert one by one, so a
        history in several segments is charged at least the rounds of one (never fewer)."""
        if not self.banded:
            return ledger
        return accounting.Ledger([
            events.banded_segment(q=seg.q, noise_multiplier=seg.noise_multiplier,
                                  steps=seg.steps, bands=self.bands)
            for seg in ledger.segments])

    # ------------------------------------------------------------------------------------------
    @classmethod
    def calibrate(
        cls, *, mode: Mode | str, num_examples: int, batch_size: int, l2_clip_norm: float,
        delta: float, epochs: float | None = None, steps: int | None = None,
        adjacency: inputs.Adjacency | str = inputs.Adjacency.SPECIAL,
        sampling: inputs.Sampling | str = inputs.Sampling.DECOUPLED,
        accountant: inputs.Accountant | str = inputs.Accountant.PLD,
        target_epsilon: float | None = None, noise_multiplier: float | None = None,
        noise: Noise | str = Noise.INDEPENDENT, bands: int = 1,
    ) -> PrivacyPlan:
        """The plan of a run: steps from the epochs, σ given or calibrated to ``target_epsilon``.

        Args:
          mode: a :class:`Mode` (or its value: ``"maskdp"``, ``"dp"``, ``"public_only"``,
            ``"nonprivate"``); every choice below takes its enum or the enum's value.
          num_examples: N, training videos.
          batch_size: B, expected batch size (``q = B / N``).
          epochs: planned epochs (:func:`maskdp_jax.accounting.steps_for_epochs`), or
          steps: planned logical steps; exactly one of the two.
          l2_clip_norm: C.
          delta: δ (refused unless ``0 < δ < 1/N`` in private modes).
          adjacency / accountant: as :class:`PrivacyPlan`.
          sampling: the *requested* scheme (``config.sampling``); the plan holds the effective
            one.
          target_epsilon: calibrate σ to reach this ε at δ over the planned steps
            (smallest such σ, :func:`maskdp_jax.accounting.calibrate_noise_multiplier`).
          noise_multiplier: σ >= 0 given directly (then no ε target is enforced). Exactly one of
            the two in private modes; neither without a private pass.
          noise / bands: :class:`~maskdp_jax.core.plan.Noise`: ``"independent"`` (DP-SGD) or
            ``"banded"`` correlated noise with ``bands`` bands (:mod:`maskdp_jax.core.bandmf`:
            cyclic Poisson sampling of the private pass, σ calibrated for rate ``bands q`` over
            ``ceil(steps / bands)`` rounds).

        Raises:
          ValueError: invalid numbers (δ >= 1/N, q >= 1, ...) or an unreachable ε target.
        """
        mode = Mode(mode)
        if (epochs is None) == (steps is None):
            raise ValueError("give exactly one of epochs and steps (the planned length).")
        if steps is None:
            steps = accounting.steps_for_epochs(num_examples=num_examples,
                                                batch_size=batch_size, epochs=epochs)
        scheme = mode.sampling_scheme(sampling)
        common = dict(mode=mode, num_examples=num_examples, batch_size=batch_size, steps=steps,
                      l2_clip_norm=float(l2_clip_norm), delta=float(delta), adjacency=adjacency,
                      sampling=scheme, accountant=accountant, noise=noise, bands=bands)
        if not mode.is_private:
            return cls(noise_multiplier=0.0, **common)
        if (target_epsilon is None) == (noise_multiplier is None):
            raise ValueError("give exactly one of target_epsilon (calibrate σ) and "
                             "noise_multiplier (fixed σ).")
        if noise_multiplier is not None:
            return cls(noise_multiplier=float(noise_multiplier), **common)
        # Validate everything the accountant does not (C, N, B) before the costly search.
        cls(noise_multiplier=1.0, target_epsilon=float(target_epsilon), **common)
        accounted = events.banded_segment(q=batch_size / num_examples, noise_multiplier=1.0,
                                          steps=steps, bands=bands)
        sigma = accounting.calibrate_noise_multiplier(
            target_epsilon=target_epsilon, delta=delta, q=accounted.q,
            steps=accounted.steps, method=accountant, adjacency=adjacency, sampling=scheme,
            num_examples=num_examples,
        )
        return cls(noise_multiplier=sigma, target_epsilon=float(target_epsilon), **common)

    # ------------------------------------------------------------------------------------------
    @property
    def q(self) -> float:
        """Poisson sampling rate ``B / N`` of both draws."""
        return self.batch_size / self.num_examples

    def dp_event(self, steps: int | None = None) -> dp_event.DpEvent:
        """The dp-accounting event of ``steps`` (default: the planned) steps of this plan.

        Decoupled: ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), steps)``;
        the public pass adds nothing (its batch is independent of the private one). Nonprivate:
        ``NonPrivateDpEvent``. Public-only: ``NoOpDpEvent`` (ε = 0). Coupled sampling has no
        dp-accounting event (the revealed-sample bound is :mod:`maskdp_jax.accounting.coupled`):
        refused.
        """
        steps = self.steps if steps is None else inputs.check_steps(steps, minimum=0)
        if not self.mode.is_private:
            return (dp_event.NoOpDpEvent() if self.mode.fixed_epsilon == 0
                    else dp_event.NonPrivateDpEvent())
        if self.sampling == "coupled":
            raise ValueError("coupled sampling has no dp-accounting event; its ε comes from the "
                             "revealed-sample bound (accounting.coupled).")
        seg = events.banded_segment(q=self.q, noise_multiplier=self.noise_multiplier,
                                    steps=max(steps, 1), bands=self.bands)
        return dp_event.SelfComposedDpEvent(
            events.step_event(q=seg.q, noise_multiplier=seg.noise_multiplier),
            seg.steps if steps else 0)

    def record_step(self, ledger: accounting.Ledger, *, steps: int = 1) -> None:
        """Add ``steps`` (default one) executed logical steps of this plan to ``ledger``.

        Low level: nothing stops a caller from recording more steps than planned, or none. A
        :class:`maskdp_jax.core.mechanism.Mechanism` charges every noisy step itself.
        """
        ledger.record(q=self.q, noise_multiplier=self.noise_multiplier, steps=steps)

    def epsilon(self, ledger: accounting.Ledger, *, method: str | None = None,
                delta: float | None = None) -> float:
        """ε of the steps in ``ledger`` under this plan's adjacency and sampling.

        Args:
          ledger: the executed steps.
          method: ``"pld"`` / ``"rdp"``; default the plan's accountant. Without a private pass
            ε is :attr:`Mode.fixed_epsilon`.
          delta: the δ to state ε at; default the plan's. Refused unless ``0 < δ < 1/N`` (the
            plan's own rule, :func:`maskdp_jax.accounting.inputs.check_delta`).
        """
        if not self.mode.is_private:
            return self.mode.fixed_epsilon
        if delta is None:
            delta = self.delta
        else:
            inputs.check_delta(delta=delta, num_examples=self.num_examples)
        return self.accounted(ledger).epsilon(
            delta=float(delta), method=method or self.accountant, adjacency=self.adjacency,
            sampling=self.sampling)

    def epsilon_after_plan(self, ledger: accounting.Ledger) -> float:
        """ε once the steps still planned after ``ledger`` have run (the ledger's history plus
        ``steps - ledger.steps`` steps of this plan), by the plan's accountant."""
        planned = accounting.Ledger(ledger.segments)
        if self.steps > ledger.steps:
            planned.record(q=self.q, noise_multiplier=self.noise_multiplier,
                           steps=self.steps - ledger.steps)
        return self.epsilon(planned)

    def accounting_meta(self) -> dict[str, Any]:
        """How a ledger of this plan is accounted (δ, adjacency, sampling, mode): stored with
        the journal, so that its readers can recompute ε."""
        meta = {"delta": self.delta, "adjacency": self.adjacency, "sampling": self.sampling,
                "mode": self.mode.value}
        if self.banded:  # only then: journals of independent-noise runs stay as they were
            meta.update(noise=self.noise, bands=self.bands)
        return meta

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields plus ``q`` (for reports)."""
        out = dataclasses.asdict(self)
        out["mode"] = self.mode.value
        out["q"] = self.q
        return out

    def summary(self) -> str:
        """One line for people: mode, N, B, q, steps, σ, C."""
        noise = f", banded noise ({self.bands} bands)" if self.banded else ""
        return (f"Mode {self.mode.value}: N={self.num_examples}, B={self.batch_size}, "
                f"q={self.q:.5f}, steps={self.steps}, noise multiplier σ="
                f"{self.noise_multiplier:.4f}, C={self.l2_clip_norm}{noise}.")
