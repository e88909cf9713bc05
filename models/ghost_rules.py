"""Per-layer rules for per-example gradient norms without per-example gradients (ghost norms and
book-keeping, :mod:`maskdp_jax.core.ghost`), one for every kind of trainable parameter of the MViT.

``RULES`` maps ``(module class, method name)`` to the fields of a
``maskdp_jax.core.ghost.LayerRule`` (``params``, ``tap``, ``per_example``); the run layer
(``run.model``) builds the rules from it (this package imports no DP code). Each method tapped is
the only place its module's parameters are used, so the output cotangent ``g`` of that call and
what ``tap`` keeps of its inputs (``a``) determine the parameters' per-example gradients:

=========================================  ========================================================
layer (method)                             per-example gradient of example ``i``
=========================================  ========================================================
``nn.Dense``, ``QKV``, the head            ``a_iᵀ g_i`` over its tokens (mixed mode: the ghost norm
                                           ``Σ (a_i a_iᵀ) ⊙ (g_i g_iᵀ)`` or the product itself,
                                           whichever the shapes make cheaper); bias ``Σ_t g_i``
``PatchEmbed``, unpadded ``nn.Conv``       the same over the im2col patches of the clip
``DepthwiseConv3d`` (q/k/v pooling)        ``Σ_o x_i[o s + k] g_i[o]`` for each tap ``k``
``nn.LayerNorm``                           scale ``Σ_t x̂_i ⊙ g_i``, bias ``Σ_t g_i``
``MultiscaleAttention._rel_pos_terms``     the gathered tables' gradient ``Σ r_q ⊗ g``, scattered
                                           back onto the tables
``MViT._embed``                            class token (v1: class, temporal and spatial positions):
                                           the cotangent of the tokens entering block 0, summed
=========================================  ========================================================

Arrays reaching ``per_example`` carry the example axis first: ``[P, ...]`` then one
example's shapes (``K`` clips, then the layer's own axes).

Precision. The matrix products run in the layer's compute dtype (that of its output cotangent
``g``: bfloat16 under ``compute.dtype=bfloat16``), as the model's own backward does, and
accumulate in float32 (``preferred_element_type``); float32 products run at ``highest``
precision (a GPU's default would round their inputs to TF32, and the norms must be those of the
gradient the clipped sum adds). Norms, clip factors and every sum over examples or tokens are
float32. A product of two bfloat16 numbers is exact in float32, so the norms are those of the
per-example gradient of the bfloat16 activations and cotangents to float32 rounding. The one
rounding that reaches the released sum is the book-keeping product ``aᵀ (c ⊙ g)``, whose
factor-scaled cotangents are rounded to the compute dtype: the dense rule returns a bound on
what that rounding adds (``_rounding_bound``), and the clip factor (``maskdp_jax.core.ghost``)
keeps each contribution within C with it.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from maskdp_jax.models import mvit, pooling

F32 = jnp.float32


def _tokens(x: jax.Array) -> jax.Array:
    """``[P, ..., d] -> [P, tokens, d]``, in ``x``'s dtype."""
    return x.reshape(x.shape[0], -1, x.shape[-1])


def _product(spec: str, x: jax.Array, y: jax.Array) -> jax.Array:
    """``einsum(spec, x, y)`` in the operands' dtype, accumulated and returned in float32;
    float32 operands at ``highest`` precision (not TF32 on a GPU)."""
    highest = x.dtype == F32 or y.dtype == F32
    return jnp.einsum(spec, x, y, preferred_element_type=F32,
                      precision=jax.lax.Precision.HIGHEST if highest else None)


def _sq(x: jax.Array) -> jax.Array:
    """Squared norm of each example's slice: ``[P, ...] -> [P]``."""
    return jnp.sum(jnp.square(x).reshape(x.shape[0], -1), axis=1)


