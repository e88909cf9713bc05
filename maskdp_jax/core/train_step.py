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
the video. The step is split into jitted pieces (accumulate one pass over a physical batch,
finalise) because a Poisson logical batch has a random number of physical batches;
:func:`make_train_step` composes them into ``train_step(state, batch)``. Its private part is the
run's :class:`~maskdp_jax.core.mechanism.Mechanism`, the same object the library trains with
(:meth:`~maskdp_jax.core.mechanism.Mechanism.accumulate` per pass and physical batch,
:meth:`~maskdp_jax.core.mechanism.Mechanism.finish` once per logical step): the noise key, the step
counter and banded noise's state are ``state.privacy``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from maskdp_jax.core import compilation, ghost, gradient, parallel, partition, per_pass, tokenizer
from maskdp_jax.core.mechanism import Mechanism, MechanismState, Sums
from maskdp_jax.core.plan import PrivacyPlan

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
      trainable: trainable parameters (the only ones released with noise).
      frozen: frozen parameters (closed over by the loss; never updated).
      opt_state: optax state of the optimiser over ``trainable``.
      privacy: the :class:`~maskdp_jax.core.mechanism.MechanismState` of the run's
        :class:`~maskdp_jax.core.mechanism.Mechanism`: the step counter (the run's one counter,
        which is the ledger), the secret base noise key and banded noise's past noise. Checkpointed
        with the rest (checkpoints are private), never logged (its ``repr`` hides the secret).
    """

    trainable: PyTree
    frozen: PyTree
    opt_state: optax.OptState
    privacy: MechanismState

    @classmethod
    def create(cls, *, trainable: PyTree, frozen: PyTree, tx: optax.GradientTransformation,
               mechanism: Mechanism):
        """The state before the mechanism's first step. ``trainable`` is copied: a step
        consumes its state (:func:`make_train_step`), and the caller's arrays stay usable."""
        trainable = jax.tree.map(jnp.copy, trainable)
        return cls(trainable=trainable, frozen=frozen, opt_state=tx.init(trainable),
                   privacy=mechanism.init(trainable))

    @property
    def step(self) -> jnp.ndarray:
        """Logical steps taken: the mechanism's counter (int32 scalar)."""
        return self.privacy.step

    @property
    def params(self) -> dict:
        return partition.merge(self.trainable, self.frozen)


