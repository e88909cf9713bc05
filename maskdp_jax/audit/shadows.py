r"""Shadow models for LiRA (Gu & Chen 2024, Sec. III), trained with the training step itself.

M models, each on half of the N training videos, with the algorithm of the audited run:

* **data**: :func:`complementary_inclusion` gives every model exactly N/2 videos and every video
  to exactly M/2 models (M/2 random halves and their complements), so one
  :class:`~maskdp_jax.core.plan.PrivacyPlan` (N/2 examples, expected batch B) holds for every model;
* **sampler**: one :class:`~maskdp_jax.core.sampling.PoissonSampler` per model (its own seed) over
  its N/2 videos, public and private streams as in training; logical batches cut by
  :func:`~maskdp_jax.core.sampling.physical_batches`;
* **step**: :func:`maskdp_jax.core.train_step.accumulate` (each pass, the one clipped-gradient
  function) and ``finalize`` (noise σC once per logical batch, division by B), on the model's
  :class:`~maskdp_jax.core.mechanism.Mechanism` (:meth:`ShadowSetup.mechanism`);
* **accountant**: σ is the plan's, calibrated by the caller for the target ε on N/2 examples.

Batching. ``batching="vmap"`` trains ``chunk`` models at once: the step's pieces are
``jax.vmap``-ed over a leading model axis (trainable parameters, optimiser moments, batches, noise
key; frozen parameters and the lockstep step counters shared). A model whose logical batch has
fewer physical batches than another's in the same chunk gets all-padding batches (weight 0),
which add exact zeros; the last chunk is padded with copies of a model to the same width.
With several devices (``mesh``; the audits pass :func:`device_mesh`) a chunk's models are split
over them under ``jax.shard_map``, ``chunk / devices`` per device, without communication.
``batching="loop"`` trains one model at a time with
:func:`~maskdp_jax.core.train_step.make_train_step`, train.py's code path.

Equality. The two give the same models **bit for bit** on the CPU (tested at full fine-tuning of
``mvit_test``, both passes of ``maskdp``, a padded last chunk). Three things make it so. The
step's programs compile without XLA:CPU's YNNPACK dot fusion
(:mod:`maskdp_jax.core.compilation`), whose kernels differ between a model-batched matrix product
and the one-model product (6e-8 after two steps with it). Optax's bias correction
``b ** count`` sees a scalar count, as in the one-model step (``_model_axes``; on a
``[chunk]`` vector of counts XLA:CPU takes its vectorised power, another last bit). And no chunk
has width 1 (a unit model axis is simplified into other kernels; the last chunk is padded).
One known difference remains: with a frozen prefix (``selective``, ``linear``) the shared frozen
weights multiply the stacked rows of all the chunk's models in one matrix product of another
shape (measured: 4e-9 on ``mvit_test``, ``selective``, maskdp; a copy of the frozen weights per
model, tried, is exact, but costs ``chunk`` copies of the frozen prefix's memory, so it is not
done). Split over a mesh, the per-device programs are compiled by the SPMD pipeline and agree
with the loop to float rounding (tested: 2 CPU devices, 1.2e-7 after two steps), not bit for bit.
Other backends were not checked.

Noise and sampling are seeded (``seed``): shadow models are an experiment, not a release.
Clips are fixed per video (the centre clip), as under DP without augmentation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from maskdp_jax.audit import lira
from maskdp_jax.core import compilation, parallel, partition, sampling
from maskdp_jax.core import train_step as step_lib
from maskdp_jax.core.mechanism import Mechanism, MechanismState
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.tokenizer import Tokenizer

BATCHINGS = ("vmap", "loop")


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
      plan: the privacy plan of one model (``num_examples`` = N/2); its effective
        ``sampling`` scheme is the one every model draws its batches with, as in training.
      physical_batch_size: P.
      seed: sampler seeds and noise keys derive from it and the model's index.
    """

    plan: PrivacyPlan
    physical_batch_size: int
    seed: int = 0

    def _model_seed(self, model: int) -> int:
        return self.seed * 100_003 + model

    def mechanism(self, model: int) -> Mechanism:
        """Model ``model``'s :class:`~maskdp_jax.core.mechanism.Mechanism`: the plan with seeded
        randomness of the model's own seed (its sampler, its budget rule, its step)."""
        return Mechanism(plan=self.plan,
                         randomness=Randomness(mode="seeded", seed=self._model_seed(model)))

    def state(self, model: int) -> MechanismState:
        """Model ``model``'s mechanism state before its first step; its base noise key is
        ``jax.random.key`` of the model's seed (the audits' committed shadow models were trained
        with it)."""
        return MechanismState(step=jnp.zeros((), jnp.int32),
                              key=jax.random.key(self._model_seed(model)))


