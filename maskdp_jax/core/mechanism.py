"""The private step as one object: a plan with its noise stream, its sampler and its ledger.

A DP-SGD guarantee holds only if four things agree: the noise is fresh at every step, the batches
are drawn by the scheme the accountant composes, every noisy step is charged, and no step runs
past the plan that set σ. The low-level pieces (:func:`~maskdp_jax.core.gradient.masked_gradient`,
:class:`~maskdp_jax.core.sampling.PoissonSampler`,
:meth:`~maskdp_jax.core.plan.PrivacyPlan.record_step`) leave each of these to the caller. A
:class:`Mechanism` owns them:

* **the noise stream**: the base key lives in :class:`MechanismState` with the step counter, and
  :meth:`Mechanism.gradient` folds the counter in (:func:`maskdp_jax.core.noise.step_key`, the same
  derivation as ``train.py``'s step), so the caller never handles a per-step key;
* **the sampler**: :meth:`Mechanism.batch` draws the state's step with the plan's own scheme
  (the scheme is given once, to :meth:`~maskdp_jax.core.plan.PrivacyPlan.calibrate`);
* **the ledger**: the call that adds the noise advances the counter, and the counter is the
  ledger (:meth:`Mechanism.ledger`, :meth:`Mechanism.epsilon` at any δ);
* **the plan's end**: drawing or stepping past the planned steps raises :class:`PlanExhausted`
  (inside ``jit`` when the step runs: the call fails with it), unless the caller re-plans
  explicitly (:meth:`Mechanism.replan`, whose ledger keeps the earlier steps).

Shaped like jax_privacy's privatizer (an optax-style transformation whose state carries the noise
key), but for the whole masked step: jax_privacy's noise transform neither draws the batches nor
charges an accountant, and it cannot leave part of each input unprotected.

Why the key is state and not a constant: a function that closes over a key array compiles it
into the program, and the persistent compilation cache would then keep the secret on disk.

>>> import jax, jax.numpy as jnp, numpy as np
>>> from maskdp_jax.core.plan import PrivacyPlan
>>> from maskdp_jax.core.randomness import Randomness
>>> plan = PrivacyPlan.calibrate(mode="dp", num_examples=1000, batch_size=10, steps=2,
...     l2_clip_norm=1.0, delta=1e-5, noise_multiplier=1.0)
>>> mech = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=0))
>>> state = mech.init()
>>> for _ in range(plan.steps):
...     drawn = mech.batch(state)
...     x = jnp.ones((len(drawn.private), 3))
...     grad, state, _ = mech.gradient(lambda w, x, y: jnp.sum(w * x), jnp.zeros(3), state,
...         private=Examples(inputs=x, targets=jnp.zeros(len(x))))
>>> int(state.step), round(mech.epsilon(state), 3)
(2, 0.245)
>>> mech.batch(state)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
maskdp_jax.core.mechanism.PlanExhausted: step 2 is past the plan (steps 0 to 1 of 2): ...
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import maskdp_jax.accounting as accounting
from maskdp_jax.accounting import events
from maskdp_jax.core import bandmf, clipping, gradient, noise
from maskdp_jax.core import per_pass as per_pass_lib
from maskdp_jax.core.gradient import ExampleLoss, Examples, GradStats
from maskdp_jax.core.plan import Mode, PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.sampling import LogicalBatch, PoissonSampler
from maskdp_jax.core.tokenizer import Tokenizer

PyTree = Any

__all__ = ["Examples", "Mechanism", "MechanismState", "PlanExhausted", "Sums"]


class PlanExhausted(ValueError):
    """A batch or a step past the plan's last step (or before its first)."""


class MechanismState(NamedTuple):
    """What a :class:`Mechanism` carries from step to step (a pytree: pass it through ``jit``,
    save it with the model).

    Its ``repr`` shows the step alone: the key and the past noise are secret, and a state that
    reaches a log line, a traceback or a report must not carry them there.

    Attributes:
      step: int32 scalar, the logical steps charged so far (under this plan and earlier ones);
        the next step's noise key and batches are those of this step. The run's one step
        counter: the ledger is this many steps (:meth:`Mechanism.ledger`).
      key: the run's base noise key. **Secret**: whoever holds it can recompute every noise
        vector; keep the state, like the secret it comes from, out of anything published.
      noise: banded noise's :class:`~maskdp_jax.core.bandmf.NoiseState` (past noise: secret too),
        None for independent noise.
    """

    step: jnp.ndarray
    key: jax.Array
    noise: Any = None

    def __repr__(self) -> str:
        return f"MechanismState(step={self.step!r}, key=<secret>, noise=<secret>)"


