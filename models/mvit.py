"""MViT video classifiers in Flax Linen, structured like torchvision's ``MViT``: MViTv2
(Li et al., 2022; ``mvit_v2_s``, the MaskDP papers' network) and MViTv1 (Fan et al., 2021;
``mvit_v1_b``, MViT-B 16x4, the network of Luo et al. 2024).

Channels-last video input ``x: [B, T, H, W, 3]`` (normalised). The two versions are torchvision's
``MViT`` with these switches (the fields of :class:`MViT`):

=====================  ========  ========  ===================================================
field                  v2        v1        what it changes
=====================  ========  ========  ===================================================
``rel_pos_embed``      True      False     decomposed relative position bias in attention (v2)
                                           or a separable absolute position embedding added
                                           after the patch embedding (v1: spatial + temporal
                                           tables, and one for the class token)
``residual_pool``      True      False     attention output + pooled q (class token excluded)
``proj_after_attn``    True      False     where the width changes: v2 attends at the output
                                           width (skip = ``Linear(LN(x))``); v1 attends at the
                                           input width and widens in the MLP (skip =
                                           ``Linear(LN2(x))`` after attention)
=====================  ========  ========  ===================================================

Shared structure:

* patch embedding: Conv3d kernel (3, 7, 7), stride (2, 4, 4), padding (1, 3, 3); tokens in
  (t, h, w) order; a class token is prepended.
* each block: ``x_n = LN(x)``; pooling attention on ``x_n`` (depthwise Conv3d pooling of q, k, v
  per head, each followed by a LayerNorm applied *after* the class token is re-attached; a pooling
  whose kernel and stride are all 1 is absent, as in v1's non-strided q); skip path max-pooled when
  q is strided; then the MLP on ``LN(x)``.
* head: LayerNorm, class token, Linear.

Exact (erf) GELU and LayerNorm eps 1e-6 everywhere. The module fields ``patch_stride`` and
``input_size`` are what the tokeniser and the position tables rely on.

Mixed precision (``dtype=jnp.bfloat16``): the matrix products, convolutions and attention run in
bfloat16. The parameters, every LayerNorm, the softmax, the residual stream, the head and its
logits stay float32, so gradients (and the DP clipping, sums and noise) are float32. The default
``float32`` computes everything in float32: every cast is then a no-op and the parity tests hold.
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

import einops
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax.models.pooling import depthwise_conv3d, max_pool3d, pooled_size, strided_window

LN_EPS = 1e-6


class BlockSpec(NamedTuple):
    """One multiscale block: widths, heads, pooling kernels and strides (t, h, w).

    A pooling (of q, or of k and v) exists when its kernel or its stride is not all ones
    (torchvision's rule): ``kernel_q=(1, 1, 1)`` with ``stride_q=(1, 1, 1)`` means no q pooling.
    """

    num_heads: int
    dim_in: int
    dim_out: int
    kernel_q: tuple[int, int, int] = (3, 3, 3)
    kernel_kv: tuple[int, int, int] = (3, 3, 3)
    stride_q: tuple[int, int, int] = (1, 1, 1)
    stride_kv: tuple[int, int, int] = (1, 1, 1)


def _gelu(x):
    return nn.gelu(x, approximate=False)


def _layer_norm(name: str):
    """LayerNorm computed (and returned) in float32 whatever the compute dtype."""
    return nn.LayerNorm(epsilon=LN_EPS, dtype=jnp.float32, name=name)


def _rel_index(q_size: int, k_size: int) -> np.ndarray:
    """Index into a relative position table for every (query, key) pair along one axis."""
    q_ratio = max(k_size / q_size, 1.0)
    k_ratio = max(q_size / k_size, 1.0)
    dist = (np.arange(q_size)[:, None] * q_ratio
            - (np.arange(k_size)[None, :] + (1.0 - k_size)) * k_ratio)
    return dist.astype(np.int64)


class DepthwiseConv3d(nn.Module):
    """Depthwise Conv3d, padding ``kernel // 2``, no bias (``models.pooling.depthwise_conv3d``).

    Same function and parameter (``kernel: [kT, kH, kW, 1, C]``, flax's depthwise ``nn.Conv``
    layout) as ``nn.Conv(C, kernel, strides, feature_group_count=C)``, computed as shifted,
    strided slices with a hand-written VJP (why: that module's docstring). ``x: [B, T, H, W, C]``.
    """

    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]

    @nn.compact
    def __call__(self, x):
        c = x.shape[-1]
        w = self.param("kernel", nn.initializers.lecun_normal(), (*self.kernel, 1, c))[..., 0, :]
        # float32 parameters, computed in the input's dtype
        return depthwise_conv3d(x, w.astype(x.dtype), tuple(self.stride))


def _im2col(x, kernel, stride, padding):
    """``x: [B, T, H, W, C]`` -> ``[B, T', H', W', kT*kH*kW*C]``: each output position's window of
    the padded clip, flattened in ``(kT, kH, kW, C)`` order (the kernel's row order).

    Built one grid axis at a time, W then H then T: the ``kW`` strided windows along W side by
    side, then the ``kH`` windows of that along H, then the ``kT`` along T. The values and their
    order are those of the ``kT*kH*kW`` three-axis windows concatenated at once, so the product
    that follows is the same, bit for bit; but XLA:CPU fuses each stage's few slices into its
    concatenation, where ``kT*kH*kW`` windows at once became as many kernels and a copy; the
    forward and the weight gradient run faster, and compile several times faster
    (benchmarks/results/history.md, "im2col axis by axis, and the two-view baseline").
    """
    a = jnp.pad(x, [(0, 0), *[(p, p) for p in padding], (0, 0)])
    out = pooled_size(x.shape[1:4], kernel, stride, padding)
    for axis in (2, 1, 0):  # W, H, T
        size, offsets, strides = list(a.shape[1:4]), [0, 0, 0], [1, 1, 1]
        size[axis], strides[axis] = out[axis], stride[axis]
        windows = []
        for o in range(kernel[axis]):
            offsets[axis] = o
            windows.append(strided_window(a, offsets, strides, size))
        a = jnp.concatenate(windows, axis=-1)
    return a


class PatchEmbed(nn.Module):
    """The patch-embedding Conv3d (with bias), ``[B, T, H, W, 3] -> [B, T', H', W', dim]``.

    Parameters are those of ``nn.Conv`` (``kernel: [kT, kH, kW, 3, dim]``, ``bias: [dim]``).
    Computed in one of three ways, all the same function (to float rounding):

    * kernel equal to the stride, no padding (the CPU presets): each token sees exactly its own
      token cell, so a reshape and a matmul, much faster on XLA:CPU than the Conv3d lowering
      (gradient included);
    * overlapping windows on the CPU (``mvit_v2_s``'s (3, 7, 7) kernel at stride (2, 4, 4)):
      im2col (``_im2col``: the ``kT*kH*kW`` strided windows of the padded clip side by side), then
      one matmul.
      XLA:CPU runs the Conv3d of a 3-channel input through Eigen's spatial convolution at a few
      GFLOP/s; im2col is several times faster at ``mvit_tiny``'s size and faster, above all in
      the weight gradient, at ``mvit_v2_s``'s (benchmarks/results/history.md, "The patch
      embedding as im2col on the CPU"). The windows cost
      ``kT*kH*kW*3 / (sT*sH*sW*3)`` = 4.6x the clip's memory, hence CPU only;
    * otherwise ``lax.conv_general_dilated`` (cuDNN on a GPU).
    """

    features: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (*self.kernel, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        x = x.astype(self.dtype)
        kernel, bias = kernel.astype(self.dtype), bias.astype(self.dtype)
        flat = kernel.reshape(-1, self.features)  # rows in (kT, kH, kW, 3) order
        if tuple(self.kernel) == tuple(self.stride) and not any(self.padding):
            kt, kh, kw = self.kernel
            cells = einops.rearrange(x, "b (t i) (h j) (w k) c -> b t h w (i j k c)",
                                     i=kt, j=kh, k=kw)
            return cells @ flat + bias
        if jax.default_backend() == "cpu":
            return _im2col(x, self.kernel, self.stride, self.padding) @ flat + bias
        out = jax.lax.conv_general_dilated(
            x, kernel, self.stride, [(p, p) for p in self.padding],
            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"),
        )
        return out + bias


class Pool(nn.Module):
    """Depthwise Conv3d pooling of one of q/k/v (per head), then LayerNorm with the cls token.

    ``x: [B, heads, 1 + T*H*W, head_dim]`` -> ``[B, heads, 1 + T'*H'*W', head_dim]``.
    """

    head_dim: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]

    @nn.compact
    def __call__(self, x, thw):
        b, h, _, c = x.shape
        cls, x = x[:, :, :1], x[:, :, 1:]
        x = x.reshape(b * h, *thw, c)
        x = DepthwiseConv3d(self.kernel, self.stride, name="conv")(x)
        new_thw = x.shape[1:4]
        x = x.reshape(b, h, -1, c)
        x = jnp.concatenate([cls, x], axis=2)
        return _layer_norm("norm")(x).astype(cls.dtype), new_thw


class QKV(nn.Module):
    """The q, k, v projections ``[B, N, dim_in] -> 3 x [B, N, dim]``: the parameters of
    ``nn.Dense(3 * dim)`` (torchvision's one ``qkv`` Linear), applied as three products.

    The same function as slicing one product's output; but the gradient of that slicing adds
    three padded cotangents along the minor axis, a fusion XLA:CPU cannot vectorise (it held
    the q/k/v pooling backward: 5-7 % of a selective step on ``mvit_tiny``). Three products
    keep each cotangent whole.
    """

    dim: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (x.shape[-1], 3 * self.dim))
        bias = self.param("bias", nn.initializers.zeros, (3 * self.dim,))
        x = x.astype(self.dtype)
        kernel, bias = kernel.astype(self.dtype), bias.astype(self.dtype)
        d = self.dim
        return tuple(x @ kernel[:, i * d:(i + 1) * d] + bias[i * d:(i + 1) * d] for i in range(3))


class MultiscaleAttention(nn.Module):
    """Pooling attention with decomposed relative position bias and residual pooling."""

    spec: BlockSpec
    input_size: tuple[int, int, int]  # the block's input token grid (t, h, w)
    rel_pos_spatial: int  # spatial table length, 2 * max(q, kv) size - 1
    dim: int  # attention width: dim_out (v2, projection after attention) or dim_in (v1)
    rel_pos_embed: bool = True
    residual_pool: bool = True
    dtype: Any = jnp.float32
    attention_impl: str = "auto"  # see attention_implementation

    @nn.compact
    def __call__(self, x):
        s = self.spec
        b, n, _ = x.shape
        heads, dim = s.num_heads, self.dim
        head_dim = dim // heads
        q, k, v = (t.reshape(b, n, heads, head_dim).transpose(0, 2, 1, 3)  # [B, heads, N, hd]
                   for t in QKV(dim, dtype=self.dtype, name="qkv")(x))
        thw = q_thw = k_thw = self.input_size
        if _pools(s.kernel_q, s.stride_q):
            q, q_thw = Pool(head_dim, s.kernel_q, s.stride_q, name="pool_q")(q, thw)
        if _pools(s.kernel_kv, s.stride_kv):
            k, k_thw = Pool(head_dim, s.kernel_kv, s.stride_kv, name="pool_k")(k, thw)
            v, _ = Pool(head_dim, s.kernel_kv, s.stride_kv, name="pool_v")(v, thw)

        impl = attention_implementation(self.attention_impl, q.dtype, head_dim)
        if impl == "einsum":
            attn = jnp.einsum("bhqc,bhkc->bhqk", q * head_dim**-0.5, k)
            if self.rel_pos_embed:
                attn = self._add_rel_pos(attn, q, q_thw, k_thw, head_dim)
            probs = nn.softmax(attn.astype(jnp.float32), axis=-1).astype(v.dtype)  # in float32
            out = jnp.einsum("bhqk,bhkc->bhqc", probs, v)
        else:
            out = self._fused_attention(q, k, v, q_thw, k_thw, head_dim, impl)
        if self.residual_pool:
            out = out.at[:, :, 1:].add(q[:, :, 1:])  # class token excluded
        out = out.transpose(0, 2, 1, 3).reshape(b, -1, dim)
        return nn.Dense(dim, dtype=self.dtype, name="proj")(out), q_thw

    def _fused_attention(self, q, k, v, q_thw, k_thw, head_dim, implementation):
        """``softmax(q k^T / sqrt(head_dim) + bias) v`` through ``jax.nn.dot_product_attention``
        (``implementation``: ``"cudnn"``, cuDNN's fused kernel, or ``"xla"``, the same call
        lowered by XLA: what the CPU tests run), the relative-position bias as its ``bias``.

        ``q: [B, heads, Nq, head_dim]``, ``k, v: [B, heads, Nk, head_dim]``; returns
        ``[B, heads, Nq, head_dim]``. The bias is ``_add_rel_pos`` applied to zero logits (zero in
        the class token's row and column), so both paths use the one bias function. cuDNN's
        kernel takes a bias in training only for even sequence lengths, and ours are ``1 + t*h*w``
        (odd for even t): an odd key length gets one zero key whose bias is a large negative
        number (its softmax weight is exactly 0 in float32 and bfloat16), an odd query length one
        zero query whose output row is dropped (its cotangent is zero, so it adds nothing to any
        gradient).

        Under ``attention_impl="auto"``, where cuDNN's own checks refuse the call while it is
        traced (``NotImplementedError`` or ``RuntimeError``: shapes, cuDNN version, GPU
        generation), the attention is computed as two products from the same bias, with a
        warning naming the reason; an explicit ``"cudnn"`` raises instead.
        """
        b, heads, q_len, _ = q.shape
        bias = jnp.zeros((b, heads, q_len, k.shape[2]), q.dtype)
        if self.rel_pos_embed:
            bias = self._add_rel_pos(bias, q, q_thw, k_thw, head_dim)
        try:
            return _dot_product_attention(q, k, v, bias, head_dim, implementation)
        except (NotImplementedError, RuntimeError) as refused:
            if self.attention_impl != "auto":
                raise
            logging.warning("cuDNN's fused attention refused q %s, k %s (%s); this block's "
                            "attention runs as two products instead.", q.shape, k.shape, refused)
        attn = jnp.einsum("bhqc,bhkc->bhqk", q * head_dim**-0.5, k) + bias
        probs = nn.softmax(attn.astype(jnp.float32), axis=-1).astype(v.dtype)  # in float32
        return jnp.einsum("bhqk,bhkc->bhqc", probs, v)

    def _add_rel_pos(self, attn, q, q_thw, k_thw, head_dim):
        """Decomposed relative position bias (MViTv2), from the pooled, unscaled q."""
        b, heads = q.shape[:2]
        r_q = q[:, :, 1:].reshape(b, heads, *q_thw, head_dim)
        bias_t, bias_h, bias_w = self._rel_pos_terms(r_q, q_thw, k_thw)
        bias = (bias_t[..., :, None, None] + bias_h[..., None, :, None]
                + bias_w[..., None, None, :])
        q_len, k_len = math.prod(q_thw), math.prod(k_thw)
        return attn.at[:, :, 1:, 1:].add(bias.reshape(b, heads, q_len, k_len))

    def _rel_pos_terms(self, r_q, q_thw, k_thw):
        """The bias terms along t, h and w, ``[B, heads, qt, qh, qw, k*]``, of the query grid
        ``r_q: [B, heads, qt, qh, qw, head_dim]``: the only use of the position tables, so their
        per-example gradients follow from ``r_q`` and these terms' cotangents
        (models/ghost_rules.py).
        """
        head_dim = r_q.shape[-1]
        init = nn.initializers.truncated_normal(0.02)
        rel_t = self.param("rel_pos_t", init, (2 * self.input_size[0] - 1, head_dim))
        rel_h = self.param("rel_pos_h", init, (self.rel_pos_spatial, head_dim))
        rel_w = self.param("rel_pos_w", init, (self.rel_pos_spatial, head_dim))
        tables = [table[_rel_index(qs, ks)].astype(r_q.dtype) for table, qs, ks in
                  zip((rel_t, rel_h, rel_w), q_thw, k_thw, strict=True)]
        return (jnp.einsum("bythwc,tkc->bythwk", r_q, tables[0]),
                jnp.einsum("bythwc,hkc->bythwk", r_q, tables[1]),
                jnp.einsum("bythwc,wkc->bythwk", r_q, tables[2]))


ATTENTION_IMPLS = ("auto", "einsum", "xla", "cudnn")
# The bias of a padding key: exp(logit - 2^41 - max) is 0 in float32 and bfloat16, and 2^41 is
# exact in bfloat16 (JAX's own large negative for cuDNN's bfloat16 masks is the same number).
_NO_ATTENTION = -(2.0**41)


def _dot_product_attention(q, k, v, bias, head_dim: int, implementation: str):
    """``jax.nn.dot_product_attention`` on our layout, lengths padded to even (see
    ``MultiscaleAttention._fused_attention``): ``q [B, heads, Nq, hd]``, ``k, v [B, heads, Nk,
    hd]``, ``bias [B, heads, Nq, Nk]`` -> ``[B, heads, Nq, hd]``."""
    q_len, k_len = q.shape[2], k.shape[2]
    if k_len % 2:
        k, v = (jnp.pad(t, ((0, 0), (0, 0), (0, 1), (0, 0))) for t in (k, v))
        bias = jnp.pad(bias, ((0, 0), (0, 0), (0, 0), (0, 1)), constant_values=_NO_ATTENTION)
    if q_len % 2:
        q = jnp.pad(q, ((0, 0), (0, 0), (0, 1), (0, 0)))
        bias = jnp.pad(bias, ((0, 0), (0, 0), (0, 1), (0, 0)))
    out = jax.nn.dot_product_attention(
        *(t.transpose(0, 2, 1, 3) for t in (q, k, v)),  # [B, N, heads, head_dim]
        bias=bias.astype(q.dtype), scale=head_dim**-0.5, implementation=implementation)
    return out[:, :q_len].transpose(0, 2, 1, 3)


def attention_implementation(requested: str, dtype, head_dim: int) -> str:
    """Which attention path runs: ``"einsum"`` (our two products and a float32 softmax),
    ``"xla"`` or ``"cudnn"`` (``jax.nn.dot_product_attention`` with that implementation).

    ``"auto"`` is ``"cudnn"`` where cuDNN's fused kernel takes the shapes (default backend a
    GPU, compute dtype bfloat16 or float16, head dim a multiple of 8 and at most 128), else
    ``"einsum"``: on the CPU and in float32 the model is unchanged (where cuDNN's own checks
    still refuse a call at trace time, ``auto`` computes that block's attention as two products
    and logs why: ``MultiscaleAttention._fused_attention``). An explicit ``"cudnn"`` on shapes
    the kernel cannot take is an error, not a fallback. All paths compute the same
    function (equal to float tolerance, values and gradients: tests/test_models_mvit_ops.py).
    """
    if requested not in ATTENTION_IMPLS:
        raise ValueError(f"attention_impl must be one of {ATTENTION_IMPLS}; got {requested!r}.")
    fits = (jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_dim % 8 == 0
            and head_dim <= 128)
    if requested == "auto":
        return "cudnn" if fits and jax.default_backend() == "gpu" else "einsum"
    if requested == "cudnn" and not fits:
        raise ValueError(f"attention_impl='cudnn' needs a bfloat16 or float16 compute dtype and "
                         f"a head dim that is a multiple of 8 and at most 128; got "
                         f"{jnp.dtype(dtype).name} and {head_dim}. Use 'auto' or 'einsum'.")
    return requested


def _pools(kernel, stride) -> bool:
    return math.prod(kernel) > 1 or math.prod(stride) > 1


class Mlp(nn.Module):
    """Linear(dim, 4 dim) -> GELU -> Linear(4 dim, dim_out); ``dim`` is the input width."""

    dim: int
    dim_out: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        hidden = _gelu(nn.Dense(4 * self.dim, dtype=self.dtype, name="fc1")(x))
        return nn.Dense(self.dim_out, dtype=self.dtype, name="fc2")(hidden)


class Adapter(nn.Module):
    """Residual bottleneck MLP (Luo et al. 2024); the up-projection starts at zero, so it is the
    identity at initialisation."""

    dim: int
    bottleneck: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        h = _gelu(nn.Dense(self.bottleneck, dtype=self.dtype, name="down")(x))
        return x + nn.Dense(self.dim, kernel_init=nn.initializers.zeros, dtype=self.dtype,
                            name="up")(h)


class MultiscaleBlock(nn.Module):
    spec: BlockSpec
    input_size: tuple[int, int, int]
    rel_pos_spatial: int
    adapter: bool = False
    rel_pos_embed: bool = True
    residual_pool: bool = True
    proj_after_attn: bool = True
    dtype: Any = jnp.float32
    attention_impl: str = "auto"

    @nn.compact
    def __call__(self, x):
        s = self.spec
        widens = s.dim_in != s.dim_out
        attn_dim = s.dim_out if self.proj_after_attn else s.dim_in
        x_norm = _layer_norm("norm1")(x)
        x_attn, thw = MultiscaleAttention(
            s, self.input_size, self.rel_pos_spatial, attn_dim, rel_pos_embed=self.rel_pos_embed,
            residual_pool=self.residual_pool, dtype=self.dtype,
            attention_impl=self.attention_impl, name="attn")(x_norm)
        if widens and self.proj_after_attn:
            x = nn.Dense(s.dim_out, dtype=self.dtype, name="project")(x_norm)
        if math.prod(s.stride_q) > 1:
            kernel = tuple(st + 1 if st > 1 else st for st in s.stride_q)
            cls, rest = x[:, :1], x[:, 1:].reshape(x.shape[0], *self.input_size, x.shape[-1])
            rest = max_pool3d(rest, kernel, tuple(s.stride_q))
            x = jnp.concatenate([cls, rest.reshape(x.shape[0], -1, x.shape[-1])], axis=1)
        x = x + x_attn
        x_norm = _layer_norm("norm2")(x)
        if widens and not self.proj_after_attn:  # v1: widen on the MLP's skip path
            x = nn.Dense(s.dim_out, dtype=self.dtype, name="project")(x_norm)
        x = x + Mlp(attn_dim, s.dim_out, dtype=self.dtype, name="mlp")(x_norm)
        if self.adapter:
            x = Adapter(s.dim_out, max(1, s.dim_out // 4), dtype=self.dtype, name="adapter")(x)
        return x, thw


class MViT(nn.Module):
    """MViTv2 video classifier.

    Attributes:
      num_classes: size of the head.
      blocks: the block settings, in order.
      input_size: (T, H, W) of input clips; the relative position tables are sized for it.
      patch_kernel / patch_stride / patch_padding: the patch-embedding Conv3d.
      adapters: add an identity-initialised residual adapter after every block.
      head_dropout: dropout before the head (train=True only; rng name 'dropout').
      dtype: compute dtype of the products (``jnp.bfloat16``: mixed precision, see the module
        docstring).
      rel_pos_embed / residual_pool / proj_after_attn: MViTv2 (all True) or MViTv1 (all False);
        see the module docstring.
      attention_impl: ``"auto"`` (cuDNN's fused attention on a GPU in bfloat16, else our
        einsum path), ``"einsum"``, ``"xla"`` or ``"cudnn"``:
        :func:`~maskdp_jax.models.mvit.attention_implementation`. The same function whichever runs;
        a speed setting only.
    """

    num_classes: int
    blocks: tuple[BlockSpec, ...]
    input_size: tuple[int, int, int]
    patch_kernel: tuple[int, int, int] = (3, 7, 7)
    patch_stride: tuple[int, int, int] = (2, 4, 4)
    patch_padding: tuple[int, int, int] = (1, 3, 3)
    adapters: bool = False
    head_dropout: float = 0.0
    rel_pos_embed: bool = True
    residual_pool: bool = True
    proj_after_attn: bool = True
    dtype: Any = jnp.float32
    attention_impl: str = "auto"

    def token_grid(self) -> tuple[int, int, int]:
        """Token grid ``(t, h, w)`` after the patch embedding."""
        return pooled_size(self.input_size, self.patch_kernel, self.patch_stride,
                           self.patch_padding)

    def grid_before(self, block: int) -> tuple[int, int, int]:
        """Token grid ``(t, h, w)`` entering block ``block`` (``len(blocks)``: leaving the last)."""
        thw = self.token_grid()
        for spec in self.blocks[:block]:
            if _pools(spec.kernel_q, spec.stride_q):
                thw = pooled_size(thw, spec.kernel_q, spec.stride_q)
        return thw

    @nn.compact
    def __call__(self, x, *, train: bool = False, start_block: int = 0,
                 stop_block: int | None = None):
        """Logits of clips, or a part of the network (the frozen prefix and its trainable suffix,
        for the feature cache of ``run.features``).

        Args:
          x: clips ``[B, T, H, W, C]`` (``start_block=0`` only), or the tokens entering block
            ``start_block`` (any, 0 included: after the patch embedding), ``[B, 1 + t*h*w,
            dim]`` (:meth:`grid_before`); entering the final norm (``start_block=len(blocks)``)
            the class token alone, ``[B, 1, dim]``, suffices.
          start_block: first block to run; the blocks before it (and the patch embedding) are
            skipped.
          stop_block: stop before this block and return the tokens entering it (``len(blocks)``:
            leaving the last block, before the final norm); None: run to the logits.

        Returns:
          logits ``[B, num_classes]``, or tokens ``[B, N, dim]`` when ``stop_block`` is set.
          ``apply(x, stop_block=k)`` then ``apply(tokens, start_block=k)`` gives the logits of
          ``apply(x)`` (tested for every k).
        """
        stop = len(self.blocks) if stop_block is None else stop_block
        if not 0 <= start_block <= stop <= len(self.blocks):
            raise ValueError(f"need 0 <= start_block <= stop_block <= {len(self.blocks)}; got "
                             f"start_block={start_block}, stop_block={stop_block}.")
        thw = self.grid_before(start_block)
        if x.ndim == 5:
            if start_block:
                raise ValueError(f"start_block={start_block} takes tokens [B, N, dim]; got clips "
                                 f"of shape {tuple(x.shape)}.")
            x = self._embed(x)
        elif start_block < len(self.blocks) and x.shape[1] != 1 + math.prod(thw):
            raise ValueError(f"block {start_block} takes 1 + {'x'.join(map(str, thw))} tokens; "
                             f"got x of shape {tuple(x.shape)}.")
        spatial = max(self.token_grid()[1:])  # the relative position tables' side, per block
        for earlier in self.blocks[:start_block]:
            spatial //= earlier.stride_q[1]
        for i in range(start_block, stop):
            spec = self.blocks[i]
            q_size = spatial // spec.stride_q[1]
            kv_size = spatial // spec.stride_kv[1]
            block = MultiscaleBlock(spec, thw, 2 * max(q_size, kv_size) - 1,
                                    adapter=self.adapters, rel_pos_embed=self.rel_pos_embed,
                                    residual_pool=self.residual_pool,
                                    proj_after_attn=self.proj_after_attn, dtype=self.dtype,
                                    attention_impl=self.attention_impl, name=f"blocks_{i}")
            x, thw = block(x)
            spatial = q_size
        if stop_block is not None:
            return x
        x = _layer_norm("norm")(x)[:, 0]
        x = nn.Dropout(self.head_dropout, deterministic=not train)(x)
        return nn.Dense(self.num_classes, name="head")(x)

    def _embed(self, x):
        """Clips ``[B, T, H, W, C]`` -> the tokens entering block 0 (class token first)."""
        if tuple(x.shape[1:4]) != tuple(self.input_size):
            raise ValueError(
                f"input clips are {tuple(x.shape[1:4])} (T, H, W) but this model's relative "
                f"position tables are built for {tuple(self.input_size)}."
            )
        x = PatchEmbed(self.blocks[0].dim_in, self.patch_kernel, self.patch_stride,
                       self.patch_padding, dtype=self.dtype, name="patch_embed")(x)
        x = x.astype(jnp.float32)  # the residual stream stays float32
        b = x.shape[0]
        x = x.reshape(b, -1, x.shape[-1])
        init = nn.initializers.truncated_normal(0.02)
        dim = x.shape[-1]
        cls = self.param("cls_token", init, (dim,))
        x = jnp.concatenate([jnp.broadcast_to(cls, (b, 1, dim)), x], axis=1)

        thw = self.token_grid()
        if not self.rel_pos_embed:  # v1: separable absolute position embedding
            spatial_pos = self.param("spatial_pos", init, (thw[1] * thw[2], dim))
            temporal_pos = self.param("temporal_pos", init, (thw[0], dim))
            class_pos = self.param("class_pos", init, (dim,))
            grid = (temporal_pos[:, None] + spatial_pos[None]).reshape(-1, dim)  # (t, hw) order
            x = x + jnp.concatenate([class_pos[None], grid])
        return x