def _rounding_bound(a: jax.Array, g: jax.Array, aa: jax.Array | None = None) -> jax.Array:
    """``[P]``: a bound on the squared norm of ``aᵢᵀ (round(f gᵢ) - f gᵢ) / f`` for ``a [P, T,
    d_in]`` and ``g [P, T, d_out]``: the error ``ClipWeights.scaled`` (``maskdp_jax.core.ghost``)
    can add to a book-keeping product ``aᵀ (f ⊙ g)`` when it rounds ``f gᵢ`` to ``g``'s dtype.

    Each element of ``f gᵢ`` is computed in float32 and rounded once more to ``g``'s dtype, so
    its relative error is below ``u = eps`` of that dtype (twice the unit roundoff, which covers
    both roundings); the error matrix ``E`` then has ``‖E‖_F <= u f ‖gᵢ‖_F``, and
    ``‖aᵢᵀ E‖_F <= ‖aᵢ‖₂ ‖E‖_F``, with the spectral norm ``‖aᵢ‖₂² <= min(‖aᵢ‖_F², ‖aᵢ aᵢᵀ‖_F)``
    (``aa``: the ghost norm's ``aᵢ aᵢᵀ [P, T, T]``, already computed; tighter where the tokens
    are not all alike). A bound, not an estimate: cancellation across tokens can make
    ``‖aᵢᵀ gᵢ‖`` much smaller than ``‖aᵢ‖ ‖gᵢ‖``, but not the error larger than this. An example
    whose cotangent is 0 has no error (0, not ``inf × 0`` where ``‖aᵢ‖²`` overflows); one whose
    bound overflows is dropped by the clip (``maskdp_jax.core.ghost.clipped_sum``). (Values
    that underflow below the dtype's smallest normal number break the relative bound by at most
    that number per element; the norms and sums are float32's, so the whole holds to float32
    rounding, as every clipped sum does.)"""
    u = float(jnp.finfo(g.dtype).eps)
    sq_a, sq_g = _sq(a.astype(F32)), _sq(g.astype(F32))
    if aa is not None:
        sq_a = jnp.minimum(sq_a, jnp.sqrt(_sq(aa)))
    return jnp.where(sq_g > 0, u * u * sq_a * sq_g, 0.0)


def _ghost_is_cheaper(tokens: int, d_in: int, d_out: int) -> bool:
    """Ghost norm ``~ T² (d_in + d_out)`` against the product ``~ T d_in d_out`` (also the memory
    of the two: ``T²`` against ``d_in d_out`` per example)."""
    return tokens * (d_in + d_out) < d_in * d_out


def dense(a: jax.Array, g: jax.Array, names):
    """``y = a @ kernel + bias`` with ``a [P, ..., d_in]``, ``g [P, ..., d_out]``: the squared
    per-example norms of ``kernel [d_in, d_out]`` and ``bias [d_out]``, and their clipped sum.

    Mixed mode: the ghost norm when cheaper (the clipped sum is then one product with the
    weighted cotangents, rounded to the compute dtype: the third value bounds what that adds),
    else the per-example gradients ``[P, d_in, d_out]`` (their norms, then their weighted sum,
    in float32)."""
    g = _tokens(g)
    a = _tokens(a).astype(g.dtype)  # the layer's compute dtype (its input may arrive wider)
    sq, later, rounding = {}, {}, None
    if "kernel" in names:
        if _ghost_is_cheaper(a.shape[1], a.shape[2], g.shape[2]):
            aa = _product("pti,psi->pts", a, a)
            gg = _product("pto,pso->pts", g, g)
            sq["kernel"] = jnp.sum(aa * gg, axis=(1, 2))
            later["kernel"] = lambda w: _product("pti,pto->io", w.kept(a), w.scaled(g))
            rounding = _rounding_bound(a, g, aa)
        else:
            per = _product("pti,pto->pio", a, g)
            sq["kernel"] = _sq(per)
            later["kernel"] = lambda w: w.sum(per)
    if "bias" in names:
        per_bias = jnp.sum(g, axis=1, dtype=F32)
        sq["bias"] = _sq(per_bias)
        later["bias"] = lambda w: w.sum(per_bias)
    finish = lambda w: {k: f(w) for k, f in later.items()}  # noqa: E731
    return (sq, finish) if rounding is None else (sq, finish, rounding)


