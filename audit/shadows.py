r"""Shadow models for LiRA (seed 004, Sec. III), trained with the training step itself.

M models, each on half of the N training videos, with the algorithm of the audited run:

* **data**: :func:`complementary_inclusion` gives every model exactly N/2 videos and every video
  to exactly M/2 models (M/2 random halves and their complements), so one
  :class:`~maskdp_jax.plan.PrivacyPlan` (N/2 examples, expected batch B) holds for every model;
* **sampler**: one :class:`~maskdp_jax.sampling.PoissonSampler` per model (its own seed) over its
  N/2 videos, public and private streams as in training; logical batches cut by
  :func:`~maskdp_jax.sampling.physical_batches`;
* **step**: :func:`maskdp_jax.train_step.accumulate_public`, ``accumulate_private`` (the one
  clipped-gradient function) and ``finalize`` (noise σC once per logical batch, division by B);
* **accountant**: σ is the plan's, calibrated by the caller for the target ε on N/2 examples.

Batching. ``batching="vmap"`` trains ``chunk`` models at once: the step's pieces are
``jax.vmap``-ed over a leading model axis (trainable parameters, optimiser state, batches, noise
key; frozen parameters shared). A model whose logical batch has fewer physical batches than
another's in the same chunk gets all-padding batches (weight 0), which add exact zeros.
``batching="loop"`` trains one model at a time with
:func:`~maskdp_jax.train_step.make_train_step`, train.py's code path. The two agree to float
rounding, **not bit for bit**: XLA:CPU compiles the vmapped backward pass of the attention
blocks with another reduction order (measured: gradients of one ``mvit_test`` step differ by up
to 6e-8, forward passes are bit-identical); the test holds them to a relative 1e-4 after several
steps.

Noise and sampling are seeded (``seed``): shadow models are an experiment, not a release.
Clips are fixed per video (the centre clip), as under DP without augmentation.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import models
from audit import lira
from maskdp_jax import partition, sampling
from maskdp_jax import train_step as step_lib
from maskdp_jax.plan import PrivacyPlan
from maskdp_jax.tokenizer import Tokenizer

BATCHINGS = ("vmap", "loop")


def audited_model(config, *, num_classes: int, input_shape) -> tuple:
    """The audited model: ``(model, trainable, frozen, apply_fn)`` from the preset
    ``config.model.name``, initial parameters from the public ``config.seed`` and the fine-tuning
    split ``config.model.finetune``."""
    model = models.get_model(config.model.name, num_classes=num_classes)
    params = model.init(jax.random.key(config.seed), np.zeros((1, *input_shape), np.float32))
    mask = models.finetune.trainable_mask(params["params"], strategy=config.model.finetune)
    trainable, frozen = partition.split(params["params"], mask)
    return model, trainable, frozen, lambda p, x: model.apply({"params": p}, x)


def tokenizer(model) -> Tokenizer:
    """The model's cell geometry for the two views."""
    return Tokenizer(patch_stride=tuple(model.patch_stride))