class Sums(NamedTuple):
    """One logical step's two sums over its physical batches, before any noise
    (:meth:`Mechanism.accumulate` adds a pass over one physical batch, :meth:`Mechanism.finish`
    noises them once).

    Attributes:
      public: ``sum_i w_i grad L(public view_i)`` (trainable structure; public data).
      private: ``sum_i w_i clip_C(grad L(private view_i))``: clipped, **not private yet**, it
        must go through :meth:`Mechanism.finish` before it leaves.
      stats: the passes' :class:`~maskdp_jax.core.gradient.GradStats` (``stats.clip`` is private
        data).
    """

    public: PyTree
    private: PyTree
    stats: GradStats

    @classmethod
    def zeros(cls, params: PyTree, private_mask: PyTree | None = None) -> Sums:
        """Sums of zeros in the structure of ``params`` (the private sum: of the part the private
        pass trains, ``private_mask`` as :class:`Mechanism`'s), each leaf its own buffer
        (donatable)."""
        zero = jnp.zeros((), jnp.float32)
        private = gradient.private_part(params, private_mask)
        return cls(public=jax.tree.map(jnp.zeros_like, params),
                   private=jax.tree.map(jnp.zeros_like, private),
                   stats=GradStats(zero, zero, clipping.ClipStats.zeros(), zero))


def private_part_problem(mode: Mode | str, *, banded: bool) -> str | None:
    """Why a private pass over part of the parameters (:class:`Mechanism`'s ``private_mask``)
    cannot run in ``mode`` with ``banded`` noise, or None: the rule the mechanism and the run
    config (``privacy.private_finetune``) both apply."""
    mode = Mode(mode)
    if mode is not Mode.MASKDP:
        return (f"trains a part of the parameters on the private views, which is MaskDP's (its "
                f"public pass trains the rest); mode {mode.value!r} has not both passes: choose "
                "the trained parameters with the fine-tuning strategy.")
    if banded:
        return ("needs independent noise (banded noise keeps past noise of every trainable "
                "parameter).")
    return None


def public_weight_problem(mode: Mode | str, public_weight: float) -> str | None:
    """Why ``public_weight`` (:class:`Mechanism`'s λ) cannot be used in ``mode``, or None: the
    rule the mechanism and the run config (``privacy.public_weight``) both apply."""
    if public_weight == 1.0:
        return None
    if Mode(mode) is not Mode.MASKDP:
        return (f"weighs MaskDP's public pass against its private pass; mode "
                f"{Mode(mode).value!r} has not both: leave it at 1.")
    if not (math.isfinite(public_weight) and public_weight > 0):
        return f"must be a finite number > 0 (1: the public sum as it is); got {public_weight!r}."
    return None


