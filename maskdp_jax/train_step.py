"""The MaskDP-SGD step, one code path for the modes ``maskdp``, ``dp`` and ``nonprivate``.

For one logical step with public batch ``S_pu`` and private batch ``S_pr`` (docs/design.md):

    g = ( sum_{i in S_pu} w_i^pu grad L(M(view_pu_i), y_i)              # ordinary gradient
        + sum_{i in S_pr} w_i^pr clip_C(grad L(M(view_pr_i), y_i))     # per-example, clipped
        + N(0, sigma^2 C^2 I) ) / B                                     # once per logical batch

with ``B`` the *expected* batch size. ``w^pu_i = 0`` for padding and for videos without a public
cell, ``w^pr_i = 0`` for padding and for videos without a private cell (so a video whose private
part is absent contributes exactly zero private gradient, which is what makes the ``special``
masked adjacency of the accountant hold).

Mode by mode:

* ``maskdp``: public views in the public pass, private views in the private pass.
* ``dp``: no public pass; the private pass sees the whole video (standard DP-SGD). With all-private
  masks ``maskdp`` computes exactly the same update.
* ``nonprivate``: no private pass and no noise; the public pass sees the whole video.

Each physical batch is a dict::

    video  [P, K, T, H, W, C] uint8     pixels, K clips per video, normalised inside the step by
                                        ``pixel_norm`` (float32: already the model's input)
    mask   [P, K, T, H, W]    uint8     1 = public pixel, 0 = private pixel (public information)
    label  [P]                int32     class index (public under masked adjacency)
    weight [P]                float32   1 = real example, 0 = padding

The step reads ``video`` as the whole video (``dp``, ``nonprivate``) and makes the views of
``maskdp`` with a view function (:data:`.ViewFn`) given by the caller: :class:`PixelViews` cuts
them from ``video`` and ``mask`` with the model's tokeniser; a caller whose batches carry views
made elsewhere (the run layer's feature cache, made by the same tokeniser before a frozen prefix)
passes a function that reads them, and its batches need no ``video`` or ``mask``. Either way the
public view must be a function of public pixels only; the step does not look inside.

A video's loss is the mean over its K clips (multi-clip, Luo et al. 2024), so the clipped unit is
the video. The step is split into jitted pieces (accumulate a public physical batch, accumulate a
private physical batch, finalise) because a Poisson logical batch has a random number of physical
batches; :func:`make_train_step` composes them into ``train_step(state, batch, key)``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from maskdp_jax import (
    bandmf,
    clipping,
    compilation,
    ghost,
    gradient,
    noise,
    parallel,
    partition,
    tokenizer,
)
from maskdp_jax.plan import PrivacyPlan

PyTree = Any
Batch = dict[str, jnp.ndarray]
ApplyFn = Callable[[PyTree, jnp.ndarray], jnp.ndarray]
PixelNorm = Callable[[jnp.ndarray], jnp.ndarray]  # uint8 pixels -> float32 (data.clips.PixelNorm)
#: A physical batch -> its views: public / private ``[P, K, ...]`` (the model's input) and
#: has_public / has_private ``[P, K]`` bool, per clip.
ViewFn = Callable[[Batch], tokenizer.Views]


class TrainState(struct.PyTreeNode):
    """Everything that changes during training (collaborators are bound by closure instead).

    Attributes:
      step: number of logical steps taken (int32 scalar).
      trainable: trainable parameters (the only ones released with noise).
      frozen: frozen parameters (closed over by the loss; never updated).
      opt_state: optax state of the optimiser over ``trainable``.
      noise_state: banded noise's :class:`~maskdp_jax.bandmf.NoiseState` (past noise: secret,
        checkpointed with the rest so that a resumed run adds the same noise), or None for
        independent noise.
    """

    step: jnp.ndarray
    trainable: PyTree
    frozen: PyTree
    opt_state: optax.OptState
    noise_state: Any = None

    @classmethod
    def create(cls, *, trainable: PyTree, frozen: PyTree, tx: optax.GradientTransformation,
               plan: PrivacyPlan | None = None):
        """The state before step 0; ``plan`` (banded noise) adds the noise state."""
        return cls(
            step=jnp.zeros((), jnp.int32),
            trainable=trainable,
            frozen=frozen,
            opt_state=tx.init(trainable),
            noise_state=None if plan is None else bandmf.initial_state(plan, trainable),
        )

    @property
    def params(self) -> dict:
        return partition.merge(self.trainable, self.frozen)


class Accumulator(NamedTuple):
    """Sums over the physical batches of one logical batch.

    Attributes:
      public_sum: sum of weighted public gradients (trainable structure).
      private_sum: sum of weighted, clipped private gradients (trainable structure).
      public_loss_sum / public_count: for the public training loss (not private data).
      clip: private-pass :class:`~maskdp_jax.clipping.ClipStats` (private data: not DP).
      public_nonfinite: public examples dropped for a NaN or inf input
        (:func:`maskdp_jax.gradient.public_grad_sum`).
    """

    public_sum: PyTree
    private_sum: PyTree
    public_loss_sum: jnp.ndarray
    public_count: jnp.ndarray
    clip: clipping.ClipStats
    public_nonfinite: jnp.ndarray


@jax.jit
def zeros_accumulator(trainable: PyTree) -> Accumulator:
    """An accumulator of zeros for ``trainable``, made by one program (one leaf at a time, the
    host spent 3-10 ms a step on it); its leaves are distinct buffers, as donation needs."""
    return Accumulator(
        public_sum=jax.tree.map(jnp.zeros_like, trainable),
        private_sum=jax.tree.map(jnp.zeros_like, trainable),
        public_loss_sum=jnp.zeros((), jnp.float32),
        public_count=jnp.zeros((), jnp.float32),
        clip=clipping.ClipStats.zeros(),
        public_nonfinite=jnp.zeros((), jnp.float32),
    )


def video_losses(apply_fn: ApplyFn, params: PyTree, video: jnp.ndarray,
                 label: jnp.ndarray) -> jnp.ndarray:
    """``[P]`` cross-entropy of each video: the mean over its K clips (multi-clip: the video, not
    the clip, is the unit). ``video: [P, K, T, H, W, C]`` (or features), ``label: [P]``; the
    model sees the ``P * K`` clips as one batch."""
    p, k = video.shape[:2]
    logits = apply_fn(params, video.reshape(p * k, *video.shape[2:])).reshape(p, k, -1)
    labels = jnp.broadcast_to(label[:, None], (p, k))
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels), axis=1)


def one_video_loss(apply_fn: ApplyFn, frozen: PyTree, trainable: PyTree,
                   example: tuple[jnp.ndarray, jnp.ndarray]) -> jnp.ndarray:
    """The loss of ONE video ``(clips [K, ...], label [])``: the per-example loss both passes
    take their gradients of (:func:`maskdp_jax.gradient.public_grad_sum`,
    :func:`maskdp_jax.clipping.clipped_grad_sum`)."""
    clips, label = example
    return video_losses(apply_fn, partition.merge(trainable, frozen), clips[None],
                        label[None])[0]


def model_video(video: jnp.ndarray, pixel_norm: PixelNorm | None) -> jnp.ndarray:
    """The model's input of a physical batch: uint8 pixels normalised here, on the device, by
    ``pixel_norm`` (the loader ships uint8: a quarter of the bytes); a float ``video`` is already
    the model's input and passes unchanged.

    Raises:
      TypeError: uint8 pixels without a ``pixel_norm`` (they would reach the model as 0..255).
    """
    if video.dtype != jnp.uint8:
        return video
    if pixel_norm is None:
        raise TypeError("the batch holds uint8 pixels but the step has no pixel_norm: pass "
                        "make_train_step(pixel_norm=dataset.pixel_norm), or load normalised "
                        "batches (get_batch(normalize=True)).")
    return pixel_norm(video)


@dataclasses.dataclass(frozen=True)
class PixelViews:
    """The :data:`.ViewFn` of pixel batches: ``tokens.views`` of ``video [P, K, T, H, W, C]``
    (normalised) and ``mask [P, K, T, H, W]``. The public view is a function of the public
    pixels and the mask only (:mod:`maskdp_jax.tokenizer`). Hashable, so a jit or cache may key
    on it.

    Attributes:
      tokens: the model's tokeniser (cell geometry, fill value).
    """

    tokens: tokenizer.Tokenizer

    def __call__(self, batch: Batch) -> tokenizer.Views:
        return self.tokens.views(batch["video"], batch["mask"], fill=batch.get("fill"))


def pass_input(batch: Batch, *, public: bool, plan: PrivacyPlan, views: ViewFn,
               pixel_norm: PixelNorm | None = None) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The model input ``[P, K, ...]`` and the weights ``[P]`` of one pass over a physical batch.

    Without views (``dp``, ``nonprivate``): the whole (normalised) ``video`` and ``weight``.
    With views (``maskdp``): the public view in the public pass (``public=True``), the private
    view in the private pass, each weighted 0 for a video without a cell of that part (so a
    video's absent private part contributes exactly zero private gradient). The views are made
    after normalisation (the fill value is in normalised units); a batch without ``video`` is
    one whose ``views`` need no pixels.
    """
    if "video" in batch:
        batch = {**batch, "video": model_video(batch["video"], pixel_norm)}
    if "fill" in batch:  # public backgrounds for the hidden cells (run.views.PublicFill)
        batch = {**batch, "fill": model_video(batch["fill"], pixel_norm)}
    if not plan.mode.uses_views:
        return batch["video"], batch["weight"]
    return gradient.pass_view(views(batch), batch["weight"], public=public)