def _first_arg(module, args, kwargs):
    return args[0], None


def _dense_rule(cotangent=lambda g: g, patches=lambda static, a: a, tap=_first_arg):
    return dict(params=("kernel", "bias"), tap=tap,
                per_example=lambda s, a, g, names: dense(patches(s, a), cotangent(g), names))


def _patch_tap(module, args, kwargs):
    return args[0], (tuple(module.kernel), tuple(module.stride), tuple(module.padding))


def _patches(static, clips):
    """``[P, K, T, H, W, C]`` -> ``[P, K, T', H', W', kT*kH*kW*C]``: the patch embedding's input
    windows in its kernel's row order (``mvit._im2col``; kernel equal to the stride is the
    special case of the CPU presets)."""
    kernel, stride, padding = static
    p = clips.shape[0]
    flat = clips.reshape(-1, *clips.shape[-4:])
    windows = mvit._im2col(flat, kernel, stride, padding)
    return windows.reshape(p, -1, windows.shape[-1])


def _conv_tap(module, args, kwargs):
    """``nn.Conv`` over clips ``[B, T, H, W, C]`` without padding (``VALID``, or ``SAME`` with
    the kernel equal to the stride on a grid it divides: a patchify convolution), groups and
    dilation 1: the same dense layer over its im2col windows as :class:`mvit.PatchEmbed`."""
    x = args[0]
    size = module.kernel_size
    kernel = (size,) if isinstance(size, int) else tuple(size)  # flax: an int is a 1D kernel
    strides = module.strides or 1
    strides = (strides,) * len(kernel) if isinstance(strides, int) else tuple(strides)
    no_padding = module.padding == "VALID" or (
        module.padding == "SAME" and kernel == strides
        and all(n % s == 0 for n, s in zip(x.shape[-4:-1], strides, strict=True)))
    plain = (x.ndim == 5 and len(kernel) == 3 and module.feature_group_count == 1
             and module.input_dilation in (None, 1) and module.kernel_dilation in (None, 1))
    if not (no_padding and plain):
        raise ValueError(f"no ghost rule for this convolution (the nn.Conv rule covers 3D "
                         f"convolutions without padding, groups or dilation): {module}.")
    return x, (kernel, strides, (0, 0, 0))


def _layer_norm_tap(module, args, kwargs):
    if kwargs.get("mask") is not None or not module.use_fast_variance or (
            module.reduction_axes != -1 or module.feature_axes != -1):
        raise ValueError(f"the LayerNorm ghost rule covers the last-axis, unmasked LayerNorm "
                         f"only; got {module}.")
    return args[0], float(module.epsilon)