def per_pass_problem(mode: Mode | str, per_pass: bool) -> str | None:
    """Why a per-pass split (:class:`Mechanism`'s ``per_pass``) cannot be used in ``mode``, or
    None: the rule the mechanism and the run config (``optimizer.private_learning_rate``) both
    apply."""
    if per_pass and Mode(mode) is not Mode.MASKDP:
        return (f"gives MaskDP's public and private passes an optimiser each; mode "
                f"{Mode(mode).value!r} has not both passes: use one optimiser.")
    return None


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """A plan, the run's randomness and the steps already charged: the private step's owner.

    Attributes:
      plan: the :class:`~maskdp_jax.core.plan.PrivacyPlan` (mode, σ, C, B, sampling scheme, steps).
      randomness: the :class:`~maskdp_jax.core.randomness.Randomness` of the run (``secret`` for a
        real guarantee): the noise stream and both Poisson streams.
      history: the ledger segments charged under earlier plans (:meth:`replan` fills it); the
        plan's steps follow them.
      private_mask: ``maskdp`` only: the private pass trains just these parameters (a tree of
        booleans in the structure of the trainable parameters; True: trained on the private
        views), while the public pass trains them all. The private pass's clipped sum, hence C
        and the noise, then cover those leaves alone: the others are updated from public views
        only and get no noise. The guarantee is unchanged (the same clipped sum, the same σ),
        over fewer dimensions. None: the private pass trains every trainable parameter.
      public_weight: ``maskdp`` only: λ > 0, the weight of the public pass's sum in the step,
        ``(λ · public sum + clipped private sum + noise) / B``. The public sum is unclipped, so
        its scale is the loss's while each private gradient is clipped to C: λ sets how loud
        the private pass is next to the public one (a public gradient many times C drowns the
        private signal under an optimiser that normalises the update). Not a privacy
        parameter: it scales a function of public data only, after the private sum and its
        noise are fixed, so C, σ and ε are unchanged. 1: the papers' sum.
      per_pass: ``maskdp`` only: :meth:`finish` returns the step's direction in its two parts,
        :class:`~maskdp_jax.core.per_pass.PassGradients` (``λ · public sum / B`` and ``(clipped
        private sum + noise) / B``), for an optimiser per pass
        (:func:`~maskdp_jax.core.per_pass.per_pass`); False: their sum, for one optimiser.
        Not a privacy parameter: the same release, handed over in two parts.
    """

    plan: PrivacyPlan
    randomness: Randomness = dataclasses.field(repr=False)
    history: tuple[events.Segment, ...] = ()
    private_mask: Any = dataclasses.field(default=None, repr=False)
    public_weight: float = 1.0
    per_pass: bool = False

    def __post_init__(self):
        if not isinstance(self.plan, PrivacyPlan):
            raise TypeError(f"plan must be a PrivacyPlan (PrivacyPlan.calibrate); got "
                            f"{type(self.plan).__name__}.")
        if not isinstance(self.randomness, Randomness):
            raise TypeError("randomness must be a maskdp_jax.Randomness (e.g. Randomness("
                            "mode='secret', seed=0, secret=draw_secret())); got "
                            f"{type(self.randomness).__name__}.")
        object.__setattr__(self, "history", tuple(accounting.Ledger(self.history).segments))
        # Steps whose noise an eager gradient call has released: a second call with the same
        # state would add the same noise to another gradient, and the difference of the two
        # releases would carry none (the ledger charges the step once).
        object.__setattr__(self, "_released", set())
        if self.private_mask is not None:
            problem = private_part_problem(self.plan.mode, banded=self.plan.banded)
            if problem:
                raise ValueError(f"private_mask {problem}")
            if not any(jax.tree.leaves(self.private_mask)):
                raise ValueError("private_mask selects no parameter: the private pass would "
                                 "train nothing (use mode='public_only').")
        problem = public_weight_problem(self.plan.mode, self.public_weight)
        if problem:
            raise ValueError(f"public_weight {problem}")
        problem = per_pass_problem(self.plan.mode, self.per_pass)
        if problem:
            raise ValueError(f"per_pass {problem}")
        if self.plan.banded and self.history:
            raise ValueError("a banded plan accounts its own steps as BandMF rounds; it cannot "
                             "follow a history of other steps (plan all the steps at the start).")

    # ------------------------------------------------------------------------------------------
    @property
    def first_step(self) -> int:
        """The plan's first step: the steps charged under earlier plans."""
        return sum(segment.steps for segment in self.history)

    @property
    def end_step(self) -> int:
        """One past the plan's last step."""
        return self.first_step + self.plan.steps

    @functools.cached_property
    def sampler(self) -> PoissonSampler:
        """The run's Poisson sampler (low level: :meth:`batch` is the checked draw)."""
        return self.randomness.sampler(num_examples=self.plan.num_examples,
                                       expected_batch_size=self.plan.batch_size,
                                       cycle_length=self.plan.bands)

    def init(self, params: PyTree = None) -> MechanismState:
        """The state before the plan's first step (the base key derived from the randomness).

        Args:
          params: the trainable parameters (their shapes), needed by banded noise only, whose
            state holds past noise of that size.
        """
        if self.plan.banded and params is None:
            raise ValueError("banded noise keeps past noise of the parameters' size: "
                             "mech.init(params).")
        return MechanismState(step=jnp.asarray(self.first_step, jnp.int32),
                              key=self.randomness.noise_key(),
                              noise=bandmf.initial_state(self.plan, params))

    def check_step(self, step: int, *, taken: bool = False) -> int:
        """``step`` if the plan covers it: the budget rule, the one place it is written.

        Args:
          step: the step about to run; with ``taken``, the number of steps already run (a
            state's counter, a checkpoint's step), which may be the plan's end.

        Raises:
          PlanExhausted: ``step`` is past the plan (or before its first step): its ε would
            exceed what the plan promised.
        """
        step = int(step)
        if not self.first_step <= step < self.end_step + int(taken):
            raise PlanExhausted(
                f"step {step} is past the plan (steps {self.first_step} to {self.end_step - 1} "
                f"of {self.end_step}): its ε would exceed what the plan promised. Re-plan "
                "explicitly, mech = mech.replan(state, plan=PrivacyPlan.calibrate(...)), whose "
                "ledger keeps the steps already taken; a training run starts a new run with a "
                "new budget (new --workdir).")
        return step

    # ------------------------------------------------------------------------------------------
    def batch(self, state: MechanismState) -> LogicalBatch:
        """The Poisson draws of the state's step, by the plan's scheme (host side):
        :meth:`batch_at` of ``state.step``."""
        return self.batch_at(int(state.step))

    def batch_at(self, step: int) -> LogicalBatch:
        """The Poisson draws of ``step``, by the plan's scheme (host side; a pure function of the
        step, so a loader may draw steps ahead).

        ``public`` is None in ``dp`` and ``private`` None in ``nonprivate`` (give that pass as
        None to :meth:`gradient`). Neither is ever truncated: pad them with
        :func:`~maskdp_jax.core.sampling.padded_indices`.

        Raises:
          PlanExhausted: ``step`` is past the plan.
        """
        return self.sampler.logical_batch(self.check_step(step), mode=self.plan.mode,
                                          sampling=self.plan.sampling)

    def gradient(
        self, loss_fn: ExampleLoss, params: PyTree, state: MechanismState, *,
        public: Examples | None = None, private: Examples | None = None,
        tokens: Tokenizer | None = None, axis_name: str | None = None,
        microbatch_size: int | None = None, ghost_rules: Any = None,
    ) -> tuple[PyTree, MechanismState, GradStats]:
        """The noisy gradient of the state's step, and the state that charges it.

        :func:`~maskdp_jax.core.gradient.masked_gradient` with this step's noise key
        (:func:`maskdp_jax.core.noise.step_key` of the state's base key and counter); the returned
        state's counter is one higher, so the next call adds fresh noise and :meth:`epsilon`
        counts this step. Works eagerly and inside the caller's ``jit`` and ``shard_map``
        (arguments as :func:`~maskdp_jax.core.gradient.masked_gradient`).

        Returns:
          ``(grad, state, stats)`` (the grad as :meth:`finish`'s).

        Raises:
          PlanExhausted: the state's step is past the plan: eagerly at the call; inside ``jit``
            when the step runs (the call then fails with a runtime error that carries it).
          ValueError: (eagerly) a state whose step's noise this mechanism already released: a
            retry or a loop that does not rebind ``state`` would add the same noise twice.
        """
        public_sum, private_sum, stats = gradient.masked_sums(
            loss_fn, params, plan=self.plan, public=public, private=private, tokens=tokens,
            axis_name=axis_name, microbatch_size=microbatch_size, ghost_rules=ghost_rules,
            private_mask=self.private_mask)
        if isinstance(state.step, jax.core.Tracer):
            # Inside the caller's jit the counter is traced: the budget rule runs on the host
            # when the step executes, and a step past the plan fails the call with its
            # PlanExhausted (eagerly, finish checks it; the trainer's batches are drawn by
            # batch_at, which refuses that step before).
            jax.debug.callback(self._check_traced_step, state.step)
        grad, state = self.finish(Sums(public_sum, private_sum, stats), state)
        return grad, state, stats

    def _check_traced_step(self, step) -> None:
        """:meth:`check_step` of a counter that was traced (one per model under ``vmap``)."""
        for s in np.ravel(np.asarray(step)):
            self.check_step(int(s))

    def with_private_mask(self, private_mask: PyTree | None) -> Mechanism:
        """This mechanism (plan, randomness, history) with its private pass over
        ``private_mask``'s parameters (None: all)."""
        return self._with(private_mask=private_mask)

    def with_public_weight(self, public_weight: float) -> Mechanism:
        """This mechanism with the public sum weighted by ``public_weight`` (λ, the class
        docstring; 1: unweighted)."""
        return self._with(public_weight=float(public_weight))

    def with_per_pass(self, per_pass: bool) -> Mechanism:
        """This mechanism with :meth:`finish` returning each pass's part apart (``per_pass``,
        the class docstring) or their sum."""
        return self._with(per_pass=bool(per_pass))

    def _with(self, **changes) -> Mechanism:
        """This mechanism with ``changes``, sharing its record of the steps whose noise an eager
        call released: the same noise stream, so a released step stays released."""
        changed = dataclasses.replace(self, **changes)
        object.__setattr__(changed, "_released", self._released)
        return changed

    def zeros(self, params: PyTree) -> Sums:
        """The step's :class:`~maskdp_jax.core.mechanism.Sums` before its first pass, for
        ``params`` (the trainable parameters) and this mechanism's ``private_mask``."""
        return Sums.zeros(params, self.private_mask)

    def accumulate(
        self, sums: Sums, loss_fn: Any, params: PyTree, examples: Any, weights: jnp.ndarray, *,
        public: bool, microbatch_size: int | None = None, ghost_rules: Any = None,
    ) -> Sums:
        """``sums`` plus one pass over one physical batch (what a step with several physical
        batches per logical batch calls once per batch and pass, then :meth:`finish` once).

        ``public=True`` adds the unclipped gradient sum (public views only, or whole videos in
        ``nonprivate``); ``public=False`` the per-example clipped sum at the plan's C (private
        views, or whole videos in ``dp``): :func:`~maskdp_jax.core.gradient.pass_gradient`.

        Args:
          sums: the step's :class:`~maskdp_jax.core.mechanism.Sums` so far
            (:meth:`zeros` before the first batch).
          loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
          params: the trainable parameters.
          examples: pytree of ``[P, ...]``: what this pass may see.
          weights: ``[P]`` in {0, 1} (0: padding, or no cell of this pass's part).
          public: which pass.
          microbatch_size / ghost_rules: how the private pass gets per-example norms (same sum).

        Raises:
          ValueError: a pass the plan's mode does not have.
        """
        has = self.plan.mode.has_public_pass if public else self.plan.mode.has_private_pass
        if not has:
            raise ValueError(f"mode {self.plan.mode.value!r} has no "
                             f"{'public' if public else 'private'} pass.")
        grads, stats = gradient.pass_gradient(
            loss_fn, params, examples, weights, public=public, plan=self.plan,
            microbatch_size=microbatch_size, ghost_rules=ghost_rules,
            private_mask=None if public else self.private_mask)
        field = "public" if public else "private"
        return sums._replace(**{field: jax.tree.map(jnp.add, getattr(sums, field), grads)},
                             stats=jax.tree.map(jnp.add, sums.stats, stats))

    def finish(self, sums: Sums, state: MechanismState) -> tuple[PyTree, MechanismState]:
        """The noisy gradient of the state's step from its sums, and the state that charges it.

        Noise ``N(0, σ²C²)`` (or the banded noise) drawn once from this step's key
        (:func:`maskdp_jax.core.noise.step_key` of the state's base key and counter: the only place
        a step's key is derived), added to the private sum, the public sum added (with
        ``per_pass``: kept apart), the whole divided by the expected batch size B. The returned
        state's counter is one higher, so the next call adds fresh noise and :meth:`epsilon`
        counts this step. Eagerly and inside ``jit`` (and ``shard_map``, with the sums already
        all-reduced and the state replicated).

        Returns:
          ``(grad, state)``; with ``per_pass`` the grad is its
          :class:`~maskdp_jax.core.per_pass.PassGradients`. A step past the plan is refused
          eagerly here and on the host by :meth:`batch_at` (whose batches a loop needs anyway);
          inside ``jit`` nothing here can refuse it (:meth:`gradient` checks the traced step on
          the host when it runs).

        Raises:
          PlanExhausted: (eagerly) the state's step is past the plan.
          ValueError: (eagerly) a state whose step's noise this mechanism already released: a
            retry or a loop that does not rebind ``state`` would add the same noise twice.
        """
        mode = self.plan.mode
        if not isinstance(state.step, jax.core.Tracer):
            step = self.check_step(state.step)
            if step in self._released and mode.is_private:
                raise ValueError(
                    f"the noise of step {step} was already used by an earlier gradient call: "
                    "pass the state that call returned (grad, state, stats = mech.gradient(..., "
                    "state, ...)). Reusing a state adds the same noise to a second gradient, and "
                    "the difference of the two carries none.")
            self._released.add(step)
        public = sums.public if mode.has_public_pass else None
        if self.public_weight != 1.0:  # a static choice: λ = 1 compiles the plain sum
            public = jax.tree.map(lambda g: g * jnp.asarray(self.public_weight, g.dtype), public)
        private = sums.private if mode.has_private_pass else None
        key = noise.step_key(state.key, state.step)
        if self.per_pass:  # the same noise on the same sum; the public part kept apart
            public, noised, noise_state = gradient.noisy_parts(public, private, key, state.noise,
                                                               plan=self.plan)
            grad = per_pass_lib.PassGradients(public=public, private=noised)
        else:
            grad, noise_state = gradient.noisy_update(public, private, key, state.noise,
                                                      plan=self.plan)
        return grad, state._replace(step=state.step + 1, noise=noise_state)

    # ------------------------------------------------------------------------------------------
    def ledger(self, state: MechanismState) -> accounting.Ledger:
        """The steps charged up to ``state``: the history, then this plan's steps."""
        ledger = accounting.Ledger(self.history)
        taken = int(state.step) - self.first_step
        if taken < 0:
            raise PlanExhausted(f"state at step {int(state.step)} is before this plan's first "
                                f"step {self.first_step}: it belongs to another mechanism.")
        if taken:  # every step taken, even one past the plan: never under-count
            self.plan.record_step(ledger, steps=taken)
        return ledger

    def epsilon(self, state: MechanismState, *, delta: float | None = None,
                method: accounting.Accountant | str | None = None) -> float:
        """ε spent up to ``state`` at ``delta`` (default the plan's; any ``0 < δ < 1/N``), by
        ``method`` (an :class:`~maskdp_jax.accounting.Accountant` or its value; default the
        plan's accountant). ∞ in ``nonprivate``."""
        return self.plan.epsilon(self.ledger(state), delta=delta, method=method)

    def replan(self, state: MechanismState, *, plan: PrivacyPlan) -> Mechanism:
        """A mechanism that goes on from ``state`` under ``plan`` (e.g. more steps, another σ):
        its ledger holds every step already charged, so ε composes over both plans.

        Raises:
          ValueError: ``plan`` differs in what the guarantee is about (mode, N, adjacency,
            sampling scheme), or either plan has banded noise (its strategy is fixed for the
            planned steps): its ε could not be composed with the steps taken.
        """
        if self.plan.banded or plan.banded:
            raise ValueError("banded noise's strategy is fixed for the planned steps: a banded "
                             "run cannot be re-planned; plan all its steps at the start.")
        for name in ("mode", "num_examples", "adjacency", "sampling"):
            if getattr(plan, name) != getattr(self.plan, name):
                raise ValueError(f"replan keeps the guarantee's {name} "
                                 f"({getattr(self.plan, name)!r}); the new plan has "
                                 f"{getattr(plan, name)!r}. Start a new mechanism instead "
                                 "(its ε does not compose with this one's).")
        return Mechanism(plan=plan, randomness=self.randomness,
                         history=tuple(self.ledger(state).segments),
                         private_mask=self.private_mask, public_weight=self.public_weight,
                         per_pass=self.per_pass)
