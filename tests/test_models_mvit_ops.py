"""Hand-written MViT ops (written for speed) must equal the library op they replace."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax.models.mvit import DepthwiseConv3d, PatchEmbed, _im2col
from maskdp_jax.models.pooling import max_pool3d, pooled_size, strided_window

pytestmark = pytest.mark.slow  # every test here compiles pieces of the network (BUILD.md)

# Each check below runs as one jitted program (ours and the library's value, gradient and
# per-example gradient together): run op by op, each of the dozens of slices, pads and
# reductions of the hand-written ops is dispatched (and compiled) on its own, which cost more
# than compiling the whole comparison once.


def _assert_trees_close(got, want, rtol, atol):
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=rtol, atol=atol), got, want)


# The pooling code works axis by axis, so each case covers several kinds of axis at once: the
# backward pads of a strided axis depend on whether the last window ends at the input's edge
# (odd vs even sizes), on strides above the kernel (windows with gaps between them), and on even
# kernels (k // 2 padding on both sides: one more output than input at stride 1).
@pytest.mark.parametrize(
    "shape, kernel, stride",
    [
        # temporal stride on an odd size (kv pooling of mvit_parity), no stride on an odd size,
        # stride 2 on an even size (q pooling at a stage transition)
        ((2, 5, 7, 8, 4), (3, 3, 3), (2, 1, 2)),
        # kernel 1 along t; stride 8 > kernel on 14 (mvit_v2_s first-stage kv pooling); stride
        # 4 > kernel on an odd size
        ((2, 4, 14, 11, 4), (1, 3, 3), (1, 8, 4)),
        # an even kernel, at stride 1 and at stride 2
        ((2, 4, 6, 5, 4), (2, 2, 2), (1, 1, 2)),
    ],
)
def test_depthwise_conv_equals_grouped_flax_conv(shape, kernel, stride):
    x = jax.random.normal(jax.random.key(1), shape)
    reference = nn.Conv(
        shape[-1], kernel, strides=stride, padding=[(k // 2, k // 2) for k in kernel],
        feature_group_count=shape[-1], use_bias=False,
    )
    params = reference.init(jax.random.key(0), x)
    ours = DepthwiseConv3d(kernel, stride)
    # Same parameter layout, so converted checkpoints load into either.
    assert (jax.tree.map(jnp.shape, ours.init(jax.random.key(0), x))
            == jax.tree.map(jnp.shape, params))

    # The hand-written VJP (models.pooling): gradients w.r.t. the kernel and the input, and
    # per-example gradients under vmap (what clipping computes), equal autodiff of the library
    # convolution.
    def value_grads_per_example(module, p, v):
        def loss(p, v):
            return jnp.sum(jnp.sin(module.apply(p, v)))

        grads = jax.grad(loss, argnums=(0, 1))(p, v)
        per_example = jax.vmap(jax.grad(lambda p, e: loss(p, e[None])), in_axes=(None, 0))(p, v)
        return module.apply(p, v), grads, per_example

    @jax.jit
    def both(p, v):
        return value_grads_per_example(ours, p, v), value_grads_per_example(reference, p, v)

    (value, *grads), (want_value, *want_grads) = both(params, x)
    assert value.shape == want_value.shape
    np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-5)
    _assert_trees_close(grads, want_grads, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "shape, kernel, stride",
    [
        # kernel 3 at stride 2 on odd (t, w) and even (h) sizes
        ((2, 5, 8, 7, 3), (3, 3, 3), (2, 2, 2)),
        # kernel 1 along t; kernel 5 at stride 4 (padding 2); MViTv2's skip pool (3 at stride 2)
        # on an odd size
        ((2, 4, 8, 9, 6), (1, 5, 3), (1, 4, 2)),
    ],
)
def test_max_pool_equals_flax_max_pool(shape, kernel, stride):
    """Value, gradient and per-example gradients of the skip path's max pool equal autodiff of
    ``nn.max_pool`` (random input: no ties)."""
    x = jax.random.normal(jax.random.key(3), shape)
    pads = [(k // 2, k // 2) for k in kernel]

    def reference(v):
        return nn.max_pool(v, kernel, strides=stride, padding=pads)

    def ours(v):
        return max_pool3d(v, kernel, stride)

    weights = jax.random.normal(jax.random.key(4), jax.eval_shape(reference, x).shape)

    def value_grad_per_example(fn, v, c):
        grad = jax.grad(lambda v: jnp.sum(fn(v) * c))(v)
        per_example = jax.vmap(jax.grad(lambda v, c: jnp.sum(fn(v[None]) * c)))(v, c)
        return fn(v), grad, per_example

    @jax.jit
    def both(v, c):
        return value_grad_per_example(ours, v, c), value_grad_per_example(reference, v, c)

    (value, *grads), (want_value, *want_grads) = both(x, weights)
    np.testing.assert_array_equal(value, want_value)  # shape included
    _assert_trees_close(grads, want_grads, rtol=1e-6, atol=1e-6)


def test_max_pool_gives_a_tie_to_the_first_maximum_as_pytorch_does():
    """Equal inputs: each window's cotangent goes to its first maximal input in (t, h, w) order
    (``torch.nn.MaxPool3d``), not split across the tie."""
    x = jnp.ones((1, 1, 4, 4, 1))
    grad = jax.jit(jax.grad(lambda v: jnp.sum(max_pool3d(v, (1, 3, 3), (1, 2, 2)))))(x)
    # windows start at -1 and 1 (padding 1): their first real inputs are rows/columns 0 and 1
    np.testing.assert_array_equal(grad[0, 0, :, :, 0],
                                  [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    "kernel, stride, padding",
    [
        ((2, 4, 4), (2, 4, 4), (0, 0, 0)),  # CPU presets: reshape + matmul
        # im2col on the CPU: mvit_v2_s's kernel 7 at stride 4 with padding 3 along h, and uneven
        # kernels, strides and paddings (none along w)
        ((3, 7, 5), (2, 4, 3), (1, 3, 0)),
    ],
)
def test_patch_embed_equals_flax_conv(kernel, stride, padding, monkeypatch):
    """Values and parameter gradients (full fine-tuning trains the patch embedding) equal
    ``nn.Conv``'s. Overlapping windows: on a GPU or TPU the embedding is
    ``lax.conv_general_dilated``, a path the CPU suite never takes: forced here on the CPU, it
    equals the library too."""
    import maskdp_jax.models.mvit

    x = jax.random.normal(jax.random.key(2), (2, 4, 16, 16, 3))
    reference = nn.Conv(8, kernel, strides=stride, padding=[(p, p) for p in padding])
    params = reference.init(jax.random.key(0), x)
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias
    ours = PatchEmbed(8, kernel, stride, padding)
    assert (jax.tree.map(jnp.shape, ours.init(jax.random.key(0), x))
            == jax.tree.map(jnp.shape, params))

    def value_and_grads(module):
        # a fresh function per call: the branch is chosen when it is traced
        def run(p, v):
            return module.apply(p, v), jax.grad(
                lambda p: jnp.sum(jnp.sin(module.apply(p, v))))(p)
        return jax.jit(run)(params, x)

    want = value_and_grads(reference)
    got = value_and_grads(ours)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    _assert_trees_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    if kernel == stride:
        # A token of the reshape path sees exactly its own cell: changing one other cell leaves
        # it.
        y = x.at[:, :2, :4, :4].add(1.0)
        out_x, out_y = ours.apply(params, x), ours.apply(params, y)
        np.testing.assert_array_equal(out_x[:, 1:], out_y[:, 1:])
        assert not np.allclose(out_x[:, 0, 0, 0], out_y[:, 0, 0, 0])
    else:
        monkeypatch.setattr(maskdp_jax.models.mvit.jax, "default_backend", lambda: "gpu")
        accelerator = value_and_grads(ours)
        np.testing.assert_allclose(accelerator[0], want[0], rtol=1e-5, atol=1e-5)
        _assert_trees_close(accelerator[1], want[1], rtol=1e-4, atol=1e-4)


def test_im2col_built_axis_by_axis_is_the_windows_side_by_side():
    """The W-then-H-then-T construction holds the same values in the same (kT, kH, kW, C) order
    as all ``kT*kH*kW`` three-axis windows concatenated at once: exactly, so the product after it
    is bit for bit the one-stage im2col's (and the vmapped shadow models' equality is kept).
    mvit_v2_s's kernel 7 at stride 4 with padding 3 along h, uneven kernels, strides and paddings
    (none along w)."""
    kernel, stride, padding = (3, 7, 5), (2, 4, 3), (1, 3, 0)
    x = jax.random.normal(jax.random.key(3), (2, 4, 16, 16, 3))

    @jax.jit
    def both(x):
        xp = jnp.pad(x, [(0, 0), *[(p, p) for p in padding], (0, 0)])
        out = pooled_size(x.shape[1:4], kernel, stride, padding)
        at_once = jnp.concatenate(
            [strided_window(xp, o, stride, out) for o in np.ndindex(*kernel)], axis=-1)
        return _im2col(x, kernel, stride, padding), at_once

    axis_by_axis, at_once = both(x)
    np.testing.assert_array_equal(axis_by_axis, at_once)


@pytest.mark.parametrize("preset", ["mvit_test", "mvit_v1_parity"])
def test_prefix_then_suffix_is_the_whole_network_at_every_cut(preset):
    """The feature cache runs blocks [0, k) once and trains on blocks [k, L) + norm + head:
    apply(x, stop_block=k) then apply(tokens, start_block=k) must be apply(x), for every k
    (v2 relative positions and v1 absolute positions), and entering the final norm the class
    token alone suffices."""
    from maskdp_jax import models

    model = models.get_model(preset, num_classes=5)
    x = jax.random.normal(jax.random.key(0), (2, *model.input_size, 3))
    params = jax.jit(model.init)(jax.random.key(1), x)
    whole = jax.jit(model.apply)(params, x)
    depth = len(model.blocks)

    # jitted, prefix and suffix of a cut in one program: one compilation per cut costs less here
    # than two, or than the op-by-op dispatch of the blocks
    @functools.partial(jax.jit, static_argnames="k")
    def prefix_then_suffix(params, x, k):
        tokens = model.apply(params, x, stop_block=k)
        return tokens, model.apply(params, tokens[:, :1] if k == depth else tokens,
                                   start_block=k)

    # v1 differs from v2 before block 0 (absolute positions): its first, a middle and the last
    # cut; every cut of the v2 preset.
    cuts = range(depth + 1) if depth <= 2 else (0, 1, depth // 2 + 1, depth)
    for k in cuts:
        tokens, logits = prefix_then_suffix(params, x, k)
        thw = model.grid_before(k)
        assert tokens.shape[:2] == (2, 1 + int(np.prod(thw))), (k, tokens.shape, thw)
        np.testing.assert_allclose(logits, whole, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="block 1 takes 1 \\+"):
        model.apply(params, tokens[:, :1], start_block=1)  # the class token alone
    with pytest.raises(ValueError, match="start_block <= stop_block"):
        model.apply(params, x, start_block=2, stop_block=1)


def test_bfloat16_compute_keeps_float32_parameters_logits_and_gradients():
    """dtype=bfloat16 runs the products in bfloat16 and everything the DP step reads (logits,
    loss, per-parameter gradients) in float32, close to the float32 model."""
    from maskdp_jax import models

    x = jax.random.normal(jax.random.key(0), (2, 8, 32, 32, 3))
    full, half = (models.get_model("mvit_test", num_classes=5, dtype=d)
                  for d in (jnp.float32, jnp.bfloat16))
    params = jax.jit(full.init)(jax.random.key(1), x)
    assert jax.tree.all(jax.tree.map(lambda p: p.dtype == jnp.float32, params))

    @jax.jit  # one program for the three
    def logits_and_grads(p):
        return full.apply(p, x), half.apply(p, x), jax.grad(
            lambda p: jnp.sum(half.apply(p, x) ** 2))(p)

    want, got, grads = logits_and_grads(params)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, want, atol=0.05 * float(jnp.abs(want).max()))
    assert not np.array_equal(got, want)  # the products did run in bfloat16
    assert jax.tree.all(jax.tree.map(lambda g: g.dtype == jnp.float32, grads))
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))



def _loss_and_grads(model, params, x):
    """One program: logits, and the gradients of a non-linear function of them w.r.t. every
    parameter and the input (so the attention's backward pass is compared too)."""

    def loss(p, v):
        logits = model.apply({"params": p}, v)
        return jnp.sum(jnp.sin(logits)), logits

    (_, logits), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
        params, x)
    return logits, grads


