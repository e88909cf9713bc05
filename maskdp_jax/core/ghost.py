"""Per-example gradient norms and the clipped sum without per-example gradients (book-keeping).

The private pass needs, for every example ``i`` of a physical batch, the norm of its gradient
``‖∇L_i‖`` (to clip it) and the weighted sum ``Σ_i c_i ∇L_i`` with ``c_i = w_i C / max(‖∇L_i‖,
C)``. :func:`maskdp_jax.core.clipping.clipped_grad_sum`'s default path materialises every ``∇L_i``
(``vmap`` of a per-example backward). For a layer whose parameter enters as ``y = a W`` the
per-example gradient is ``a_iᵀ g_i`` (``a_i``: the layer's input over example ``i``'s tokens,
``g_i = ∂L_i/∂y_i``: its output cotangent), so its squared norm is either ``‖a_iᵀ g_i‖²``
computed directly or the ghost norm ``Σ (a_i a_iᵀ) ⊙ (g_i g_iᵀ)`` (Goodfellow 2015; Li et al.
2021), whichever the shapes make cheaper (Bu et al. 2023's mixed mode). The clipped sum is then
formed book-keeping's way (Bu et al. 2023) from the same backward: where the norm materialised the
per-example gradients (the direct mode, and every small parameter) they are weighted by the clip
factors and summed; where it did not (the ghost norm) one product per layer, ``aᵀ (c ⊙ g)``.
Only ``a`` and ``g`` are needed, and one ordinary backward gives every ``g``.

How: a JAX transformation of the loss, so the model code stays as it is (a rule's method must be
the only use of its layer's parameters; the tests compare both paths on our models).
:func:`clipped_sum` runs the per-example loss under ``jax.vmap`` inside a Flax method interceptor
(``flax.linen.intercept_methods``). Each call of a layer that owns trainable parameters and has a
:class:`LayerRule` keeps what its rule needs of the call's inputs (``a``) and adds a zero
perturbation ``z`` to its output; the gradient of ``Σ_i L_i`` w.r.t. the perturbations is every
layer's output cotangent ``g`` (one backward, w.r.t. activations only, so it stops at the lowest
trainable layer). The rules (:class:`LayerRule`, one per layer kind, given by the caller: the
model's are in ``models/ghost_rules.py``) turn ``(a, g)`` into per-example squared norms and,
after the clip factors are known, into the clipped sum.

No silent fallback: a layer owning a trainable parameter without a rule, a rule that does not
cover all of a layer's trainable parameters, or a layer called twice in one example's loss (its
gradient would be a sum over calls, which no per-call rule sees) is an error naming the layer.

Privacy: the result is the same function as the ``vmap`` path's (tests compare the two on the
model: every per-example norm, the clipped sum and the statistics), so the sensitivity argument of
:mod:`maskdp_jax.core.clipping` is unchanged: each example contributes ``c_i ∇L_i`` with norm ``<=
C``; an example with a non-finite loss or norm, or weight 0, contributes exactly zero (its rows are
replaced by zeros with ``where`` before any product, :class:`ClipWeights`, so a NaN cannot leak
into the sum).

Why written here: no library does this for our model in JAX. paxml's ``ghostnorm`` has
``custom_vjp`` layers for Linear, Embedding and bias only (no LayerNorm, convolution or attention
position tables, and it needs its own layer classes in the model); jax_privacy has no ghost
clipping; Opacus (ghost clipping) and fastDP (book-keeping) are PyTorch, built on module hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

PyTree = Any
Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """How one kind of layer's per-example gradients follow from one call's input and output
    cotangent.

    All arrays handed to ``per_example`` carry a leading example axis ``[P, ...]`` (then whatever
    one example's call saw, e.g. ``[K clips, tokens, width]``).

    Attributes:
      params: names of the layer's parameters the rule covers (a trainable parameter of the
        layer outside this set is an error).
      tap: ``tap(module, args, kwargs) -> (a, static)`` inside the intercepted call (one
        example): ``a``, a pytree of arrays the rule needs (``None`` for none); ``static``,
        hashable Python values (sizes, strides).
      per_example: ``per_example(static, a, g, names) -> (sq_norms, clipped_sum[, sq_rounding])``,
        ``g`` the pytree of the method's output cotangents (its output's structure), ``names``
        the trainable parameters among ``params``. ``sq_norms``: ``{name: [P]}``, each
        parameter's squared per-example gradient norm. ``clipped_sum(weights) -> {name: array}``:
        each parameter's ``Σ_i factor_i ∇_i`` (any shape with the parameter's number of
        elements), formed with the :class:`ClipWeights` it is given, which drop an example's row
        exactly. What both need is computed once: a per-example gradient the norm materialised
        (the direct mode) is summed with the weights, not computed again. ``sq_rounding``
        (optional, ``[P]``): where ``clipped_sum`` rounds the factor-scaled cotangents to a
        narrower dtype before a product (:meth:`ClipWeights.scaled`), a bound ``r_i²`` on the
        squared norm that rounding can add to example ``i``'s contribution per unit of its
        factor; the clip factor then keeps ``factor_i (‖∇L_i‖ + r_i) <= C``
        (:func:`clipped_sum`).
    """

    params: tuple[str, ...]
    tap: Callable[[nn.Module, tuple, dict], tuple[PyTree, Any]]
    per_example: Callable[..., tuple]


@dataclasses.dataclass(frozen=True)
class ClipWeights:
    """The clip factors of one physical batch, as the rules apply them.

    ``factor [P]`` float32: ``w_i C / max(‖∇L_i‖, C)`` for a kept example, exactly 0 for a dropped
    one (weight 0, or a non-finite loss or norm, whose rows may hold NaN or inf). Every method
    replaces a dropped row by zeros with ``where`` (a product would keep its NaN).
    """

    factor: jax.Array
    keep: jax.Array  # [P] bool

    def _where(self, x: jax.Array, value: jax.Array) -> jax.Array:
        keep = self.keep.reshape(-1, *[1] * (x.ndim - 1))
        return jnp.where(keep, value, jnp.zeros((), value.dtype))

    def rows(self, x: jax.Array) -> jax.Array:
        """``x [P, ...]``'s rows times their factors, in float32 (a bfloat16 factor could round
        above ``C / norm``)."""
        x = x.astype(jnp.float32)
        return self._where(x, x * self.factor.reshape(-1, *[1] * (x.ndim - 1)))

    def scaled(self, x: jax.Array) -> jax.Array:
        """:meth:`rows` rounded back to ``x``'s dtype: the input of a product in the compute
        dtype. A factor of exactly 1 (an unclipped example) leaves the row exact; a clipped
        row's rounding (each element's relative error below ``eps`` of ``x``'s dtype, both
        roundings counted) is what a rule's ``sq_rounding`` bounds."""
        return self.rows(x).astype(x.dtype)

    def kept(self, x: jax.Array) -> jax.Array:
        """``x [P, ...]`` with the dropped rows zeroed (an input multiplied by :meth:`rows`)."""
        return self._where(x, x)

    def sum(self, per_example: jax.Array) -> jax.Array:
        """``Σ_i factor_i x_i`` over the examples of ``x [P, ...]``."""
        return jnp.sum(self.rows(per_example), axis=0)