def accumulate_public(
    acc: Accumulator, trainable: PyTree, frozen: PyTree, batch: Batch, *,
    apply_fn: ApplyFn, plan: PrivacyPlan, views: ViewFn, pixel_norm: PixelNorm | None = None,
) -> Accumulator:
    """Add one physical batch's public gradient ``sum_i w_i grad L(view_pu_i)`` (no clipping).

    The gradient depends only on public pixels, the masks and the labels (normalisation is per
    pixel, so it moves no private pixel into the public view). ``views``, ``pixel_norm``: see
    :func:`pass_input`.
    """
    video, weights = pass_input(batch, public=True, plan=plan, views=views,
                                pixel_norm=pixel_norm)
    grads, stats = gradient.pass_gradient(
        functools.partial(one_video_loss, apply_fn, frozen), trainable, (video, batch["label"]),
        weights, public=True, plan=plan)
    return acc._replace(
        public_sum=jax.tree.map(jnp.add, acc.public_sum, grads),
        public_loss_sum=acc.public_loss_sum + stats.public_loss_sum,
        public_count=acc.public_count + stats.public_count,
        public_nonfinite=acc.public_nonfinite + stats.public_nonfinite,
    )


def accumulate_private(
    acc: Accumulator, trainable: PyTree, frozen: PyTree, batch: Batch, *,
    apply_fn: ApplyFn, plan: PrivacyPlan, views: ViewFn,
    microbatch_size: int | None = None, pixel_norm: PixelNorm | None = None,
    ghost_rules: ghost.Rules | None = None,
) -> Accumulator:
    """Add one physical batch's ``sum_i w_i clip_C(grad L(view_pr_i))``.

    ``microbatch_size``: per-example gradients are computed ``m`` at a time (None: the whole
    physical batch at once); bounds memory for full fine-tuning, same sum
    (:func:`maskdp_jax.clipping.clipped_grad_sum`). ``ghost_rules``: None computes per-example
    gradients by ``vmap``; the model's layer rules compute the norms and the clipped sum without
    them (:mod:`maskdp_jax.ghost`), same sum. ``views``, ``pixel_norm``: see
    :func:`pass_input`.
    """
    video, weights = pass_input(batch, public=False, plan=plan, views=views,
                                pixel_norm=pixel_norm)

    grads, stats = gradient.pass_gradient(
        functools.partial(one_video_loss, apply_fn, frozen), trainable, (video, batch["label"]),
        weights, public=False, plan=plan, microbatch_size=microbatch_size,
        ghost_rules=ghost_rules)
    return acc._replace(
        private_sum=jax.tree.map(jnp.add, acc.private_sum, grads),
        clip=jax.tree.map(jnp.add, acc.clip, stats.clip),
    )


