"""MaskDP in your own training loop: the DP core of MaskDP-SGD and its public API.

``import maskdp_jax as mdp`` gives everything a training loop needs, without the run layer or
``ml_collections`` (docs/api.md is the guide)::

    plan = mdp.PrivacyPlan.calibrate(mode="maskdp", num_examples=N, batch_size=B, epochs=E,
                                     l2_clip_norm=1.0, delta=1e-5, target_epsilon=1.0)
    mech = mdp.Mechanism(plan=plan, randomness=mdp.Randomness(
        mode="secret", seed=0, secret=mdp.draw_secret()))
    state = mech.init()
    for _ in range(plan.steps):                 # one more raises: the plan is spent
        drawn = mech.batch(state)               # this step's draws, by the plan's scheme
        grad, state, stats = mech.gradient(loss_fn, params, state, public=examples(drawn.public),
                                           private=examples(drawn.private), tokens=tokens)
        ...  # optax update
    print(mech.epsilon(state))                  # the steps charged, at the plan's δ or any other

The API, by task:

* the plan: :class:`PrivacyPlan` (``calibrate`` for a target ε or a given σ), and the choices
  it is made of: :class:`Mode`, :class:`Sampling`, :class:`Adjacency`, :class:`Accountant`;
* the private step: :class:`Mechanism` (the plan with its noise stream, sampler and ledger:
  ``init``, ``batch``, ``gradient``, ``epsilon``, ``replan``), :class:`MechanismState`,
  :class:`PlanExhausted`. What a training loop should use; the pieces below are for
  researchers, and each says what its caller then owns;
* views: :class:`Tokenizer` (video ``(st, sh, sw)`` or image ``(sh, sw)`` cells),
  :func:`tokenizer_for` (from a model's declared ``patch_stride``/``patch_size``), :class:`Views`;
* the gradient: :func:`masked_gradient` (one call), or its pieces :func:`public_grad_sum`,
  :func:`clipped_grad_sum` and :func:`noisy_gradient` for several physical batches per step
  (:func:`pass_gradient`: one pass over one physical batch, what both :func:`masked_gradient`
  and :func:`make_train_step` are built from);
  :class:`Examples`, :class:`GradStats`, :class:`ClipStats`;
* batches: :class:`PoissonSampler` (public and private draws), :class:`LogicalBatch`,
  :func:`physical_batches` (fixed-size batches with weight-0 padding), :func:`padded_indices`
  (a whole logical batch padded to a multiple of a size);
* randomness: :class:`Randomness`, :class:`RandomnessMode` and :func:`draw_secret` (the secret
  noise key and sampler seeds);
* a whole step for a model ``apply_fn(params, x) -> logits`` (what ``train.py`` runs):
  :func:`make_train_step`, :class:`TrainState`, :class:`LogicalBatchData`, :class:`PixelViews`;
  data parallelism over a mesh, several hosts: :mod:`maskdp_jax.parallel`;
* accounting: :class:`Ledger` and :meth:`PrivacyPlan.epsilon`, :func:`epsilon`,
  :func:`calibrate_noise_multiplier` (dp-accounting's RDP and PLD with the masked adjacencies).

The package is the project's one import root. Beside the DP core below it holds
:mod:`maskdp_jax.models`, :mod:`maskdp_jax.data`, :mod:`maskdp_jax.accounting` and
``maskdp_jax.configs`` (installed from the repository's ``models/``, ``data/``,
``accounting/`` and ``configs/``), the run layer :mod:`maskdp_jax.run`, :mod:`maskdp_jax.reporting`,
the product parts (:mod:`maskdp_jax.audit`, :mod:`maskdp_jax.release`,
:mod:`maskdp_jax.anonymize`) and the commands (``python -m maskdp_jax.train``, ``sweep``,
``prepare``, ``export``, ``convert``, ``paper_tables``). The names above are bound on first use,
so ``import maskdp_jax`` alone, or a subpackage that needs no JAX, does not import it.

The modules:

No IO, no plots, no config dicts: every function takes typed keyword arguments and the modules
import only jax/flax/optax/einops/numpy, :mod:`maskdp_jax.accounting` (a library of the same
layer) and each other; never :mod:`maskdp_jax.data`, :mod:`maskdp_jax.models`, the run layer or
the reporting layer.

* :mod:`maskdp_jax.plan`: :class:`~maskdp_jax.plan.Mode` and the run's
  :class:`~maskdp_jax.plan.PrivacyPlan` (mode, adjacency, effective sampling scheme, q, steps, δ,
  C, σ, accountant), built and validated once, read by the step, the guard and the report.
* :mod:`maskdp_jax.tokenizer`: pixel masks -> token cells -> public and private views (cell
  geometry and the degenerate-mask check live here only).
* :mod:`maskdp_jax.gradient`: the masked gradient of one logical batch for any model and loop
  (public sum, the noise once, the division by B), what the step is built from.
* :mod:`maskdp_jax.mechanism`: the plan with its noise stream, sampler and ledger (the library's
  private step).
* :mod:`maskdp_jax.clipping` (per-example clipped gradient sum), :mod:`maskdp_jax.noise`
  (Gaussian noise on the clipped sum), :mod:`maskdp_jax.bandmf` (banded correlated noise and
  its accounting; not yet a plan option), :mod:`maskdp_jax.sampling` (Poisson sampler, physical
  batches), :mod:`maskdp_jax.randomness` (the secret or seeded noise key and batch seeds).
* :mod:`maskdp_jax.train_step`: ``train_step(state, batch) -> (state, metrics)`` on a
  :class:`Mechanism` (its ``accumulate`` per physical batch, its ``finish`` per logical step; the
  state carries the mechanism's state), one code path for every mode.
* :mod:`maskdp_jax.partition` (trainable / frozen split), :mod:`maskdp_jax.parallel` (data
  parallelism over a device mesh, several hosts).
* :mod:`maskdp_jax.compilation`: the XLA compile options of the step's programs and the ``jit``
  that applies them (also used by the audit's shadow models).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# ``maskdp_jax`` is also the import root of the models, the data, the run layer and the commands,
# so the API below is bound on first use (PEP 562) instead of at ``import maskdp_jax``: importing
# a subpackage (``maskdp_jax.accounting``, ``maskdp_jax.configs``) does not pay for JAX and the DP
# core. No library does this for a handful of names; ``TYPE_CHECKING`` gives type checkers and
# IDEs the same names eagerly.
_EXPORTS = {
    "Accountant": "maskdp_jax.accounting",
    "Adjacency": "maskdp_jax.accounting",
    "RandomnessMode": "maskdp_jax.randomness",
    "Sampling": "maskdp_jax.accounting",
    "calibrate_noise_multiplier": "maskdp_jax.accounting",
    "clipped_grad_sum": "maskdp_jax.clipping",
    "ClipStats": "maskdp_jax.clipping",
    "draw_secret": "maskdp_jax.randomness",
    "epsilon": "maskdp_jax.accounting",
    "Examples": "maskdp_jax.gradient",
    "GradStats": "maskdp_jax.gradient",
    "Ledger": "maskdp_jax.accounting",
    "LogicalBatch": "maskdp_jax.sampling",
    "LogicalBatchData": "maskdp_jax.train_step",
    "make_train_step": "maskdp_jax.train_step",
    "masked_gradient": "maskdp_jax.gradient",
    "Mechanism": "maskdp_jax.mechanism",
    "MechanismState": "maskdp_jax.mechanism",
    "Mode": "maskdp_jax.plan",
    "noisy_gradient": "maskdp_jax.gradient",
    "padded_indices": "maskdp_jax.sampling",
    "pass_examples": "maskdp_jax.gradient",
    "pass_gradient": "maskdp_jax.gradient",
    "pass_view": "maskdp_jax.gradient",
    "physical_batches": "maskdp_jax.sampling",
    "PixelViews": "maskdp_jax.train_step",
    "PlanExhausted": "maskdp_jax.mechanism",
    "PoissonSampler": "maskdp_jax.sampling",
    "PrivacyPlan": "maskdp_jax.plan",
    "PRIVATE_STREAM": "maskdp_jax.sampling",
    "public_grad_sum": "maskdp_jax.gradient",
    "PUBLIC_STREAM": "maskdp_jax.sampling",
    "Randomness": "maskdp_jax.randomness",
    "Tokenizer": "maskdp_jax.tokenizer",
    "tokenizer_for": "maskdp_jax.tokenizer",
    "TrainState": "maskdp_jax.train_step",
    "ViewFn": "maskdp_jax.train_step",
    "Views": "maskdp_jax.tokenizer",
    "warn_degenerate_masks": "maskdp_jax.tokenizer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'maskdp_jax' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from maskdp_jax.accounting import (  # noqa: F401
        Accountant,
        Adjacency,
        Ledger,
        Sampling,
        calibrate_noise_multiplier,
        epsilon,
    )
    from maskdp_jax.clipping import ClipStats, clipped_grad_sum  # noqa: F401
    from maskdp_jax.gradient import (  # noqa: F401
        Examples,
        GradStats,
        masked_gradient,
        noisy_gradient,
        pass_examples,
        pass_gradient,
        pass_view,
        public_grad_sum,
    )
    from maskdp_jax.mechanism import Mechanism, MechanismState, PlanExhausted  # noqa: F401
    from maskdp_jax.plan import Mode, PrivacyPlan  # noqa: F401
    from maskdp_jax.randomness import Randomness, RandomnessMode, draw_secret  # noqa: F401
    from maskdp_jax.sampling import (  # noqa: F401
        PRIVATE_STREAM,
        PUBLIC_STREAM,
        LogicalBatch,
        PoissonSampler,
        padded_indices,
        physical_batches,
    )
    from maskdp_jax.tokenizer import (  # noqa: F401
        Tokenizer,
        Views,
        tokenizer_for,
        warn_degenerate_masks,
    )
    from maskdp_jax.train_step import (  # noqa: F401
        LogicalBatchData,
        PixelViews,
        TrainState,
        ViewFn,
        make_train_step,
    )