# (module class, method name) -> the rule of that method's calls.
Rules = Mapping[tuple[type, str], LayerRule]


@dataclasses.dataclass
class _Tap:
    rule: LayerRule
    static: Any
    a: PyTree
    out: PyTree  # the method's output, to shape the perturbations


def _layer_name(path: Path) -> str:
    return "/".join(path) or "<root>"


class _Interceptor:
    """Taps every call of a rule's method on a layer that owns trainable parameters."""

    def __init__(self, rules: Rules, owners: Mapping[Path, tuple[str, ...]],
                 perturbations: Mapping[Path, PyTree] | None):
        self.rules, self.owners, self.perturbations = rules, owners, perturbations
        self.taps: dict[Path, _Tap] = {}
        self.classes: dict[Path, type] = {}

    def __call__(self, next_fun, args, kwargs, context):
        module = context.module
        path = tuple(module.path)
        if path not in self.owners:
            return next_fun(*args, **kwargs)
        self.classes.setdefault(path, type(module))
        rule = self.rules.get((type(module), context.method_name))
        if rule is None:
            return next_fun(*args, **kwargs)
        if path in self.taps:
            raise ValueError(
                f"layer {_layer_name(path)} ({type(module).__name__}) is called more than once "
                "in one example's loss: its gradient is a sum over the calls, which no "
                "per-call ghost rule sees. Use compute.per_example='vmap' for this model.")
        out = next_fun(*args, **kwargs)
        a, static = rule.tap(module, args, kwargs)
        if self.perturbations is not None:
            out = jax.tree.map(jnp.add, out, self.perturbations[path])
        self.taps[path] = _Tap(rule, static, a, out)
        return out


def _owners(trainable: PyTree) -> dict[Path, tuple[str, ...]]:
    """Module path -> names of its trainable parameters."""
    if not isinstance(trainable, Mapping):
        raise TypeError("per-example norms by ghost rules need the trainable parameters as a "
                        f"Flax parameter dict; got {type(trainable).__name__}.")
    owners: dict[Path, list[str]] = {}
    for key in traverse_util.flatten_dict(trainable):
        owners.setdefault(tuple(key[:-1]), []).append(key[-1])
    return {path: tuple(names) for path, names in owners.items()}


def _check_coverage(owners, taps: Mapping[Path, _Tap], classes: Mapping[Path, type]) -> None:
    for path, names in owners.items():
        cls = classes.get(path)
        layer = f"layer {_layer_name(path)}" + (f" ({cls.__name__})" if cls else "")
        if path not in taps:
            reason = ("has no ghost rule" if cls else
                      "is never called by the loss (its gradient is zero; freeze it)")
            raise ValueError(f"{layer} {reason}, but its parameters {list(names)} train: add a "
                             "rule for it (models/ghost_rules.py) or use "
                             "compute.per_example='vmap'.")
        missing = sorted(set(names) - set(taps[path].rule.params))
        if missing:
            raise ValueError(f"{layer}: its ghost rule covers {list(taps[path].rule.params)}, "
                             f"not the trainable {missing}; extend the rule or use "
                             "compute.per_example='vmap'.")