def complementary_inclusion(rng: np.random.Generator, num_models: int,
                            num_examples: int) -> np.ndarray:
    """``[M, N]`` bool: models ``2k`` and ``2k + 1`` see a random half and its complement, so
    every row holds exactly N/2 videos and every column is IN for exactly M/2 models.

    Raises:
      ValueError: M odd or < 4 (leave-one-out fits need two models on each side), N odd.
    """
    if num_models < 4 or num_models % 2 or num_examples % 2:
        raise ValueError(f"need an even number of models >= 4 and an even number of videos; "
                         f"got {num_models} and {num_examples}.")
    out = np.zeros((num_models, num_examples), bool)
    for k in range(num_models // 2):
        half = rng.permutation(num_examples)[: num_examples // 2]
        out[2 * k, half] = True
        out[2 * k + 1] = ~out[2 * k]
    return out


@dataclasses.dataclass(frozen=True)
class ShadowSetup:
    """What every shadow model shares.

    Attributes:
      plan: the privacy plan of one model (``num_examples`` = N/2).
      physical_batch_size: P.
      sampling: ``"decoupled"`` or ``"coupled"`` (maskdp only; as in training).
      seed: sampler seeds and noise keys derive from it and the model's index.
    """

    plan: PrivacyPlan
    physical_batch_size: int
    sampling: str = "decoupled"
    seed: int = 0

    def _model_seed(self, model: int) -> int:
        return self.seed * 100_003 + model

    def sampler(self, model: int) -> sampling.PoissonSampler:
        return sampling.PoissonSampler(num_examples=self.plan.num_examples,
                                       expected_batch_size=self.plan.batch_size,
                                       seed=self._model_seed(model))

    def key(self, model: int) -> jax.Array:
        return jax.random.key(self._model_seed(model))


def logical_batches(setup: ShadowSetup, model: int, members: np.ndarray, step: int
                    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], ...]:
    """Model ``model``'s ``(public, private)`` physical batches at ``step``: lists of
    ``(global indices [P], weights [P])`` drawn by its sampler over its ``members`` (sorted global
    indices of its N/2 videos)."""
    lb = setup.sampler(model).logical_batch(step, mode=setup.plan.mode, sampling=setup.sampling)
    out = []
    for positions in (lb.public, lb.private):
        if positions is None:
            out.append([])
            continue
        out.append([(members[idx], w) for idx, w in sampling.physical_batches(
            positions, physical_batch_size=setup.physical_batch_size)])
    return tuple(out)


def _gather(data: dict[str, np.ndarray], idx: np.ndarray, weights: np.ndarray) -> dict:
    return {"video": data["video"][idx], "mask": data["mask"][idx],
            "label": data["label"][idx], "weight": weights}


def train(setup: ShadowSetup, inclusion: np.ndarray, data: dict[str, np.ndarray], *,
          trainable: Any, frozen: Any, apply_fn: Callable, tx: optax.GradientTransformation,
          tokens: Tokenizer, batching: str = "vmap", chunk: int = 16,
          progress: Callable[[int], None] | None = None) -> Any:
    """Train the M shadow models of ``inclusion [M, N]`` from the same initial parameters.

    Args:
      setup: the shared plan, batch size, sampling and seed.
      inclusion: ``[M, N]`` bool (:func:`complementary_inclusion`).
      data: the N videos: ``video [N, K, T, H, W, C]`` float32, ``mask [N, K, T, H, W]``,
        ``label [N]``.
      trainable / frozen: initial parameters (the same for every model).
      apply_fn, tx, tokens: as for :func:`maskdp_jax.train_step.make_train_step`.
      batching: ``"vmap"`` or ``"loop"`` (module docstring).
      chunk: models trained at once with ``"vmap"``.
      progress: called with the number of models finished.

    Returns:
      the trainable parameters of every model, stacked on a leading ``[M]`` axis.
    """
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}; got {batching!r}.")
    inclusion = np.asarray(inclusion, bool)
    if not np.all(inclusion.sum(axis=1) == setup.plan.num_examples):
        raise ValueError(f"every model must hold plan.num_examples = {setup.plan.num_examples} "
                         "videos (complementary_inclusion).")
    members = [np.flatnonzero(row) for row in inclusion]
    run = _train_loop if batching == "loop" else functools.partial(_train_vmap, chunk=chunk)
    return run(setup, members, data, trainable=trainable, frozen=frozen, apply_fn=apply_fn,
               tx=tx, tokens=tokens, progress=progress or (lambda n: None))


@functools.cache
def _train_step(apply_fn, tx, plan, tokens):
    return step_lib.make_train_step(apply_fn=apply_fn, tx=tx, plan=plan, tokens=tokens)


def _train_loop(setup, members, data, *, trainable, frozen, apply_fn, tx, tokens, progress):
    # The step does not read plan.steps: one compilation serves any number of steps.
    step_fn = _train_step(apply_fn, tx, dataclasses.replace(setup.plan, steps=1), tokens)
    out = []
    for m, rows in enumerate(members):
        state = step_lib.TrainState.create(trainable=trainable, frozen=frozen, tx=tx)
        for t in range(setup.plan.steps):
            public, private = logical_batches(setup, m, rows, t)
            batch = step_lib.LogicalBatchData(
                public=[_gather(data, i, w) for i, w in public],
                private=[_gather(data, i, w) for i, w in private])
            state, _ = step_fn(state, batch, setup.key(m))
        out.append(state.trainable)
        progress(len(out))
    return _stack(out)


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@functools.cache
def _vmapped_accumulations(apply_fn, tokens, plan):
    """The jitted, model-vmapped public and private accumulations. They read only the plan's mode
    and C, so the caller passes a plan with σ, steps and ε cleared: one compilation serves every ε
    and seed of a study."""
    def vmapped(fn):
        return jax.jit(jax.vmap(functools.partial(fn, apply_fn=apply_fn, plan=plan, tokens=tokens),
                                in_axes=(0, 0, None, 0)), donate_argnums=0)

    return vmapped(step_lib.accumulate_public), vmapped(step_lib.accumulate_private)