def finalize(
    state: TrainState, acc: Accumulator, key: jax.Array, *,
    tx: optax.GradientTransformation, plan: PrivacyPlan,
) -> tuple[TrainState, dict[str, jnp.ndarray]]:
    """Noise the private sum once, divide by the expected batch size, apply the optimiser.

    Args:
      state: state before the step; ``state.step`` is folded into ``key``.
      acc: sums over every physical batch of this logical step.
      key: base PRNG key of the run, identical on every replica.
    """
    grad, noise_state = gradient.noisy_update(
        acc.public_sum if plan.mode.has_public_pass else None,
        acc.private_sum if plan.mode.has_private_pass else None,
        noise.step_key(key, state.step), state.noise_state, plan=plan)
    updates, opt_state = tx.update(grad, state.opt_state, state.trainable)
    trainable = optax.apply_updates(state.trainable, updates)
    metrics = {
        "public/loss": acc.public_loss_sum / jnp.maximum(acc.public_count, 1.0),
        "public/batch_size": acc.public_count,
        "grad_norm": optax.tree.norm(grad),
        "public/num_nonfinite": acc.public_nonfinite,
        "private/num_nonfinite": acc.clip.num_nonfinite,
        "private/clipped_fraction": acc.clip.num_clipped / jnp.maximum(acc.clip.count, 1.0),
        "private/mean_grad_norm": acc.clip.norm_sum / jnp.maximum(acc.clip.count, 1.0),
        "private/loss": acc.clip.loss_sum / jnp.maximum(acc.clip.count, 1.0),
        "private/batch_size": acc.clip.count,
    }
    new_state = state.replace(step=state.step + 1, trainable=trainable, opt_state=opt_state,
                              noise_state=noise_state)
    return new_state, metrics


