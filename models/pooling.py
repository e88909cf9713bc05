"""MViT's pooling operations, written for XLA:CPU: the depthwise Conv3d that pools q, k and v,
and the max pooling of the skip path, each with a hand-written VJP.

Why not library operations: XLA:CPU lowers grouped convolutions
(``lax.conv_general_dilated(..., feature_group_count=C)``), and their per-example weight
gradients under ``vmap``, orders of magnitude slower than a sum of ``kT*kH*kW`` shifted, strided
slices; ``flax.linen.max_pool`` is ``reduce_window``, whose autodiff builds an argmax over five
integer index arrays. On accelerators all of these are fast; the functions here are the same
functions.

Why hand-written VJPs: autodiff of the slice form is correct, but XLA:CPU's instruction fusion
copies the cheap-looking producer of the cotangent (a LayerNorm backward that recomputes the
convolution's 27-slice forward) into each of the 27 padded slices of the input gradient and the
27 reductions of the weight gradient. The VJP here computes the input gradient as one stride-1
correlation of the dilated, padded cotangent (in the float32 cases checked, bit for bit
autodiff's value), and the weight gradient tap by tap in a loop (equal to float rounding;
``_weight_grad`` says why a loop). Full fine-tuning steps get faster, selective fine-tuning's
do not change (benchmarks/results/history.md, "Pooling with hand-written VJPs, q/k/v as three
products").

Not done, and why: materialising the cotangent once (a product with the identity matrix: XLA:CPU
drops ``jax.lax.optimization_barrier`` before fusion) removes the recomputation altogether: the
gradient of ``sum(sin(conv(x, w)))`` at ``[16, 4, 8, 8, 32]`` gets an order of magnitude
cheaper and full fine-tuning steps faster still (same section). But the materialised cotangent's
fusion rounds its last bit differently under ``vmap``, so vmapped shadow models
(``audit.shadows``) would no longer equal the training step bit for bit (about half of the
gradient elements differed), a property the audits rely on.

Shapes: ``x: [B, T, H, W, C]``; padding ``k // 2`` on each side (torchvision's
``Conv3d(..., padding=k // 2, groups=C, bias=False)`` and ``MaxPool3d(..., padding=k // 2)``);
output ``[B, T', H', W', C]`` with ``T' = (T + 2 (kT // 2) - kT) // sT + 1`` and so on.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


def pooled_size(size, kernel, stride, padding=None) -> tuple[int, int, int]:
    """Output grid of a Conv3d/MaxPool3d with ``padding`` on both sides of each axis (default
    ``kernel // 2``, the poolings')."""
    if padding is None:
        padding = [k // 2 for k in kernel]
    return tuple((s + 2 * p - k) // st + 1
                 for s, k, st, p in zip(size, kernel, stride, padding, strict=True))


def _pad_grid(x, kernel, value=0.0):
    """``x: [B, T, H, W, C]`` padded by ``k // 2`` on both sides of each grid axis."""
    return jnp.pad(x, [(0, 0), *[(k // 2, k // 2) for k in kernel], (0, 0)],
                   constant_values=value)


def strided_window(a, offset, stride, size):
    """``a[:, o : o + s (n - 1) + 1 : s, ...]`` on the three grid axes of ``[B, T, H, W, C]``."""
    return a[:, *(slice(o, o + s * (n - 1) + 1, s)
                  for o, s, n in zip(offset, stride, size, strict=True))]


def _forward(x, w, stride):
    kernel = w.shape[:3]
    xp = _pad_grid(x, kernel)
    out_size = pooled_size(x.shape[1:4], kernel, stride)
    out = None
    for offset in np.ndindex(*kernel):
        term = strided_window(xp, offset, stride, out_size) * w[offset]
        out = term if out is None else out + term
    return out


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def depthwise_conv3d(x: jax.Array, w: jax.Array, stride: tuple[int, int, int]) -> jax.Array:
    """Depthwise Conv3d of ``x: [B, T, H, W, C]`` with ``w: [kT, kH, kW, C]``, one filter per
    channel (module docstring).

    Computed in ``x``'s dtype (``w`` must have it). Differentiable in ``x`` and ``w`` (any
    order, under ``vmap``); the gradients equal autodiff's of the slice form to float rounding.
    """
    return _forward(x, w, stride)


def _fwd(x, w, stride):
    return _forward(x, w, stride), (x, w)


def _bwd(stride, residuals, g):
    """Both gradients as sums over the kernel taps.

    With ``g`` dilated by the stride and padded (``gd``), the input gradient is the stride-1
    correlation ``gx[p] = sum_k gd[p + k] * w[K - 1 - k]``; the weight gradient is
    ``gw[k] = sum_o xp[o * s + k] * g[o]`` (``xp``: ``x`` padded as in the forward), summed in
    ``float32`` or wider (``_weight_grad``).
    """
    x, w = residuals
    kernel = w.shape[:3]
    in_size, out_size = x.shape[1:4], g.shape[1:4]
    pads = [(0, 0, 0)]
    for k, s, n, o in zip(kernel, stride, in_size, out_size, strict=True):
        low = k - 1 - k // 2
        pads.append((low, n + k - 1 - low - ((o - 1) * s + 1), s - 1))
    gd = jax.lax.pad(g, jnp.zeros((), g.dtype), [*pads, (0, 0, 0)])
    w_flip = w[::-1, ::-1, ::-1]
    gx = None
    for offset in np.ndindex(*kernel):
        term = strided_window(gd, offset, (1, 1, 1), in_size) * w_flip[offset]
        gx = term if gx is None else gx + term
    return gx, _weight_grad(_pad_grid(x, kernel), g, w, stride)


def _weight_grad(xp, g, w, stride):
    """``gw[k] = sum_o xp[o * s + k] * g[o]`` (summed over the batch too) for every tap ``k``,
    one tap per iteration of a ``lax.map``.

    A loop rather than ``kT*kH*kW`` reductions side by side: the program then holds one reduction
    per convolution instead of 27, and under ``vmap`` (per-example gradients of full fine-tuning)
    each was a fusion of its own for XLA to compile. For the full fine-tuning private pass
    (per-example gradients) the loop compiles much faster, runs a little faster, and gives the
    same gradient bit for bit (each tap's sum is the same sum); benchmarks/results/history.md,
    "Full fine-tuning's private pass compiles".
    """
    out_size = g.shape[1:4]
    span = [s * (n - 1) + 1 for s, n in zip(stride, out_size, strict=True)]
    acc_dtype = jnp.promote_types(w.dtype, jnp.float32)  # bfloat16 weights: float32 sums

    def tap(offset):
        window = jax.lax.dynamic_slice(xp, (0, *offset, 0), (xp.shape[0], *span, xp.shape[-1]))
        prod = window[:, ::stride[0], ::stride[1], ::stride[2]] * g
        return jnp.sum(prod.reshape(prod.shape[0], -1, prod.shape[-1]), axis=1,
                       dtype=acc_dtype).sum(axis=0)

    offsets = jnp.asarray(list(np.ndindex(*w.shape[:3])), jnp.int32)
    return jax.lax.map(tap, offsets).reshape(w.shape).astype(w.dtype)


depthwise_conv3d.defvjp(_fwd, _bwd)


def depthwise_conv3d_weight_grad(x: jax.Array, g: jax.Array, kernel: tuple[int, int, int],
                                 stride: tuple[int, int, int]) -> jax.Array:
    """``[kT, kH, kW, C]`` float32: the gradient w.r.t. ``w`` of ``sum(depthwise_conv3d(x, w,
    stride) * g)``, summed over the batch (the VJP's own weight gradient; the per-example ghost
    rule of ``models/ghost_rules.py`` maps it over examples)."""
    w = jax.ShapeDtypeStruct((*kernel, x.shape[-1]), jnp.float32)
    return _weight_grad(_pad_grid(x.astype(jnp.float32), kernel), g.astype(jnp.float32), w,
                        stride)


def _max_windows(x, kernel, stride):
    """``(max, argmax)`` over the windows of a ``-inf``-padded ``x``; ties go to the first tap
    in row-major kernel order (PyTorch's ``MaxPool3d``)."""
    xp = _pad_grid(x, kernel, -jnp.inf)
    out_size = pooled_size(x.shape[1:4], kernel, stride)
    best = index = None
    for i, offset in enumerate(np.ndindex(*kernel)):
        window = strided_window(xp, offset, stride, out_size)
        if best is None:
            best, index = window, jnp.zeros(window.shape, jnp.int8)
        else:
            better = window > best
            best = jnp.where(better, window, best)
            index = jnp.where(better, jnp.int8(i), index)
    return best, index


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def max_pool3d(x: jax.Array, kernel: tuple[int, int, int],
               stride: tuple[int, int, int]) -> jax.Array:
    """Max pooling of ``x: [B, T, H, W, C]``, padding ``kernel // 2`` (MViT's skip-path pool).

    The same function as ``flax.linen.max_pool`` with that padding. Its VJP routes each output's
    cotangent to the first maximal input of its window, as PyTorch does; autodiff of
    ``reduce_window`` instead builds an argmax over five index arrays, which on XLA:CPU cost
    more than the rest of the block's backward. At most ``127`` kernel taps.
    """
    return _max_windows(x, kernel, stride)[0]


def _max_fwd(x, kernel, stride):
    best, index = _max_windows(x, kernel, stride)
    return best, (index, x.shape)


def _max_bwd(kernel, stride, residuals, g):
    index, shape = residuals
    in_size, out_size = shape[1:4], g.shape[1:4]
    zero = jnp.zeros((), g.dtype)
    gx = None
    for i, offset in enumerate(np.ndindex(*kernel)):
        # the transpose of the strided window at ``offset`` of the padded input
        pads = [(0, 0, 0)]
        for o, s, n, m, k in zip(offset, stride, in_size, out_size, kernel, strict=True):
            low = o - k // 2
            pads.append((low, n - low - ((m - 1) * s + 1), s - 1))
        term = jax.lax.pad(jnp.where(index == i, g, zero), zero, [*pads, (0, 0, 0)])
        gx = term if gx is None else gx + term
    return (gx,)


max_pool3d.defvjp(_max_fwd, _max_bwd)
