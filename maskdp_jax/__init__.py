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
* the private step, its one public route: :class:`Mechanism` (the plan with its noise stream,
  sampler and ledger: ``init``, ``batch``, ``gradient``, several physical batches per step by
  ``accumulate`` and ``finish``, ``epsilon``, ``replan``), :class:`MechanismState`,
  :class:`PlanExhausted`; what it takes and gives: :class:`Examples`, :class:`GradStats`,
  :class:`ClipStats`. The pieces it is built from (:mod:`maskdp_jax.core.gradient`,
  :mod:`maskdp_jax.core.clipping`, :mod:`maskdp_jax.core.sampling`) are importable there for
  research; each says what its caller then owns (the noise key, the ledger, the plan's end);
* an optimiser per pass: ``Mechanism(..., per_pass=True)`` hands over :class:`PassGradients`,
  :func:`per_pass` routes them to two optax optimisers (the private pass's update no longer
  scaled by the unclipped public gradient; post-processing, ε unchanged);
* views: :class:`Tokenizer` (video ``(st, sh, sw)`` or image ``(sh, sw)`` cells),
  :func:`tokenizer_for` (from a model's declared ``patch_stride``/``patch_size``), :class:`Views`;
* batches: :class:`LogicalBatch` (a step's draws, :meth:`Mechanism.batch`),
  :func:`physical_batches` (fixed-size batches with weight-0 padding), :func:`padded_indices`
  (a whole logical batch padded to a multiple of a size);
* randomness: :class:`Randomness`, :class:`RandomnessMode` and :func:`draw_secret` (the secret
  noise key and sampler seeds);
* a whole step for a model ``apply_fn(params, x) -> logits`` (what ``train.py`` runs):
  :func:`make_train_step`, :class:`TrainState`, :class:`LogicalBatchData`, :class:`PixelViews`;
  data parallelism over a mesh, several hosts: :mod:`maskdp_jax.core.parallel`;
* accounting: :class:`Ledger` and :meth:`PrivacyPlan.epsilon`, :func:`epsilon`,
  :func:`calibrate_noise_multiplier` (dp-accounting's RDP and PLD with the masked adjacencies).

The package is the project's one import root. Beside the DP core (:mod:`maskdp_jax.core`) it
holds :mod:`maskdp_jax.models`, :mod:`maskdp_jax.data`, :mod:`maskdp_jax.accounting` and
``maskdp_jax.configs`` (installed from the repository's ``models/``, ``data/``, ``accounting/``
and ``configs/``), the run layer :mod:`maskdp_jax.run`, :mod:`maskdp_jax.reporting`,
the product parts (:mod:`maskdp_jax.audit`, :mod:`maskdp_jax.release`,
:mod:`maskdp_jax.anonymize`) and the commands (``python -m maskdp_jax.train``, ``sweep``,
``prepare``, ``export``, ``convert``, ``paper_tables``). The names above are bound on first use,
so ``import maskdp_jax`` alone, or a subpackage that needs no JAX, does not import it.

The DP core's modules are :mod:`maskdp_jax.core` (its docstring lists them); the package's
top-level modules are the commands.
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
    "RandomnessMode": "maskdp_jax.core.randomness",
    "Sampling": "maskdp_jax.accounting",
    "calibrate_noise_multiplier": "maskdp_jax.accounting",
    "ClipStats": "maskdp_jax.core.clipping",
    "draw_secret": "maskdp_jax.core.randomness",
    "epsilon": "maskdp_jax.accounting",
    "Examples": "maskdp_jax.core.gradient",
    "GradStats": "maskdp_jax.core.gradient",
    "Ledger": "maskdp_jax.accounting",
    "LogicalBatch": "maskdp_jax.core.sampling",
    "LogicalBatchData": "maskdp_jax.core.train_step",
    "make_train_step": "maskdp_jax.core.train_step",
    "Mechanism": "maskdp_jax.core.mechanism",
    "MechanismState": "maskdp_jax.core.mechanism",
    "Mode": "maskdp_jax.core.plan",
    "padded_indices": "maskdp_jax.core.sampling",
    "PassGradients": "maskdp_jax.core.per_pass",
    "per_pass": "maskdp_jax.core.per_pass",
    "physical_batches": "maskdp_jax.core.sampling",
    "PixelViews": "maskdp_jax.core.train_step",
    "PlanExhausted": "maskdp_jax.core.mechanism",
    "PrivacyPlan": "maskdp_jax.core.plan",
    "Randomness": "maskdp_jax.core.randomness",
    "Tokenizer": "maskdp_jax.core.tokenizer",
    "tokenizer_for": "maskdp_jax.core.tokenizer",
    "TrainState": "maskdp_jax.core.train_step",
    "ViewFn": "maskdp_jax.core.train_step",
    "Views": "maskdp_jax.core.tokenizer",
    "warn_degenerate_masks": "maskdp_jax.core.tokenizer",
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
    from maskdp_jax.core.clipping import ClipStats  # noqa: F401
    from maskdp_jax.core.gradient import Examples, GradStats  # noqa: F401
    from maskdp_jax.core.mechanism import Mechanism, MechanismState, PlanExhausted  # noqa: F401
    from maskdp_jax.core.per_pass import PassGradients, per_pass  # noqa: F401
    from maskdp_jax.core.plan import Mode, PrivacyPlan  # noqa: F401
    from maskdp_jax.core.randomness import Randomness, RandomnessMode, draw_secret  # noqa: F401
    from maskdp_jax.core.sampling import (  # noqa: F401
        LogicalBatch,
        padded_indices,
        physical_batches,
    )
    from maskdp_jax.core.tokenizer import (  # noqa: F401
        Tokenizer,
        Views,
        tokenizer_for,
        warn_degenerate_masks,
    )
    from maskdp_jax.core.train_step import (  # noqa: F401
        LogicalBatchData,
        PixelViews,
        TrainState,
        ViewFn,
        make_train_step,
    )