def clipped_sum(
    loss_fn: Callable[[PyTree, Any], jnp.ndarray], trainable: PyTree, examples: Any,
    weights: jnp.ndarray, *, l2_clip_norm: float, rules: Rules,
) -> tuple[PyTree, jax.Array, jax.Array, jax.Array]:
    """``Σ_i w_i clip_C(∇L_i)`` and each example's gradient norm, by the layers' rules.

    Args:
      loss_fn, trainable, examples, weights, l2_clip_norm: as for
        :func:`maskdp_jax.core.clipping.clipped_grad_sum` (``loss_fn`` of ONE example; ``trainable``
        a Flax parameter dict; ``examples`` with a leading axis ``[P, ...]``; ``weights [P]`` in
        {0, 1}).
      rules: the :class:`LayerRule` of every layer kind that owns trainable parameters.

    Returns:
      ``(grad_sum, norms, losses, finite)``: the clipped sum (``trainable``'s structure), and per
      example ``[P]`` the gradient norm (0 where not finite), the loss and whether both were
      finite. :func:`maskdp_jax.core.clipping.clipped_grad_sum` turns them into its statistics.

    Raises:
      ValueError: a layer owning trainable parameters has no rule, is only partly covered by
        its rule, or is called twice in one example's loss.
    """
    owners = _owners(trainable)
    first = jax.tree.map(lambda x: x[0], examples)

    def forward(perturbations, example):
        tapper = _Interceptor(rules, owners, perturbations)
        with nn.intercept_methods(tapper):
            loss = loss_fn(trainable, example)
        return loss, tapper

    # One abstract trace of one example: which layers are tapped, their outputs' shapes, the
    # rules' static values; and the coverage check, before anything is computed.
    probe: list[_Interceptor] = []
    jax.eval_shape(lambda ex: probe.append(forward(None, ex)[1]) or 0.0, first)
    tapper = probe[0]
    _check_coverage(owners, tapper.taps, tapper.classes)
    statics = {path: tap.static for path, tap in tapper.taps.items()}
    size = weights.shape[0]
    zeros = {path: jax.tree.map(lambda o: jnp.zeros((size, *o.shape), o.dtype), tap.out)
             for path, tap in tapper.taps.items()}

    def batched(perturbations):
        def one(z, example):
            loss, tapped = forward(z, example)
            return loss, {path: tap.a for path, tap in tapped.taps.items()}
        return jax.vmap(one)(perturbations, examples)

    losses, backward, acts = jax.vjp(batched, zeros, has_aux=True)
    (cotangents,) = backward(jnp.ones_like(losses))

    def rule_of(path):
        return tapper.taps[path].rule

    total = jnp.zeros((size,), jnp.float32)
    rounding = jnp.zeros((size,), jnp.float32)
    finish = {}
    for path, names in owners.items():
        out = rule_of(path).per_example(statics[path], acts[path], cotangents[path], names)
        sq_norms, finish[path] = out[:2]
        for sq in sq_norms.values():
            total = total + sq.astype(jnp.float32)
        if len(out) > 2:
            rounding = rounding + out[2].astype(jnp.float32)
    # A ghost norm is a sum of products that may round a hair below 0; NaN stays NaN.
    norms = jnp.sqrt(jnp.maximum(total, 0.0))
    # An example whose rounding bound is not finite (its activations' norm overflows) cannot be
    # scaled within C: it is dropped and counted with the non-finite ones.
    finite = jnp.isfinite(norms) & jnp.isfinite(losses) & jnp.isfinite(rounding)
    norms = jnp.where(finite, norms, 0.0)
    keep = (weights > 0) & finite
    # C / max(norm, C): exactly 1 below the threshold, as in the vmap path, so an unclipped
    # example's cotangents pass unrounded. A clipped example whose products round its scaled
    # cotangents (a compute dtype narrower than float32) is scaled to C / (norm + r), r the
    # rules' bound on what the rounding can add, so its contribution stays within C (the
    # sensitivity), not within C plus the rounding (float32: r / norm is about 1e-7).
    over = norms + jnp.sqrt(jnp.where(finite, rounding, 0.0))
    factor = jnp.where(keep, weights.astype(jnp.float32) * jnp.where(
        norms > l2_clip_norm, l2_clip_norm / jnp.maximum(over, l2_clip_norm), 1.0), 0.0)
    clip = ClipWeights(factor=factor, keep=keep)

    flat_trainable = traverse_util.flatten_dict(trainable)
    flat_grads = {}
    for path, names in owners.items():
        for name, grad in finish[path](clip).items():
            if name not in names:
                continue
            leaf = flat_trainable[(*path, name)]
            flat_grads[(*path, name)] = grad.reshape(leaf.shape).astype(leaf.dtype)
    return traverse_util.unflatten_dict(flat_grads), norms, losses, finite