@jax.jit
def zeros_accumulator(trainable: PyTree) -> Sums:
    """The step's :class:`~maskdp_jax.core.mechanism.Sums` of zeros for ``trainable``, made by one
    program (one leaf at a time, the host spent a noticeable part of each step on it); its
    leaves are distinct buffers, as donation needs."""
    return Sums.zeros(trainable)


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
    take their gradients of (:func:`maskdp_jax.core.gradient.public_grad_sum`,
    :func:`maskdp_jax.core.clipping.clipped_grad_sum`)."""
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
    pixels and the mask only (:mod:`maskdp_jax.core.tokenizer`). Hashable, so a jit or cache may key
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


def accumulate(
    acc: Sums, trainable: PyTree, frozen: PyTree, batch: Batch, *, public: bool,
    apply_fn: ApplyFn, mechanism: Mechanism, views: ViewFn,
    microbatch_size: int | None = None, pixel_norm: PixelNorm | None = None,
    ghost_rules: ghost.Rules | None = None,
) -> Sums:
    """Add one pass over one physical batch
    (:meth:`~maskdp_jax.core.mechanism.Mechanism.accumulate`).

    ``public=True``: ``sum_i w_i grad L(view_pu_i)``, no clipping; it depends only on public
    pixels, the masks and the labels (normalisation is per pixel, so it moves no private pixel
    into the public view). ``public=False``: ``sum_i w_i clip_C(grad L(view_pr_i))``.
    ``microbatch_size``: per-example gradients ``m`` at a time (None: the whole physical batch
    at once), the same sum in bounded memory. ``ghost_rules``: None computes per-example
    gradients by ``vmap``; the model's layer rules compute the norms and the clipped sum without
    them (:mod:`maskdp_jax.core.ghost`), the same sum. ``views``, ``pixel_norm``: see
    :func:`pass_input`.
    """
    video, weights = pass_input(batch, public=public, plan=mechanism.plan, views=views,
                                pixel_norm=pixel_norm)
    return mechanism.accumulate(
        acc, functools.partial(one_video_loss, apply_fn, frozen), trainable,
        (video, batch["label"]), weights, public=public, microbatch_size=microbatch_size,
        ghost_rules=ghost_rules)


def finalize(
    state: TrainState, acc: Sums, *, tx: optax.GradientTransformation,
    mechanism: Mechanism,
) -> tuple[TrainState, dict[str, jnp.ndarray]]:
    """Noise the private sum once, divide by the expected batch size, apply the optimiser
    (:meth:`~maskdp_jax.core.mechanism.Mechanism.finish`: the state's key folded with its step).

    Args:
      state: state before the step.
      acc: sums over every physical batch of this logical step.
    """
    grad, privacy = mechanism.finish(acc, state.privacy)
    updates, opt_state = tx.update(grad, state.opt_state, state.trainable)
    if isinstance(grad, per_pass.PassGradients):  # the norm of the one-optimiser direction
        grad = grad.total()
    trainable = optax.apply_updates(state.trainable, updates)
    stats, clip = acc.stats, acc.stats.clip
    metrics = {
        "public/loss": stats.public_loss_sum / jnp.maximum(stats.public_count, 1.0),
        "public/batch_size": stats.public_count,
        "grad_norm": optax.tree.norm(grad),
        "public/num_nonfinite": stats.public_nonfinite,
        "private/num_nonfinite": clip.num_nonfinite,
        "private/clipped_fraction": clip.num_clipped / jnp.maximum(clip.count, 1.0),
        "private/mean_grad_norm": clip.norm_sum / jnp.maximum(clip.count, 1.0),
        "private/loss": clip.loss_sum / jnp.maximum(clip.count, 1.0),
        "private/batch_size": clip.count,
    }
    return state.replace(trainable=trainable, opt_state=opt_state, privacy=privacy), metrics


@dataclasses.dataclass(frozen=True)
class LogicalBatchData:
    """The physical batches of one logical step (either list may be empty)."""

    public: Sequence[Batch]
    private: Sequence[Batch]


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """``train_step(state, batch) -> (state, metrics)`` (:func:`make_train_step`) and its
    jitted programs, which a benchmark or a test may lower on their own.

    Each program takes the buffers it replaces (donation): ``public`` and ``private``
    (``(acc, trainable, frozen, batch) -> acc``) write the new sums over the old ones, and
    ``finalize`` (``(state, acc) -> (state, metrics)``) writes the new parameters, optimiser state
    and noise state over the old ones, so a step holds one copy of the state, not two (banded
    noise's past noise is ``bands`` copies of the parameters). The frozen parameters are not
    donated: they outlive the step.

    Attributes:
      public / private: one pass over one physical batch.
      zeros: the step's zero sums for the trainable parameters.
      finalize: the noise once, the division by B, the optimiser (:func:`finalize`).
    """

    public: Callable
    private: Callable
    zeros: Callable
    finalize: Callable

    def __call__(self, state: TrainState, batch: LogicalBatchData):
        # A batch of a pass the mode lacks is refused by Mechanism.accumulate as it is traced.
        acc = self.zeros(state.trainable)
        for b in batch.public:
            acc = self.public(acc, state.trainable, state.frozen, b)
        for b in batch.private:
            acc = self.private(acc, state.trainable, state.frozen, b)
        # The frozen parameters pass through unchanged, so they are not the finalisation's to
        # consume; everything else of the state is (its noise key above all).
        new, metrics = self.finalize(state.replace(frozen=None), acc)
        return new.replace(frozen=state.frozen), metrics


def make_train_step(
    *, apply_fn: ApplyFn, tx: optax.GradientTransformation, mechanism: Mechanism,
    views: ViewFn, microbatch_size: int | None = None,
    mesh: jax.sharding.Mesh | None = None, pixel_norm: PixelNorm | None = None,
    ghost_rules: ghost.Rules | None = None,
) -> TrainStep:
    """Build ``train_step(state, batch) -> (state, metrics)`` on ``mechanism``.

    Args:
      apply_fn: ``apply_fn(params, x [n, T, H, W, C]) -> logits [n, classes]``, deterministic.
      tx: optax optimiser over the trainable subtree; with a ``per_pass`` mechanism an optimiser
        per pass (:func:`maskdp_jax.core.per_pass.per_pass`).
      mechanism: the run's :class:`~maskdp_jax.core.mechanism.Mechanism`: its plan sets the mode, C,
        σ and the expected batch size B, its :meth:`~maskdp_jax.core.mechanism.Mechanism.accumulate`
        and :meth:`~maskdp_jax.core.mechanism.Mechanism.finish` are the step's private part (the
        library's :meth:`~maskdp_jax.core.mechanism.Mechanism.gradient` is the same two), and the
        noise comes from ``state.privacy`` (its key folded with its step).
      views: how the ``maskdp`` views of a physical batch are made (:data:`.ViewFn`): for pixel
        batches ``PixelViews(tokens)`` with the model's tokeniser; unused by ``dp`` and
        ``nonprivate``.
      microbatch_size: per-example gradients of the private pass ``m`` at a time (None: the
        whole physical batch); same update, bounded memory.
      mesh: None for one device; else a 1-D data mesh (:func:`maskdp_jax.core.parallel.make_mesh`):
        physical batches are split over its devices, each device clips the per-example gradients
        of its own examples, the sums are all-reduced, and the replicated finalisation adds one
        noise draw (same update as one device for the same state and batch). ``state`` must then
        be replicated on the mesh (:func:`maskdp_jax.core.parallel.replicate`) and the physical
        batch size a multiple of the number of devices.
      pixel_norm: the training split's ``data.clips.PixelNorm``: uint8 batches are normalised
        inside the jitted accumulation (None: batches must arrive normalised, float32).
      ghost_rules: how the private pass gets per-example norms (``config.compute.per_example``):
        None, per-example gradients by ``vmap``; the model's
        :class:`~maskdp_jax.core.ghost.LayerRule` mapping (``run.model.ghost_rules()``), from
        activations and output cotangents of one backward (:mod:`maskdp_jax.core.ghost`). Same
        update to float rounding.

    Returns:
      A :class:`~maskdp_jax.core.train_step.TrainStep`, a function of ``(state, batch:
      LogicalBatchData)``; it runs one jitted accumulation per physical batch and one jitted
      finalisation (noise + update) per logical batch. The finalisation consumes ``state`` (its
      buffers are donated): a state can be stepped once, so no two updates ever carry the same
      noise; copy a state to step it twice on purpose (``jax.tree.map(jnp.copy, state)``). The
      same inputs give the same outputs.
    """

    if microbatch_size is not None and microbatch_size <= 0:
        raise ValueError(f"microbatch_size must be > 0 or None; got {microbatch_size}.")
    if isinstance(tx, per_pass.PerPassTransformation) != mechanism.per_pass:
        raise ValueError(
            "an optimiser per pass (per_pass.per_pass) and a mechanism that hands over each "
            "pass's part (Mechanism(per_pass=True)) go together; got "
            f"{'a per-pass' if mechanism.per_pass else 'a one-sum'} mechanism with "
            f"{'a per-pass' if isinstance(tx, per_pass.PerPassTransformation) else 'one'} "
            "optimiser.")

    # A private pass over part of the parameters sums over that part (a static choice: its own
    # small program).
    zeros = (zeros_accumulator if mechanism.private_mask is None
             else jax.jit(mechanism.zeros))

    def build(public: bool):
        fn = functools.partial(accumulate, public=public, apply_fn=apply_fn,
                               mechanism=mechanism, views=views, pixel_norm=pixel_norm,
                               microbatch_size=microbatch_size, ghost_rules=ghost_rules)
        if mesh is not None:
            fn = parallel.shard_accumulation(fn, zeros, mesh)
        return compilation.jit(_named(fn, "public_pass" if public else "private_pass"),
                               donate_argnums=0)

    final = functools.partial(finalize, tx=tx, mechanism=mechanism)
    return TrainStep(public=build(True), private=build(False), zeros=zeros,
                     finalize=compilation.jit(_named(final, "finalize_step"), donate_argnums=0))


def _named(fn: Callable, name: str) -> Callable:
    """``fn`` under ``name``: its program is ``jit_<name>`` in profiles and XLA dumps (the
    passes and the finalisation are told apart by their names, not by a partial's)."""
    def call(*args):
        return fn(*args)
    call.__name__ = call.__qualname__ = name
    return call