def _assert_close(got, want, tol):
    """Every leaf within ``tol`` x the largest magnitude of ``want``'s leaves (a gradient that
    is zero in exact arithmetic, like a key LayerNorm's bias under softmax, is rounding noise
    in both)."""
    scale = max(float(jnp.abs(w).max()) for w in jax.tree.leaves(want))
    paths = jax.tree_util.tree_leaves_with_path(want)
    for (path, w), g in zip(paths, jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(g, w, atol=tol * scale, rtol=0,
                                   err_msg=jax.tree_util.keystr(path))


@pytest.fixture(scope="module")
def mvit_test_params():
    from maskdp_jax import models

    x = jax.random.normal(jax.random.key(0), (2, 8, 32, 32, 3))
    model = models.get_model("mvit_test", num_classes=5)
    params = jax.jit(model.init)(jax.random.key(1), x)["params"]
    # trained relative-position tables are far from their 0.02-scale initial values
    params = jax.tree_util.tree_map_with_path(
        lambda path, p: p * 50 if "rel_pos" in jax.tree_util.keystr(path) else p, params)
    return params, x


def test_the_fused_attention_branch_equals_the_einsum_branch(mvit_test_params):
    """On a GPU in bfloat16 the attention is ``jax.nn.dot_product_attention`` (cuDNN's fused
    kernel; padding to even lengths, the relative-position bias as its ``bias``), a path the CPU
    never takes by default: forced here through the same call with ``implementation="xla"``,
    logits and gradients (every parameter, relative-position tables included, and the input)
    equal our einsum path's to float32 tolerance. mvit_test's sequences are all of odd length
    (``1 + t*h*w``), so both padding branches run."""
    from maskdp_jax import models

    params, x = mvit_test_params
    einsum, fused = (_loss_and_grads(models.get_model("mvit_test", num_classes=5,
                                                      attention_impl=impl), params, x)
                     for impl in ("einsum", "xla"))
    np.testing.assert_allclose(fused[0], einsum[0], rtol=1e-5, atol=1e-5)
    _assert_close(fused[1], einsum[1], 1e-5)
    assert float(jnp.abs(einsum[1][0]["blocks_0"]["attn"]["rel_pos_h"]).max()) > 0


def test_which_attention_runs_and_bad_choices():
    from maskdp_jax.models.mvit import attention_implementation

    assert attention_implementation("auto", jnp.bfloat16, 96) == "einsum"  # the CPU
    assert attention_implementation("auto", jnp.float32, 96) == "einsum"
    assert attention_implementation("xla", jnp.float32, 12) == "xla"
    with pytest.raises(ValueError, match="attention_impl must be one of"):
        attention_implementation("flash", jnp.float32, 96)
    with pytest.raises(ValueError, match="needs a bfloat16 or float16 compute dtype"):
        attention_implementation("cudnn", jnp.float32, 96)
    with pytest.raises(ValueError, match="multiple of 8"):
        attention_implementation("cudnn", jnp.bfloat16, 12)


def test_auto_attention_picks_cudnn_on_a_gpu_in_bfloat16_only(monkeypatch):
    import maskdp_jax.models.mvit

    monkeypatch.setattr(maskdp_jax.models.mvit.jax, "default_backend", lambda: "gpu")
    assert maskdp_jax.models.mvit.attention_implementation("auto", jnp.bfloat16, 96) == "cudnn"
    assert maskdp_jax.models.mvit.attention_implementation("auto", jnp.float32, 96) == "einsum"
    assert maskdp_jax.models.mvit.attention_implementation("auto", jnp.bfloat16, 100) == "einsum"


def test_on_a_gpu_auto_takes_the_cudnn_branch_or_falls_back_where_cudnn_refuses(
        mvit_test_params, monkeypatch, caplog):
    """The default model's GPU path up to cuDNN's kernel: with the backend reported as a GPU,
    ``attention_impl="auto"`` in bfloat16 calls ``jax.nn.dot_product_attention`` with
    ``implementation="cudnn"`` in every block (recorded here, and run by XLA's implementation of
    the same call: the one kernel this CPU cannot run; the float32 test compares its gradients).
    Where cuDNN's checks refuse the call (an older GPU, cuDNN version, a shape), ``auto``
    computes the attention as two products and says so, and the logits of the two agree to
    bfloat16 precision; an explicit ``"cudnn"`` fails with cuDNN's reason."""
    from maskdp_jax import models

    params, x = mvit_test_params
    original, calls = jax.nn.dot_product_attention, []

    def recorded(*args, implementation=None, **kwargs):
        calls.append(implementation)
        return original(*args, implementation="xla", **kwargs)

    def refusing(*args, implementation=None, **kwargs):
        raise NotImplementedError("cuDNN says no")

    import maskdp_jax.models.mvit

    auto, cudnn = (models.get_model("mvit_test", num_classes=5, dtype=jnp.bfloat16,
                                    attention_impl=impl) for impl in ("auto", "cudnn"))
    monkeypatch.setattr(maskdp_jax.models.mvit.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(maskdp_jax.models.mvit.jax.nn, "dot_product_attention", recorded)
    fused = jax.jit(auto.apply)({"params": params}, x)
    assert set(calls) == {"cudnn"} and len(calls) == len(auto.blocks), calls

    monkeypatch.setattr(maskdp_jax.models.mvit.jax.nn, "dot_product_attention", refusing)
    with caplog.at_level("WARNING"):
        fallback = jax.jit(auto.apply)({"params": params}, x)
    assert "refused" in caplog.text and "cuDNN says no" in caplog.text, caplog.text
    np.testing.assert_allclose(fused, fallback, atol=3e-2 * float(jnp.abs(fallback).max()))
    assert not np.array_equal(fused, fallback)  # two computations, not one path taken twice
    with pytest.raises(NotImplementedError, match="cuDNN says no"):
        cudnn.apply({"params": params}, x)