def _normalized(x: jax.Array, epsilon: float) -> jax.Array:
    """``x̂ = (x - mean) / sqrt(var + eps)`` over the last axis as ``nn.LayerNorm`` computes it
    (float32, variance ``E[x²] - E[x]²`` clipped at 0)."""
    x = x.astype(F32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.maximum(jnp.mean(jnp.square(x), axis=-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * jax.lax.rsqrt(var + epsilon)


def _layer_norm_per_example(epsilon, x, g, names):
    g = _tokens(g).astype(F32)
    out = {}
    if "scale" in names:
        out["scale"] = jnp.sum(_tokens(_normalized(x, epsilon)) * g, axis=1)
    if "bias" in names:
        out["bias"] = jnp.sum(g, axis=1)
    return out


def _depthwise_tap(module, args, kwargs):
    return args[0], (tuple(module.kernel), tuple(module.stride))


def _depthwise_per_example(static, x, g):
    """``x [P, B, T, H, W, C]``, ``g [P, B, T', H', W', C]`` -> ``[P, kT, kH, kW, 1, C]``."""
    kernel, stride = static
    per = jax.vmap(lambda xi, gi: pooling.depthwise_conv3d_weight_grad(xi, gi, kernel, stride))
    return per(x, g)[..., None, :]


def _rel_pos_tap(module, args, kwargs):
    r_q, q_thw, k_thw = args
    lengths = (2 * module.input_size[0] - 1, module.rel_pos_spatial, module.rel_pos_spatial)
    return r_q, (tuple(q_thw), tuple(k_thw), lengths)


_TABLES = ("rel_pos_t", "rel_pos_h", "rel_pos_w")
# r_q [P, K, heads, qt, qh, qw, c] against each term's cotangent [P, K, heads, qt, qh, qw, k]:
# the gathered table's gradient [P, q, k, c] along t, h and w.
_GATHERED = ("pbnthwc,pbnthwk->ptkc", "pbnthwc,pbnthwk->phkc", "pbnthwc,pbnthwk->pwkc")


def _rel_pos_per_example(static, r_q, g, names):
    """Each table's gradient per example ``[P, length, head_dim]``: the gathered ``[q, k, c]``
    gradient scattered back through the index of ``mvit._rel_index``."""
    q_thw, k_thw, lengths = static
    out = {}
    for i, name in enumerate(_TABLES):
        if name not in names:
            continue
        gathered = _product(_GATHERED[i], r_q.astype(g[i].dtype), g[i])
        index = mvit._rel_index(q_thw[i], k_thw[i]).reshape(-1)
        p, c = gathered.shape[0], gathered.shape[-1]
        out[name] = jnp.zeros((p, lengths[i], c), F32).at[:, index].add(
            gathered.reshape(p, -1, c))
    return out


def _embed_tap(module, args, kwargs):
    return None, (tuple(module.token_grid()), bool(module.rel_pos_embed))


def _embed_per_example(static, g, names):
    """``g [P, K, 1 + t*h*w, dim]``, the cotangent of the tokens entering block 0."""
    (t, h, w), _ = static
    g = g.astype(F32)
    out = {}
    first = jnp.sum(g[:, :, 0], axis=1)
    for name in ("cls_token", "class_pos"):
        if name in names:
            out[name] = first
    grid = g[:, :, 1:].reshape(g.shape[0], g.shape[1], t, h * w, g.shape[-1])
    if "temporal_pos" in names:
        out["temporal_pos"] = jnp.sum(grid, axis=(1, 3))
    if "spatial_pos" in names:
        out["spatial_pos"] = jnp.sum(grid, axis=(1, 2))
    return out


def _from_per_example(per_example):
    """``per_example`` of a rule whose parameters' per-example gradients are small: computed
    once, their squared norms, then their weighted sum."""
    def rule(static, a, g, names):
        per = per_example(static, a, g, names)
        return ({k: _sq(v) for k, v in per.items()},
                lambda w: {k: w.sum(v) for k, v in per.items()})
    return rule


def _depthwise(static, a, g, names):
    return {"kernel": _depthwise_per_example(static, a, g)}


def _embed(static, a, g, names):
    return _embed_per_example(static, g, names)


RULES = {
    (nn.Dense, "__call__"): _dense_rule(),
    (mvit.QKV, "__call__"): _dense_rule(cotangent=lambda g: jnp.concatenate(g, axis=-1)),
    (mvit.PatchEmbed, "__call__"): _dense_rule(patches=_patches, tap=_patch_tap),
    (nn.Conv, "__call__"): _dense_rule(patches=_patches, tap=_conv_tap),
    (mvit.DepthwiseConv3d, "__call__"): dict(
        params=("kernel",), tap=_depthwise_tap, per_example=_from_per_example(_depthwise)),
    (nn.LayerNorm, "__call__"): dict(
        params=("scale", "bias"), tap=_layer_norm_tap,
        per_example=_from_per_example(_layer_norm_per_example)),
    (mvit.MultiscaleAttention, "_rel_pos_terms"): dict(
        params=_TABLES, tap=_rel_pos_tap, per_example=_from_per_example(_rel_pos_per_example)),
    (mvit.MViT, "_embed"): dict(
        params=("cls_token", "class_pos", "temporal_pos", "spatial_pos"), tap=_embed_tap,
        per_example=_from_per_example(_embed)),
}