@functools.cache
def _vmapped_finalize(tx, plan):
    model_axis = step_lib.TrainState(step=0, trainable=0, frozen=None, opt_state=0)
    return jax.jit(jax.vmap(lambda s, a, k: step_lib.finalize(s, a, k, tx=tx, plan=plan),
                            in_axes=(model_axis, 0, 0), out_axes=(model_axis, 0)))


def _train_vmap(setup, members, data, *, trainable, frozen, apply_fn, tx, tokens, progress,
                chunk):
    plan = setup.plan
    public, private = _vmapped_accumulations(apply_fn, tokens, dataclasses.replace(
        plan, noise_multiplier=0.0, target_epsilon=None, steps=1))
    final = _vmapped_finalize(tx, dataclasses.replace(plan, steps=1))
    p = setup.physical_batch_size
    empty = (np.zeros(p, np.int64), np.zeros(p, np.float32))
    done = []
    for start in range(0, len(members), chunk):
        group = range(start, min(start + chunk, len(members)))
        single = step_lib.TrainState.create(trainable=trainable, frozen=frozen, tx=tx)
        state = step_lib.TrainState(
            step=jnp.zeros((len(group),), jnp.int32),
            trainable=_stack([trainable] * len(group)), frozen=frozen,
            opt_state=_stack([single.opt_state] * len(group)))
        keys = jnp.stack([setup.key(m) for m in group])
        for t in range(plan.steps):
            drawn = [logical_batches(setup, m, members[m], t) for m in group]
            acc = _stack([step_lib.zeros_accumulator(trainable)] * len(group))
            for side, fn in ((0, public), (1, private)):
                count = max(len(d[side]) for d in drawn)
                for j in range(count):
                    parts = [_gather(data, *(d[side][j] if j < len(d[side]) else empty))
                             for d in drawn]
                    batch = {k: jnp.asarray(np.stack([b[k] for b in parts])) for k in parts[0]}
                    acc = fn(acc, state.trainable, frozen, batch)
            state, _ = final(state, acc, keys)
        done.append(state.trainable)
        progress(start + len(group))
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *done)


def scores(trained: Any, frozen: Any, data: dict[str, np.ndarray], *, apply_fn: Callable,
           batch_size: int = 64) -> np.ndarray:
    """``[M, N]`` φ (:func:`audit.lira.log_odds_confidence`) of every video on every model: the
    full video (both regions) through the model, mean logits over its K clips."""
    logits = jnp.asarray(predict(trained, frozen, data["video"], apply_fn=apply_fn,
                                 batch_size=batch_size))
    phi = jax.vmap(lira.log_odds_confidence, in_axes=(0, None))(logits,
                                                                jnp.asarray(data["label"]))
    return np.asarray(phi, np.float64)


def accuracy(trained: Any, frozen: Any, data: dict[str, np.ndarray], *, apply_fn: Callable
             ) -> np.ndarray:
    """``[M]`` top-1 accuracy of every model on ``data`` (mean logits over each video's clips)."""
    logits = predict(trained, frozen, data["video"], apply_fn=apply_fn)
    return np.mean(logits.argmax(axis=-1) == np.asarray(data["label"])[None], axis=1)


def predict(trained: Any, frozen: Any, video: np.ndarray, *, apply_fn: Callable,
            batch_size: int = 64) -> np.ndarray:
    """``[M, N, classes]`` float32 logits of every video ``[N, K, T, H, W, C]`` on every model,
    averaged over its K clips."""
    @jax.jit
    @functools.partial(jax.vmap, in_axes=(0, None))
    def logits(tr, clips):
        n, k = clips.shape[:2]
        out = apply_fn(partition.merge(tr, frozen), clips.reshape(n * k, *clips.shape[2:]))
        return out.reshape(n, k, -1).mean(axis=1)

    out = [logits(trained, jnp.asarray(video[s:s + batch_size]))
           for s in range(0, len(video), batch_size)]
    return np.asarray(jnp.concatenate(out, axis=1))
