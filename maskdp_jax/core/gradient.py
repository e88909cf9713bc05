"""The masked DP gradient for any model and any training loop.

One logical step of MaskDP-SGD (docs/design.md) in three pure pieces that the project's own step
(:mod:`maskdp_jax.core.train_step`) is built from, and that a user's own ``jax.jit`` step can call:

* :func:`public_grad_sum`: ``sum_i w_i grad L(x_i)``, no clipping, no noise (the public pass);
* :func:`maskdp_jax.core.clipping.clipped_grad_sum`: ``sum_i w_i clip_C(grad L(x_i))`` (the private
  pass, the one place where the sensitivity C is enforced);
* :func:`noisy_gradient`: adds ``N(0, σ²C² I)`` to the private sum once per logical batch, adds
  the public sum and divides by the *expected* batch size B.

:func:`pass_gradient` is one pass over one physical batch (the public sum or the clipped private
sum, with its statistics): :func:`masked_gradient` and the project's step
(:func:`maskdp_jax.core.train_step.make_train_step`) are both built from it, so the library call and
``train.py`` compute the same update (tested in all three modes).

:func:`masked_gradient` composes them for one batch per pass: it cuts the public and private
views of pixel inputs with a :class:`~maskdp_jax.core.tokenizer.Tokenizer` and works inside the
caller's ``jax.jit`` and, with ``axis_name``, inside the caller's ``shard_map`` (per-example
gradients are taken per device, the sums all-reduced, and the noise drawn from the replicated key
once).

Why not jax_privacy's ``clipped_grad``: it clips every example's whole gradient, so it cannot
leave part of each input unprotected; the public pass here needs the noise-free gradient of the
public view, and the private pass the clipped gradient of the private view of the same video.

>>> import jax, jax.numpy as jnp
>>> from maskdp_jax.core.plan import PrivacyPlan
>>> from maskdp_jax.core.tokenizer import Tokenizer, Views
>>> plan = PrivacyPlan.calibrate(mode="maskdp", num_examples=100, batch_size=2, epochs=1,
...     l2_clip_norm=1.0, delta=1e-3, noise_multiplier=1.0)
>>> def loss(w, image, label):                     # one example: image [H, W, C]
...     return jnp.sum(w * image) * label
>>> images = jnp.ones((2, 4, 4, 1)); masks = jnp.zeros((2, 4, 4)).at[:, :2].set(1)
>>> batch = Examples(inputs=images, targets=jnp.ones(2), masks=masks)
>>> grad, stats = masked_gradient(loss, jnp.zeros((4, 4, 1)), plan=plan, key=jax.random.key(0),
...     public=batch, private=batch, tokens=Tokenizer(patch_stride=(2, 2)))
>>> grad.shape, float(stats.public_count), float(stats.clip.count)
((4, 4, 1), 2.0, 2.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from maskdp_jax.core import bandmf, clipping, noise, partition, tokenizer
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.tokenizer import Tokenizer, Views

PyTree = Any
# loss_fn(params, inputs, targets) -> scalar loss of ONE example (no batch axis).
ExampleLoss = Callable[[PyTree, Any, Any], jnp.ndarray]


def _is_concrete(x: Any) -> bool:
    """An array whose values the host can read now (not a tracer inside ``jit``/``vmap``)."""
    return isinstance(x, np.ndarray) or (isinstance(x, jax.Array)
                                        and not isinstance(x, jax.core.Tracer))


def _rows(x: Any) -> int | None:
    leaves = [leaf for leaf in jax.tree.leaves(x) if hasattr(leaf, "shape") and leaf.ndim]
    return int(leaves[0].shape[0]) if leaves else None


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Examples:
    """One physical batch of one pass, ``P`` rows, checked where it is built.

    Attributes:
      inputs: ``[P, ...]`` the model input of each example: pixels ``[P, ..., T, H, W, C]`` for a
        video tokeniser, ``[P, ..., H, W, C]`` for an image tokeniser (any axes between ``P`` and
        the pixels, e.g. K clips of a video, are kept and belong to the same example).
      targets: pytree of ``[P, ...]`` (labels; public under masked adjacency).
      masks: ``[P, ..., T, H, W]`` (or ``[P, ..., H, W]``) pixel masks, 1 = public, 0 = private
        (bool, {0, 1} or {0, 255}). Public information; needed by the ``maskdp`` mode only.
      weights: ``[P]`` in {0, 1} (or bool), 0 for padding rows (they contribute exactly zero);
        None: all 1.
      fills: ``maskdp`` only: ``[P, ...]`` shaped like ``inputs``, the pixels each view writes
        where it hides a cell, in the inputs' units (e.g. a background of the same scene without
        the person, or the public cells of another frame), instead of the tokeniser's fixed
        pattern (:func:`~maskdp_jax.core.tokenizer.hidden_fill`). **Public data**: the public
        view is then a function of the public pixels, the mask and the fill, so a fill must not
        depend on any private pixel (a fill made from the example's own private region would
        put it into the noise-free pass). None: the fixed pattern.

    Privacy: the accountant assumes that one example moves the clipped sum by at most C. A weight
    of 2 would count an example twice (sensitivity 2C), a negative one would subtract it, and a
    soft mask would make uncertain pixels public; so, when the arrays are concrete (built on the
    host, before the caller's ``jit``), construction refuses weights outside {0, 1}, non-binary
    masks (:func:`maskdp_jax.core.tokenizer.check_mask_values`, the data loader's rule) and row
    counts that disagree. Inside ``jit`` the values are tracers and are not checked again.

    Raises:
      ValueError: as above, with the offending values.
    """

    inputs: Any
    targets: Any
    masks: Any = None
    weights: Any = None
    fills: Any = None

    def __post_init__(self):
        rows = {name: _rows(getattr(self, name)) for name in ("inputs", "targets", "masks",
                                                               "weights", "fills")}
        known = {name: n for name, n in rows.items() if n is not None}
        if len(set(known.values())) > 1:
            raise ValueError(f"Examples fields disagree on the number of rows P: {known}.")
        if _is_concrete(self.weights):
            weights = np.asarray(self.weights)
            if weights.ndim != 1:
                raise ValueError(f"Examples.weights must be [P]; got shape {weights.shape}.")
            if weights.dtype != np.bool_ and not np.all((weights == 0) | (weights == 1)):
                bad = np.unique(weights[(weights != 0) & (weights != 1)])[:6].tolist()
                raise ValueError(
                    f"Examples.weights must be 0 (padding) or 1 (an example), or bool; got "
                    f"{bad}. A weight w counts an example w times: its sensitivity would be "
                    "|w| C while the accountant assumes C.")
        if _is_concrete(self.masks):
            tokenizer.check_mask_values(self.masks, name="Examples.masks")

    def replace(self, **changes: Any) -> Examples:
        """A copy with ``changes`` (checked like a new one)."""
        return dataclasses.replace(self, **changes)


class GradStats(NamedTuple):
    """What a step may log. ``clip`` is computed from private data and is **not** DP: log it only
    when the user opts in.

    Attributes:
      public_loss_sum: sum of the public pass's weighted losses (public data).
      public_count: sum of the public pass's weights (examples zeroed as non-finite excluded).
      clip: the private pass's :class:`~maskdp_jax.core.clipping.ClipStats`.
      public_nonfinite: real public examples whose input held NaN or inf: zeroed and counted,
        as the private pass does (``clip.num_nonfinite``).
    """

    public_loss_sum: jnp.ndarray
    public_count: jnp.ndarray
    clip: clipping.ClipStats
    public_nonfinite: jnp.ndarray = np.zeros((), np.float32)


def public_grad_sum(
    loss_fn: Callable[[PyTree, Any], jnp.ndarray], params: PyTree, examples: Any,
    weights: jnp.ndarray,
) -> tuple[PyTree, jnp.ndarray]:
    """``sum_i w_i grad L(params, example_i)``: the public pass, unclipped and noise-free.

    Only public data may enter it (public views, or whole videos in ``nonprivate``): nothing
    bounds one example's influence on this sum.

    Args:
      loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example (the signature of
        :func:`~maskdp_jax.core.clipping.clipped_grad_sum`, so both passes share one loss).
      params: the pytree the gradient is taken against (trainable parameters).
      examples: pytree of ``[P, ...]`` arrays.
      weights: ``[P]``; a weight-0 row may hold anything (inf/NaN included) and contributes 0.

    Returns:
      ``(grad_sum, loss_sum)``: the structure of ``params`` and the scalar ``sum_i w_i L_i``.
      A real row whose floating inputs hold NaN or inf is dropped like a padding row (so one
      corrupt example cannot make the update non-finite);
      :func:`maskdp_jax.core.gradient.public_nonfinite` counts them.

    >>> import jax.numpy as jnp
    >>> g, l = public_grad_sum(lambda w, x: jnp.sum((w + 1) * x), jnp.zeros(2),
    ...                        jnp.array([[1.0, 2.0], [jnp.nan, 0.0]]), jnp.array([1.0, 1.0]))
    >>> g.tolist(), float(l)
    ([1.0, 2.0], 3.0)
    """
    real = (weights > 0) & finite_rows(examples)
    # Double where: a weight-0 row's input is replaced before the model (its forward and
    # backward stay finite: 0 * inf would be NaN in the sum's gradient), its loss after.
    examples = jax.tree.map(
        lambda x: jnp.where(real.reshape(-1, *[1] * (x.ndim - 1)), x, jnp.zeros_like(x)),
        examples)

    def weighted_sum(p):
        losses = jax.vmap(loss_fn, in_axes=(None, 0))(p, examples)
        losses = jnp.where(real, losses, 0.0)
        return jnp.sum(weights * losses)

    loss_sum, grads = jax.value_and_grad(weighted_sum)(params)
    return grads, loss_sum


def finite_rows(examples: Any) -> jnp.ndarray:
    """``[P]`` bool: every floating value of the row is finite (integer leaves always are)."""
    leaves = [x for x in jax.tree.leaves(examples) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.ones(jax.tree.leaves(examples)[0].shape[0], bool)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x.reshape(x.shape[0], -1)), axis=1)
                              for x in leaves]), axis=0)


def public_nonfinite(examples: Any, weights: jnp.ndarray) -> jnp.ndarray:
    """How many real (weight > 0) rows :func:`public_grad_sum` dropped as non-finite."""
    return jnp.sum((weights > 0) & ~finite_rows(examples)).astype(jnp.float32)


def _check_sums(public_sum: PyTree | None, private_sum: PyTree | None, plan: PrivacyPlan) -> None:
    mode = plan.mode
    if (public_sum is None) == mode.has_public_pass or (private_sum is None) == \
            mode.has_private_pass:
        raise ValueError(
            f"mode {mode.value!r} needs public_sum {'given' if mode.has_public_pass else 'None'}"
            f" and private_sum {'given' if mode.has_private_pass else 'None'}.")


def private_part(params: PyTree, private_mask: PyTree | None) -> PyTree:
    """The parameters the private pass trains: those of ``private_mask`` (a tree of booleans
    in the structure of ``params``; True: trained by the private pass), or all of ``params``
    without a mask."""
    return params if private_mask is None else partition.split(params, private_mask)[0]


def _average(public_sum: PyTree | None, noised_private: PyTree | None,
             plan: PrivacyPlan) -> PyTree:
    """``(public_sum + noised_private) / B``, B the plan's *expected* batch size. A private sum
    over part of the parameters (:func:`private_part`) is added to those leaves of the public
    sum; the others are the public sum alone: no private gradient and no noise reaches them."""
    parts = [p for p in (public_sum, noised_private) if p is not None]
    if len(parts) == 2 and jax.tree.structure(public_sum) != jax.tree.structure(noised_private):
        total = traverse_util.flatten_dict(public_sum)
        for path, value in traverse_util.flatten_dict(noised_private).items():
            total[path] = total[path] + value
        total = traverse_util.unflatten_dict(total)
    else:
        total = parts[0] if len(parts) == 1 else jax.tree.map(jnp.add, *parts)
    return jax.tree.map(lambda g: g / plan.batch_size, total)


def noisy_gradient(
    public_sum: PyTree | None, private_sum: PyTree | None, key: jax.Array, *, plan: PrivacyPlan,
) -> PyTree:
    """``(public_sum + private_sum + N(0, σ²C² I)) / B``: the update direction of one logical step.

    Privacy: the noise is drawn once per logical batch, with std ``σ C`` from the plan, and the
    sum is divided by the plan's *expected* batch size B (dividing by the sampled size would leak
    it). In private modes ``private_sum`` must be the sum of every clipped contribution of the
    logical batch (all physical batches, all devices); call this once per step.

    Args:
      public_sum / private_sum: the passes' sums (None where the mode has no such pass).
      key: this step's noise key: fresh every step (e.g. ``fold_in(base, step)``), secret
        (:mod:`maskdp_jax.core.randomness`), and the same on every replica.
      plan: the run's :class:`~maskdp_jax.core.plan.PrivacyPlan` (mode, σ, C, B) with independent
        noise (a banded plan's noise has state:
        :func:`~maskdp_jax.core.gradient.banded_noisy_gradient`).

    Raises:
      ValueError: a sum is missing for a pass the mode has, or given for one it lacks; or the
        plan's noise is banded.
    """
    _check_sums(public_sum, private_sum, plan)
    if plan.banded:
        raise ValueError("the plan's noise is banded: its noise is correlated across steps and "
                         "has a state, use banded_noisy_gradient(..., noise_state).")
    noised = None if private_sum is None else noise.add_gaussian_noise(
        private_sum, key, noise_multiplier=plan.noise_multiplier, l2_clip_norm=plan.l2_clip_norm)
    return _average(public_sum, noised, plan)


def banded_noisy_gradient(
    public_sum: PyTree | None, private_sum: PyTree, key: jax.Array, noise_state: Any, *,
    plan: PrivacyPlan,
) -> tuple[PyTree, Any]:
    """:func:`noisy_gradient` with BandMF's correlated noise: ``(public_sum + private_sum +
    σC (𝐂⁻¹ z)_t) / B`` and the next noise state (:mod:`maskdp_jax.core.bandmf`; ``z_t`` is the
    standard normal draw of ``key``, this step's key).

    Args:
      noise_state: the :class:`~maskdp_jax.core.bandmf.NoiseState` before this step (secret: it
        holds past noise), e.g. ``TrainState.noise_state``.
      others: as :func:`noisy_gradient`; the plan must be banded.

    Returns:
      ``(grad, noise_state)``.
    """
    _check_sums(public_sum, private_sum, plan)
    if not plan.banded:
        raise ValueError("banded_noisy_gradient needs a plan with noise='banded'.")
    correlated, noise_state = bandmf.for_plan(plan).noise_like(
        private_sum, key, noise_state, noise_multiplier=plan.noise_multiplier,
        l2_clip_norm=plan.l2_clip_norm)
    return _average(public_sum, jax.tree.map(jnp.add, private_sum, correlated), plan), noise_state


def noisy_update(
    public_sum: PyTree | None, private_sum: PyTree | None, key: jax.Array, noise_state: Any, *,
    plan: PrivacyPlan,
) -> tuple[PyTree, Any]:
    """The update direction of one logical step and the next noise state, whichever noise the
    plan adds: :func:`banded_noisy_gradient` for a banded plan, :func:`noisy_gradient` (the
    state, None, passed through) otherwise. What the train step and the
    :class:`~maskdp_jax.core.mechanism.Mechanism` call.

    Raises:
      ValueError: a banded plan without its noise state, or as the two functions.
    """
    if not plan.banded:
        return noisy_gradient(public_sum, private_sum, key, plan=plan), noise_state
    if noise_state is None:
        raise ValueError("a banded plan's noise has a state: create it with the plan "
                         "(TrainState.create(..., plan=plan), Mechanism.init(params)).")
    return banded_noisy_gradient(public_sum, private_sum, key, noise_state, plan=plan)


def noisy_parts(
    public_sum: PyTree, private_sum: PyTree, key: jax.Array, noise_state: Any, *,
    plan: PrivacyPlan,
) -> tuple[PyTree, PyTree, Any]:
    """:func:`noisy_update`'s direction in its two parts, for an optimiser per pass
    (:mod:`maskdp_jax.core.per_pass`): ``public_sum / B``, ``(private_sum + noise) / B`` in the
    structure of ``public_sum`` (zero, without noise, on leaves a private pass over part of the
    parameters leaves out) and the next noise state. The same noise, drawn once from ``key``,
    and the same expected B as the one-sum direction, which is their sum.

    Raises:
      ValueError: as :func:`noisy_update` (both sums are needed: ``maskdp``).
    """
    noised, noise_state = noisy_update(jax.tree.map(jnp.zeros_like, public_sum), private_sum,
                                       key, noise_state, plan=plan)
    return _average(public_sum, None, plan), noised, noise_state


def pass_gradient(
    loss_fn: Callable[[PyTree, Any], jnp.ndarray], params: PyTree, examples: Any,
    weights: jnp.ndarray, *, public: bool, plan: PrivacyPlan,
    microbatch_size: int | None = None, ghost_rules: Any = None,
    private_mask: PyTree | None = None,
) -> tuple[PyTree, GradStats]:
    """One pass over one physical batch: the sum it adds to the logical step, and its stats.

    ``public=True``: :func:`public_grad_sum` (no clipping: public data only). ``public=False``:
    :func:`maskdp_jax.core.clipping.clipped_grad_sum` with the plan's C (each example's gradient
    clipped, per-example gradients ``microbatch_size`` at a time, or their norms from
    ``ghost_rules``, the same sum). The inputs are what the pass may see: public views (or whole
    videos in ``nonprivate``) for the public pass, private views (or whole videos in ``dp``) for
    the private one (:func:`pass_examples`, :func:`pass_view`).

    Args:
      loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
      params: the trainable parameters.
      examples: pytree of ``[P, ...]``.
      weights: ``[P]`` in {0, 1}.
      public: which pass.
      plan: the run's plan (C for the private pass).
      microbatch_size / ghost_rules: how the private pass gets per-example norms.
      private_mask: the private pass trains only these leaves of ``params`` (True), the others
        closed over as constants: its clipped sum, hence C and the noise, cover those leaves
        alone (:func:`private_part`); None: all of ``params``. Not with ``ghost_rules``.

    Returns:
      ``(sum, stats)``: the structure of ``params`` (the private pass with a mask: of its part)
      and this pass's :class:`GradStats` (the other pass's fields zero), to add over physical
      batches and passes.
    """
    zero = jnp.zeros((), jnp.float32)
    if public:
        grads, loss_sum = public_grad_sum(loss_fn, params, examples, weights)
        dropped = public_nonfinite(examples, weights)
        return grads, GradStats(loss_sum, jnp.sum(weights) - dropped,
                                clipping.ClipStats.zeros(), dropped)
    if private_mask is not None:
        if ghost_rules is not None:
            raise ValueError("ghost norms follow every trainable layer; a private pass over part "
                             "of the parameters takes its per-example gradients by vmap "
                             "(compute.per_example='vmap').")
        params, rest = partition.split(params, private_mask)
        whole_loss = loss_fn

        def loss_fn(part, example):
            return whole_loss(partition.merge(part, rest), example)

    grads, clip = clipping.clipped_grad_sum(
        loss_fn, params, examples, weights, l2_clip_norm=plan.l2_clip_norm,
        microbatch_size=microbatch_size, ghost_rules=ghost_rules)
    return grads, GradStats(zero, zero, clip, zero)


def pass_view(views: Views, weights: jnp.ndarray, *, public: bool) -> tuple[Any, jnp.ndarray]:
    """One pass's view of a physical batch and its weights ``[P]``: the public
    (``public=True``) or private view, weighted 0 for an example without a cell of that part in
    any of its clips (so an absent private part contributes exactly zero private gradient, what
    the ``special`` adjacency's accounting assumes).

    Args:
      views: :class:`~maskdp_jax.core.tokenizer.Views` with leading axes ``[P, ...]``.
      weights: ``[P]`` in {0, 1}.
    """
    has = views.has_public if public else views.has_private
    has = jnp.any(has.reshape(weights.shape[0], -1), axis=1)
    return (views.public if public else views.private), weights * has


def pass_examples(
    examples: Examples, *, public: bool, plan: PrivacyPlan, tokens: Tokenizer | None,
) -> tuple[Any, jnp.ndarray]:
    """The inputs and weights ``[P]`` one pass sees: :func:`pass_view` of the examples in
    ``maskdp``, the inputs themselves in ``dp`` and ``nonprivate``.

    Raises:
      ValueError: ``maskdp`` without masks or without a tokeniser.
    """
    weights = examples.weights
    if weights is None:
        weights = jnp.ones(jax.tree.leaves(examples.targets)[0].shape[0], jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    if not plan.mode.uses_views:
        if examples.fills is not None:
            raise ValueError(f"Examples.fills are what MaskDP's views write into hidden cells; "
                             f"mode {plan.mode.value!r} sees whole inputs: leave fills=None.")
        return examples.inputs, weights
    if examples.masks is None or tokens is None:
        raise ValueError("mode 'maskdp' cuts public and private views: give Examples(masks=...) "
                         "and tokens=Tokenizer(patch_stride=...) (or tokenizer_for(model)).")
    fills = None if examples.fills is None else jnp.asarray(examples.fills)
    return pass_view(tokens.views(examples.inputs, examples.masks, fill=fills), weights,
                     public=public)


def masked_sums(
    loss_fn: ExampleLoss, params: PyTree, *, plan: PrivacyPlan,
    public: Examples | None = None, private: Examples | None = None,
    tokens: Tokenizer | None = None, axis_name: str | None = None,
    microbatch_size: int | None = None, ghost_rules: Any = None,
    private_mask: PyTree | None = None,
) -> tuple[PyTree | None, PyTree | None, GradStats]:
    """The two passes' sums of one logical batch before any noise: ``(public_sum,
    private_sum, stats)`` (None for a pass the mode lacks), all-reduced over ``axis_name``.
    What :func:`masked_gradient` and :meth:`maskdp_jax.core.mechanism.Mechanism.gradient` noise;
    arguments as :func:`masked_gradient`, and ``private_mask`` as :func:`pass_gradient`. The
    private sum is clipped but not private yet: it must be noised (once) before it leaves."""
    mode = plan.mode
    for name, given, needed in (("public", public, mode.has_public_pass),
                                ("private", private, mode.has_private_pass)):
        if (given is not None) != needed:
            raise ValueError(f"mode {mode.value!r} {'needs' if needed else 'has no'} a {name} "
                             f"pass: give {name}={'Examples(...)' if needed else 'None'}.")
    if axis_name is not None:
        params = jax.tree.map(lambda x: jax.lax.pcast(x, axis_name, to="varying"), params)

    def example_loss(p, example):
        return loss_fn(p, *example)

    zero = jnp.zeros((), jnp.float32)
    sums = {}
    stats = GradStats(zero, zero, clipping.ClipStats.zeros(), zero)
    for is_public, batch in ((True, public), (False, private)):
        if batch is None:
            continue
        mask = None if is_public else private_mask
        if _rows(batch.inputs) == 0:  # an empty draw: this pass adds nothing (the noise stays)
            sums[is_public] = jax.tree.map(jnp.zeros_like, private_part(params, mask))
            continue
        inputs, weights = pass_examples(batch, public=is_public, plan=plan, tokens=tokens)
        sums[is_public], pass_stats = pass_gradient(
            example_loss, params, (inputs, batch.targets), weights, public=is_public, plan=plan,
            microbatch_size=microbatch_size, ghost_rules=ghost_rules, private_mask=mask)
        stats = jax.tree.map(jnp.add, stats, pass_stats)
    public_sum, private_sum = sums.get(True), sums.get(False)
    if axis_name is not None:
        public_sum, private_sum, stats = jax.lax.psum((public_sum, private_sum, stats),
                                                      axis_name)
    return public_sum, private_sum, stats


def masked_gradient(
    loss_fn: ExampleLoss, params: PyTree, *, plan: PrivacyPlan, key: jax.Array,
    public: Examples | None = None, private: Examples | None = None,
    tokens: Tokenizer | None = None, axis_name: str | None = None,
    microbatch_size: int | None = None, ghost_rules: Any = None,
) -> tuple[PyTree, GradStats]:
    """The noisy MaskDP (or DP, or non-private) gradient of one logical batch (low level).

    The caller owns what :class:`maskdp_jax.core.mechanism.Mechanism` does for a training loop: a
    fresh ``key`` at every step (:func:`maskdp_jax.core.noise.step_key`; one key reused adds the
    same noise twice), batches drawn by the plan's sampling scheme, charging every call to a ledger
    and stopping at the plan's steps. Independent noise only: a banded plan's noise has a state
    that the :class:`~maskdp_jax.core.mechanism.Mechanism` carries (or
    :func:`~maskdp_jax.core.gradient.masked_sums` and
    :func:`~maskdp_jax.core.gradient.banded_noisy_gradient`).

    ``maskdp``: public views of ``public`` unclipped, private views of ``private`` clipped per
    example to C, noise ``N(0, σ²C²)`` once, everything divided by the expected batch size B.
    ``dp``: ``private`` only, whole inputs clipped. ``nonprivate``: ``public`` only, whole
    inputs, no noise. With decoupled sampling the two passes see two independent Poisson draws
    (:class:`~maskdp_jax.core.sampling.PoissonSampler`); with coupled sampling the same rows.

    Args:
      loss_fn: ``loss_fn(params, inputs, targets) -> scalar`` for ONE example (no batch axis);
        frozen parameters and the model are closed over.
      params: the trainable parameters (the gradient's structure).
      plan: the run's :class:`~maskdp_jax.core.plan.PrivacyPlan`.
      key: this step's noise key (see :func:`noisy_gradient`).
      public / private: the :class:`Examples` of each pass this mode has (None for the other).
        A pass with 0 rows adds nothing: the step is then the noise alone (and the other
        pass), as the mechanism requires of an empty Poisson draw.
      tokens: the model's tokeniser (``maskdp`` only): its cells are what is public.
      axis_name: inside the caller's ``shard_map`` over this mesh axis, with the examples split
        over it and ``params`` and ``key`` replicated: each device clips its own examples'
        gradients (params are cast to varying first, so no per-example gradient is summed over
        devices before clipping), the sums are ``psum``-ed, and every device adds the same noise.
      microbatch_size: per-example gradients of the private pass this many at a time
        (:func:`~maskdp_jax.core.clipping.clipped_grad_sum`); same result, bounded memory.
      ghost_rules: the model's layer rules (:mod:`maskdp_jax.core.ghost`): the private pass' norms
        and clipped sum without per-example gradients; same result to float rounding.

    Returns:
      ``(grad, stats)``: the gradient to hand to the optimiser, and :class:`GradStats`.

    Raises:
      ValueError: a pass's batch missing or superfluous for the mode, views without masks, or
        a banded plan.
    """
    public_sum, private_sum, stats = masked_sums(
        loss_fn, params, plan=plan, public=public, private=private, tokens=tokens,
        axis_name=axis_name, microbatch_size=microbatch_size, ghost_rules=ghost_rules)
    return noisy_gradient(public_sum, private_sum, key, plan=plan), stats