def logical_batches(setup: ShadowSetup, model: int, members: np.ndarray, step: int
                    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], ...]:
    """Model ``model``'s ``(public, private)`` physical batches at ``step``: lists of
    ``(global indices [P], weights [P])`` drawn by its sampler over its ``members`` (sorted global
    indices of its N/2 videos), with the plan's sampling scheme (coupled: one draw for both)."""
    lb = setup.mechanism(model).batch_at(step)
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
          mesh: jax.sharding.Mesh | None = None,
          progress: Callable[[int], None] | None = None) -> Any:
    """Train the M shadow models of ``inclusion [M, N]`` from the same initial parameters.

    Args:
      setup: the shared plan (with its sampling scheme), batch size and seed.
      inclusion: ``[M, N]`` bool (:func:`complementary_inclusion`).
      data: the N videos: ``video [N, K, T, H, W, C]`` float32, ``mask [N, K, T, H, W]``,
        ``label [N]``.
      trainable / frozen: initial parameters (the same for every model).
      apply_fn, tx, tokens: as for :func:`maskdp_jax.core.train_step.make_train_step`.
      batching: ``"vmap"`` or ``"loop"`` (module docstring).
      chunk: models trained at once with ``"vmap"`` (rounded up to a multiple of the mesh's
        devices).
      mesh: ``"vmap"`` only: a 1-D mesh (:func:`maskdp_jax.core.parallel.make_mesh` over this
        process's devices) over which a chunk's models are split, ``chunk / devices`` per device;
        frozen parameters and the data are replicated. None: one device.
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
    if mesh is not None and batching != "vmap":
        raise ValueError("a device mesh splits the models of a vmapped chunk: use "
                         "batching='vmap' with a mesh.")
    members = [np.flatnonzero(row) for row in inclusion]
    run = _train_loop if batching == "loop" else functools.partial(_train_vmap, chunk=chunk,
                                                                   mesh=mesh)
    return run(setup, members, data, trainable=trainable, frozen=frozen, apply_fn=apply_fn,
               tx=tx, tokens=tokens, progress=progress or (lambda n: None))


@functools.cache
def _train_step(apply_fn, tx, mechanism, tokens):
    return step_lib.make_train_step(apply_fn=apply_fn, tx=tx, mechanism=mechanism,
                                    views=step_lib.PixelViews(tokens))


def _initial_state(setup: ShadowSetup, model: int, *, trainable, frozen, tx):
    return step_lib.TrainState(trainable=trainable, frozen=frozen, opt_state=tx.init(trainable),
                               privacy=setup.state(model))


def _train_loop(setup, members, data, *, trainable, frozen, apply_fn, tx, tokens, progress):
    # Every model's step differs only in its state (the key): one compilation serves them all.
    step_fn = _train_step(apply_fn, tx, setup.mechanism(0), tokens)
    out = []
    for m, rows in enumerate(members):
        # The step consumes the trainable parameters it is given (not the frozen ones).
        state = _initial_state(setup, m, trainable=jax.tree.map(jnp.copy, trainable),
                               frozen=frozen, tx=tx)
        for t in range(setup.plan.steps):
            public, private = logical_batches(setup, m, rows, t)
            batch = step_lib.LogicalBatchData(
                public=[_gather(data, i, w) for i, w in public],
                private=[_gather(data, i, w) for i, w in private])
            state, _ = step_fn(state, batch)
        out.append(state.trainable)
        progress(len(out))
    return _stack(out)


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _over_models(fn, in_axes, out_axes, mesh, **jit_kwargs):
    """``jit(vmap(fn))`` over a leading model axis (axes 0 or None per argument, as ``jax.vmap``).

    With a ``mesh`` the vmapped function runs under ``jax.shard_map``: every device runs it on its
    own ``chunk / devices`` models, no communication, unmapped arguments replicated. (Left to
    sharding propagation, XLA may split other axes too and all-reduce partial sums: measured,
    the models then differ from the loop's by 1e-7.) The trainable parameters are model-axis
    sharded, so they are *varying* in the shard_map and their gradients get no ``psum``: no mixing
    of models (nor of examples, :mod:`maskdp_jax.core.parallel`'s trap).
    """
    mapped = jax.vmap(fn, in_axes=in_axes, out_axes=out_axes)
    if mesh is not None:
        def spec(axes):
            return jax.tree.map(lambda a: P() if a is None else P(mesh.axis_names[0]), axes,
                                is_leaf=lambda a: a is None)

        mapped = jax.shard_map(mapped, mesh=mesh, in_specs=spec(in_axes),
                               out_specs=spec(out_axes))
    return compilation.jit(mapped, **jit_kwargs)


@functools.cache
def _vmapped_accumulations(apply_fn, tokens, mechanism, mesh):
    """The jitted, model-vmapped public and private accumulations. They read only the plan's mode
    and C, so the caller passes a mechanism whose plan has σ, steps and ε cleared: one
    compilation serves every ε and seed of a study."""
    def vmapped(public):
        return _over_models(functools.partial(step_lib.accumulate, public=public,
                                              apply_fn=apply_fn, mechanism=mechanism,
                                              views=step_lib.PixelViews(tokens)),
                            (0, 0, None, 0), 0, mesh, donate_argnums=0)

    return vmapped(True), vmapped(False)


def _model_axes(state: step_lib.TrainState) -> step_lib.TrainState:
    """vmap axes of one model's state: the step and the optimiser's integer scalars (its step
    counters) are shared by the chunk, everything else gets the leading model axis.

    The models of a chunk step in lockstep from the same initial state, so their counters are
    equal. Shared, they stay scalars: optax's bias correction ``b ** count`` then runs the scalar
    code path that the one-model step runs; on a ``[chunk]`` vector XLA:CPU evaluates the power
    with its vectorised approximation, which differs in the last bit. A counter that does not
    stay in lockstep (one that depends on the gradients) fails loudly in ``jax.vmap`` (a mapped
    output with ``out_axes=None``).
    """
    def axis(x):
        counter = jnp.ndim(x) == 0 and jnp.issubdtype(jnp.result_type(x), jnp.integer)
        return None if counter else 0

    return step_lib.TrainState(trainable=0, frozen=None,
                               opt_state=jax.tree.map(axis, state.opt_state),
                               privacy=MechanismState(step=None, key=0, noise=None))


@functools.cache
def _vmapped_finalize(tx, mechanism, mesh, axes_leaves, axes_def):
    model_axis = jax.tree.unflatten(axes_def, axes_leaves)
    return _over_models(lambda s, a: step_lib.finalize(s, a, tx=tx, mechanism=mechanism),
                        (model_axis, 0), (model_axis, 0), mesh)


def device_mesh(batching: str) -> jax.sharding.Mesh | None:
    """The mesh an audit splits its vmapped chunks over: this process's devices when there are
    several and ``batching == "vmap"``, else None (one device)."""
    devices = jax.local_devices()
    if batching != "vmap" or len(devices) < 2:
        return None
    return parallel.make_mesh(devices)


def _model_sharded(mesh):
    """Put a tree with a leading model axis on the devices: split over ``mesh`` (None: the
    default device)."""
    sharding = None if mesh is None else jax.sharding.NamedSharding(mesh, P(mesh.axis_names[0]))
    return functools.partial(jax.device_put, device=sharding)


def _train_vmap(setup, members, data, *, trainable, frozen, apply_fn, tx, tokens, progress,
                chunk, mesh):
    plan = setup.plan
    public, private = _vmapped_accumulations(apply_fn, tokens, Mechanism(
        plan=dataclasses.replace(plan, noise_multiplier=0.0, target_epsilon=None, steps=1),
        randomness=Randomness(mode="seeded", seed=0)), mesh)
    single = _initial_state(setup, 0, trainable=trainable, frozen=frozen, tx=tx)
    axes = _model_axes(single)
    # None is a leaf here (the axes tree), so flatten keeps the frozen field's position.
    leaves, treedef = jax.tree.flatten(axes, is_leaf=lambda x: x is None)
    final = _vmapped_finalize(tx, setup.mechanism(0), mesh, tuple(leaves), treedef)
    p = setup.physical_batch_size
    empty = (np.zeros(p, np.int64), np.zeros(p, np.float32))
    # Every chunk has the same width: the last one is padded with copies of its last model,
    # whose results are dropped. One compilation serves the study, and no chunk has width 1
    # (XLA:CPU simplifies a unit model axis into other kernels, which differ in the last bit).
    devices = 1 if mesh is None else mesh.size
    width = devices * math.ceil(min(chunk, len(members)) / devices)
    split = _model_sharded(mesh)
    if mesh is not None:
        frozen = parallel.replicate(frozen, mesh)
    done = []
    for start in range(0, len(members), width):
        real = list(range(start, min(start + width, len(members))))
        group = real + real[-1:] * (width - len(real))
        state = jax.tree.map(lambda a, x: x if a is None else split(_stack([x] * width)),
                             axes, single, is_leaf=lambda x: x is None)
        keys = split(jnp.stack([setup.state(m).key for m in group]))
        state = state.replace(frozen=frozen, privacy=state.privacy._replace(key=keys))
        for t in range(plan.steps):
            drawn = [logical_batches(setup, m, members[m], t) for m in group]
            acc = split(_stack([step_lib.zeros_accumulator(trainable)] * width))
            for side, fn in ((0, public), (1, private)):
                count = max(len(d[side]) for d in drawn)
                for j in range(count):
                    parts = [_gather(data, *(d[side][j] if j < len(d[side]) else empty))
                             for d in drawn]
                    batch = split({k: np.stack([b[k] for b in parts]) for k in parts[0]})
                    acc = fn(acc, state.trainable, frozen, batch)
            state, _ = final(state, acc)
        done.append(jax.tree.map(operator.itemgetter(slice(len(real))), state.trainable))
        progress(real[-1] + 1)
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *done)


#: The query augmentations :func:`augment` knows.
QUERY_AUGMENTATIONS = ("none", "hflip", "shift_x", "shift_y")
#: Pixels of the shift augmentations, as Carlini et al.'s CIFAR shifts (half a 4-pixel cell).
SHIFT = 2


def augment(video: np.ndarray, name: str) -> np.ndarray:
    """One query augmentation of ``video [N, K, T, H, W, C]`` (LiRA's several queries per
    example, Carlini et al. 2022 Sec. VI-B): ``"none"``, ``"hflip"`` (every frame mirrored
    left-right), ``"shift_x"`` / ``"shift_y"`` (every frame rolled by :data:`SHIFT` pixels,
    wrapping round). The audits' videos are one clip of exactly the clip's length, so clip
    offsets are not available; the pixel mask is not needed (scores use the full video)."""
    if name == "none":
        return video
    if name == "hflip":
        return video[..., ::-1, :]
    if name == "shift_x":
        return np.roll(video, SHIFT, axis=-2)
    if name == "shift_y":
        return np.roll(video, SHIFT, axis=-3)
    raise ValueError(f"query augmentation must be one of {QUERY_AUGMENTATIONS}; got {name!r}.")


def scores(trained: Any, frozen: Any, data: dict[str, np.ndarray], *, apply_fn: Callable,
           batch_size: int = 64, augmentations: tuple[str, ...] | None = None) -> np.ndarray:
    """φ (:func:`maskdp_jax.audit.lira.log_odds_confidence`) of every video on every model: the full
    video (both regions) through the model, mean logits over its K clips. ``[M, N]``; with
    ``augmentations`` (names of :func:`augment`), ``[M, N, A]``, one φ per query."""
    labels = jnp.asarray(data["label"])
    out = []
    for name in augmentations or ("none",):
        logits = jnp.asarray(predict(trained, frozen, augment(data["video"], name),
                                     apply_fn=apply_fn, batch_size=batch_size))
        out.append(jax.vmap(lira.log_odds_confidence, in_axes=(0, None))(logits, labels))
    phi = np.asarray(jnp.stack(out, axis=-1), np.float64)
    return phi if augmentations is not None else phi[..., 0]


def accuracy(trained: Any, frozen: Any, data: dict[str, np.ndarray], *, apply_fn: Callable
             ) -> np.ndarray:
    """``[M]`` top-1 accuracy of every model on ``data`` (mean logits over each video's clips)."""
    logits = predict(trained, frozen, data["video"], apply_fn=apply_fn)
    return np.mean(logits.argmax(axis=-1) == np.asarray(data["label"])[None], axis=1)


def predict(trained: Any, frozen: Any, video: np.ndarray, *, apply_fn: Callable,
            batch_size: int = 64) -> np.ndarray:
    """``[M, N, classes]`` float32 logits of every video ``[N, K, T, H, W, C]`` on every model,
    averaged over its K clips."""
    logits = _clip_mean_logits(apply_fn)
    out = [logits(trained, frozen, jnp.asarray(video[s:s + batch_size]))
           for s in range(0, len(video), batch_size)]
    return np.asarray(jnp.concatenate(out, axis=1))


@functools.cache
def _clip_mean_logits(apply_fn: Callable) -> Callable:
    # One jitted function per model: the parameters are arguments, not closed over, so every
    # call on models of the same shapes (shadows, refits, scores and accuracies) reuses one
    # compilation instead of compiling a fresh closure per call.
    @jax.jit
    @functools.partial(jax.vmap, in_axes=(0, None, None))
    def logits(trained, frozen, clips):
        n, k = clips.shape[:2]
        out = apply_fn(partition.merge(trained, frozen), clips.reshape(n * k, *clips.shape[2:]))
        return out.reshape(n, k, -1).mean(axis=1)

    return logits