@dataclasses.dataclass(frozen=True)
class LogicalBatchData:
    """The physical batches of one logical step (either list may be empty)."""

    public: Sequence[Batch]
    private: Sequence[Batch]


def make_train_step(
    *, apply_fn: ApplyFn, tx: optax.GradientTransformation, plan: PrivacyPlan,
    views: ViewFn, microbatch_size: int | None = None,
    mesh: jax.sharding.Mesh | None = None, pixel_norm: PixelNorm | None = None,
    ghost_rules: ghost.Rules | None = None,
) -> Callable[[TrainState, LogicalBatchData, jax.Array], tuple[TrainState, dict]]:
    """Build ``train_step(state, batch, key) -> (state, metrics)``.

    Args:
      apply_fn: ``apply_fn(params, x [n, T, H, W, C]) -> logits [n, classes]``, deterministic.
      tx: optax optimiser over the trainable subtree.
      plan: the run's :class:`~maskdp_jax.plan.PrivacyPlan`; the step reads the mode, C, σ and
        the expected batch size B from it.
      views: how the ``maskdp`` views of a physical batch are made (:data:`.ViewFn`): for pixel
        batches ``PixelViews(tokens)`` with the model's tokeniser; unused by ``dp`` and
        ``nonprivate``.
      microbatch_size: per-example gradients of the private pass ``m`` at a time (None: the
        whole physical batch); same update, bounded memory.
      mesh: None for one device; else a 1-D data mesh (:func:`maskdp_jax.parallel.make_mesh`):
        physical batches are split over its devices, each device clips the per-example gradients
        of its own examples, the sums are all-reduced, and the replicated finalisation adds one
        noise draw (same update as one device for the same key and batch). ``state`` must then be
        replicated on the mesh (:func:`maskdp_jax.parallel.replicate`) and the physical batch size
        a multiple of the number of devices.
      pixel_norm: the training split's ``data.clips.PixelNorm``: uint8 batches are normalised
        inside the jitted accumulation (None: batches must arrive normalised, float32).
      ghost_rules: how the private pass gets per-example norms (``config.compute.per_example``):
        None, per-example gradients by ``vmap``; the model's :class:`~maskdp_jax.ghost.LayerRule`
        mapping (``run.model.ghost_rules()``), from activations and output cotangents
        of one backward (:mod:`maskdp_jax.ghost`). Same update to float rounding.

    Returns:
      A function of ``(state, batch: LogicalBatchData, key)``; it runs one jitted accumulation
      per physical batch and one jitted finalisation (noise + update) per logical batch. It is
      pure: the same inputs give the same outputs.
    """

    if microbatch_size is not None and microbatch_size <= 0:
        raise ValueError(f"microbatch_size must be > 0 or None; got {microbatch_size}.")

    def build(fn):
        if mesh is not None:
            fn = parallel.shard_accumulation(fn, zeros_accumulator, mesh)
        return compilation.jit(fn, donate_argnums=0)

    public = build(functools.partial(accumulate_public, apply_fn=apply_fn, plan=plan,
                                     views=views, pixel_norm=pixel_norm))
    private = build(functools.partial(accumulate_private, apply_fn=apply_fn, plan=plan,
                                      views=views, microbatch_size=microbatch_size,
                                      pixel_norm=pixel_norm, ghost_rules=ghost_rules))
    final = compilation.jit(lambda s, a, k: finalize(s, a, k, tx=tx, plan=plan))
    mode = plan.mode

    def train_step(state: TrainState, batch: LogicalBatchData, key: jax.Array):
        if batch.public and not mode.has_public_pass:
            raise ValueError(f"mode {mode.value!r} has no public pass; got public batches.")
        if batch.private and not mode.has_private_pass:
            raise ValueError(f"mode {mode.value!r} has no private pass; got private batches.")
        acc = zeros_accumulator(state.trainable)
        for b in batch.public:
            acc = public(acc, state.trainable, state.frozen, b)
        for b in batch.private:
            acc = private(acc, state.trainable, state.frozen, b)
        return final(state, acc, key)

    return train_step
