"""Ghost norms and book-keeping (maskdp_jax/core/ghost.py, models/ghost_rules.py): the private pass
without per-example gradients equals the vmap path, which makes these the privacy tests of the
ghost path: every per-example norm, the clipped sum and the statistics, every clipped contribution
<= C, padding and non-finite examples zeroed; and a layer it cannot handle is an error naming it.
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CLIP_SHAPE, TinyVideoNet
from flax import traverse_util

from benchmarks import ghost_equality, program_flops
from maskdp_jax.core import clipping, ghost
from maskdp_jax.core.train_step import one_video_loss
from maskdp_jax.models import ghost_rules, mvit
from maskdp_jax.run import model as run_model

C = ghost_equality.CLIP_NORM
TOLERANCE = 1e-5


def _check(result):
    for mode, r in result.items():
        assert r["counts_equal"], mode
        assert r["norm_rel"] <= TOLERANCE, (mode, r)
        assert r["sum_rel"] <= TOLERANCE, (mode, r)
        assert r["stats_rel"] <= TOLERANCE, (mode, r)
        assert r["max_contribution"] <= C * (1 + 1e-6), (mode, r)
        # the batch exercises both regimes and the non-finite example
        assert r["clipped"] > 0 and r["unclipped"] > 0 and r["nonfinite"] == 1, (mode, r)


@pytest.fixture(scope="module")
def tiny(tiny_model):
    model, params, _ = tiny_model
    frozen = {}
    return model, params, frozen


def _tiny_compare(tiny, rules=None):
    model, trainable, frozen = tiny
    return ghost_equality.compare(model, trainable, frozen, input_size=CLIP_SHAPE[:3],
                                  examples=6, clips=2, rules=rules)


def test_ghost_equals_vmap_on_the_tiny_model(tiny):
    """Patchify convolution, LayerNorm and head: norms, sum and statistics in maskdp and dp."""
    _check(_tiny_compare(tiny))


def _broken_layer_norm_rules():
    """The rules with the LayerNorm's bias norm dropped (a rule that forgets a parameter)."""
    rules = dict(run_model.ghost_rules())
    rule = rules[(nn.LayerNorm, "__call__")]

    def per_example(static, a, g, names):
        sq_norms, *rest = rule.per_example(static, a, g, names)
        return {k: v for k, v in sq_norms.items() if k != "bias"}, *rest

    rules[(nn.LayerNorm, "__call__")] = dataclasses.replace(rule, per_example=per_example)
    return rules


def test_a_broken_norm_rule_fails_the_equality(tiny):
    result = _tiny_compare(tiny, rules=_broken_layer_norm_rules())
    with pytest.raises(AssertionError):
        _check(result)


@pytest.mark.slow
def test_ghost_equals_vmap_on_mvit_test_full_fine_tuning():
    """Every trainable parameter kind of MViTv2: dense layers, patch embedding, depthwise pooling
    convolutions, LayerNorms, relative position tables, class token, head."""
    _check(ghost_equality.compare_preset("mvit_test", strategy="full", examples=6, clips=2))


def _recording(rules, record, used):
    """``rules``, each also writing its per-example squared norms into ``record[(*layer path,
    parameter)]`` and its kind into ``used`` (the path reaches the rule through its ``static``)."""
    out = {}
    for kind, rule in rules.items():
        def tap(module, args, kwargs, rule=rule):
            a, static = rule.tap(module, args, kwargs)
            return a, (tuple(module.path), static)

        def per_example(static, a, g, names, rule=rule, kind=kind):
            path, static = static
            out = rule.per_example(static, a, g, names)
            record.update({(*path, name): sq for name, sq in out[0].items()})
            used.add(kind)
            return out

        out[kind] = dataclasses.replace(rule, tap=tap, per_example=per_example)
    return out


def _tiny_mvit(version: str) -> mvit.MViT:
    """Two MViT blocks on 2 x 8 x 8 clips (a 2 x 4 x 4 token grid). Block 0, width 4 -> 8: q
    pooled to 2 x 2 x 2 and k, v to 2 x 1 x 1 by depthwise convolutions, so its relative
    position tables (v2) relate queries and keys of different sizes. Block 1 pools nothing; it
    is there because the head reads the class token, whose query has no position bias: only a
    later block sees the tokens the tables act on (so block 1's own tables get no gradient). v1
    has the absolute positions instead. The papers' presets compile for minutes on a CPU, this
    model in seconds."""
    v1 = dict(rel_pos_embed=False, residual_pool=False, proj_after_attn=False)
    return mvit.MViT(
        num_classes=3, input_size=(2, 8, 8), patch_kernel=(1, 2, 2), patch_stride=(1, 2, 2),
        patch_padding=(0, 0, 0), attention_impl="einsum",
        blocks=(mvit.BlockSpec(1, 4, 8, stride_q=(1, 2, 2), stride_kv=(1, 4, 4)),
                mvit.BlockSpec(1, 8, 8, kernel_q=(1, 1, 1), kernel_kv=(1, 1, 1))),
        **(v1 if version == "v1" else {}))


def _random_params(model, x, rng):
    """Random values of ``model.init``'s shapes (running init eagerly costs more than the
    comparison): LayerNorm scales near 1, everything else N(0, 0.3²), so that every parameter,
    the position tables and the class token too, has a gradient of some size."""
    shapes = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
    return jax.tree_util.tree_map_with_path(
        lambda path, s: jnp.asarray((path[-1].key == "scale") + 0.3 * rng.normal(size=s.shape),
                                    s.dtype), shapes)


# Each model with the rule kinds it must exercise: together, every rule of models/ghost_rules.py.
_RULE_MODELS = {
    "mvit_v2": (lambda: _tiny_mvit("v2"), set(ghost_rules.RULES) - {(nn.Conv, "__call__")}),
    "mvit_v1": (lambda: _tiny_mvit("v1"), set(ghost_rules.RULES) - {
        (nn.Conv, "__call__"), (mvit.MultiscaleAttention, "_rel_pos_terms")}),
    "conv": (TinyVideoNet, {(nn.Conv, "__call__"), (nn.LayerNorm, "__call__"),
                            (nn.Dense, "__call__")}),
}


def test_the_models_cover_every_ghost_rule():
    """The models below exercise every rule of models/ghost_rules.py between them (each test
    checks that its model uses exactly the rules listed for it)."""
    assert set().union(*(kinds for _, kinds in _RULE_MODELS.values())) == set(ghost_rules.RULES)


# v2 and the convolutional model exercise every rule; v1 adds the absolute positions of the
# embedding's rule (another ~5 s of compilation): slow lane.
@pytest.mark.parametrize("name", ["conv", "mvit_v2", pytest.param("mvit_v1",
                                                                  marks=pytest.mark.slow)])
def test_every_rule_gives_each_parameters_per_example_norm(name):
    """Each layer rule's per-example squared norm of each parameter (relative position tables,
    depthwise pooling kernels, qkv, patch embedding, LayerNorms, class token, ...) equals that
    of the explicit per-example gradient ``vmap(grad)``, parameter by parameter (a rule off by a
    factor is caught even where its share of the total norm is small); so do the total norms
    and the clipped sum (one example clipped, one not). Two videos of two clips, all
    parameters trainable."""
    make, kinds = _RULE_MODELS[name]
    model = make()
    rng = np.random.default_rng(0)
    shape = (*model.input_size, 3) if isinstance(model, mvit.MViT) else CLIP_SHAPE
    clips = jnp.asarray(rng.normal(size=(2, 2, *shape)), jnp.float32)
    labels = jnp.asarray([0, 2], jnp.int32)
    params = _random_params(model, clips[0], rng)
    apply = lambda p, x: model.apply({"params": p}, x)  # noqa: E731

    def loss(p, example):
        return one_video_loss(apply, {}, p, example)

    record, used = {}, set()

    @jax.jit
    def both(trainable, examples):
        per = jax.vmap(jax.grad(loss), in_axes=(None, 0))(trainable, examples)
        explicit = {k: jnp.sum(jnp.square(v).reshape(2, -1), axis=1)
                    for k, v in traverse_util.flatten_dict(per).items()}
        norms = jnp.sqrt(sum(explicit.values()))
        c = jnp.sqrt(norms[0] * norms[1])  # between the two norms
        clipped = jax.tree.map(lambda g: jnp.tensordot(jnp.minimum(1.0, c / norms), g, 1), per)
        ghost_sum, ghost_norms, _, _ = ghost.clipped_sum(
            loss, trainable, examples, jnp.ones(2), l2_clip_norm=c,
            rules=_recording(run_model.ghost_rules(), record, used))
        return explicit, norms, clipped, dict(record), ghost_norms, ghost_sum

    explicit, norms, clipped, got, ghost_norms, ghost_sum = both(params, (clips, labels))
    assert used == kinds
    for key, sq in explicit.items():  # the comparison below is not one of zeros
        assert key[0] == "blocks_1" and key[-1].startswith("rel_pos") or np.all(sq > 0), key
    assert set(got) == set(explicit)  # every trainable parameter's norm comes from a rule
    for key, sq in explicit.items():
        np.testing.assert_allclose(np.sqrt(got[key]), np.sqrt(sq), rtol=1e-4, atol=1e-9,
                                   err_msg="/".join(key))
    np.testing.assert_allclose(ghost_norms, norms, rtol=1e-5)
    assert abs(float(norms[0] - norms[1])) > 1e-3 * float(norms.max())  # one clipped, one not
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-8),
                 ghost_sum, clipped)


class _Embedder(nn.Module):
    @nn.compact
    def __call__(self, x):
        table = self.param("table", nn.initializers.normal(), (x.shape[-1], 3))
        return jnp.mean(x @ table, axis=tuple(range(x.ndim - 1)))


class _Twice(nn.Module):
    @nn.compact
    def __call__(self, x):
        dense = nn.Dense(3, name="shared")
        return jnp.mean(dense(dense(x[..., :3])), axis=tuple(range(x.ndim - 1)))


class _GroupedConv(nn.Module):
    @nn.compact
    def __call__(self, x):
        y = nn.Conv(3, (1, 1, 1), feature_group_count=3, name="grouped")(x)
        return jnp.mean(y, axis=(0, 1, 2, 3))


def _ghost_sum(module, x):
    params = module.init(jax.random.key(0), x[0])["params"]

    def loss(p, example):
        return jnp.sum(module.apply({"params": p}, example))

    return clipping.clipped_grad_sum(loss, params, x, jnp.ones(x.shape[0]), l2_clip_norm=C,
                                     ghost_rules=run_model.ghost_rules())


@pytest.mark.parametrize("module, message", [
    (_Embedder(), r"layer <root> \(_Embedder\) has no ghost rule.*\['table'\]"),
    (_Twice(), r"layer shared \(Dense\) is called more than once"),
    (_GroupedConv(), r"no ghost rule for this convolution"),
])
def test_a_layer_without_a_rule_is_an_error_naming_it(module, message):
    x = jnp.ones((2, 2, *CLIP_SHAPE))
    with pytest.raises(ValueError, match=message):
        _ghost_sum(module, x)


def test_a_rule_covering_part_of_a_layer_is_an_error():
    rules = dict(run_model.ghost_rules())
    rules[(nn.Dense, "__call__")] = dataclasses.replace(rules[(nn.Dense, "__call__")],
                                                        params=("kernel",))
    model = TinyVideoNet()
    x = jnp.ones((2, 1, *CLIP_SHAPE))
    params = model.init(jax.random.key(0), x[0])["params"]
    with pytest.raises(ValueError, match=r"layer head \(Dense\).*not the trainable \['bias'\]"):
        clipping.clipped_grad_sum(lambda p, e: jnp.sum(model.apply({"params": p}, e)), params,
                                  x, jnp.ones(2), l2_clip_norm=C, ghost_rules=rules)


def test_ghost_rules_need_a_parameter_dict():
    with pytest.raises(TypeError, match="Flax parameter dict"):
        ghost.clipped_sum(lambda w, x: jnp.sum(w * x), jnp.zeros(2), jnp.ones((3, 2)),
                          jnp.ones(3), l2_clip_norm=C, rules=run_model.ghost_rules())


def test_frozen_layers_are_not_tapped_and_need_no_rule():
    """Only layers owning trainable parameters are tapped: a frozen layer without a rule is
    fine, and the clipped sum holds only the trainable leaves."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 2, *CLIP_SHAPE)), jnp.float32)

    class _Model(nn.Module):
        @nn.compact
        def __call__(self, v):
            return nn.Dense(3, name="head")(_Embedder(name="frozen")(v)[None])[0]

    model = _Model()
    params = model.init(jax.random.key(0), x[0])["params"]
    trainable, frozen = {"head": params["head"]}, {"frozen": params["frozen"]}

    def loss(tr, example):
        return jnp.sum(model.apply({"params": {**tr, **frozen}}, example) ** 2)

    out = {}
    for name, rules in (("vmap", None), ("ghost", run_model.ghost_rules())):
        out[name] = clipping.clipped_grad_sum(loss, trainable, x, jnp.ones(3), l2_clip_norm=0.1,
                                              ghost_rules=rules)
    (gv, sv), (gg, sg) = out["vmap"], out["ghost"]
    assert jax.tree.structure(gv) == jax.tree.structure(gg)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), gg, gv)
    np.testing.assert_allclose(sg.norm_sum, sv.norm_sum, rtol=1e-5)


def test_a_bfloat16_book_keeping_product_keeps_each_contribution_within_c():
    """In bfloat16 the book-keeping product ``aᵀ (c ⊙ g)`` rounds the factor-scaled cotangents:
    with the plain factor C / ‖∇L_i‖ that rounding puts some clipped contributions above C (the
    control, computed here from the same bfloat16 cotangents); the rule's bound on it keeps every
    contribution of the ghost path within C, one example at a time."""
    dense = nn.Dense(32, use_bias=False, dtype=jnp.bfloat16)
    rng = np.random.default_rng(3)
    n, tokens, width = 24, 4, 32  # 4 tokens: the ghost norm, not the product, is cheaper
    x = jnp.asarray(rng.normal(size=(n, tokens, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(n, tokens, 32)) * 10.0, jnp.float32)
    params = {"kernel": jnp.asarray(rng.normal(size=(width, 32)), jnp.float32)}

    def loss_fn(p, example):  # gradient x_iᵀ round(y_i): every example far above C
        xi, yi = example
        return jnp.sum(dense.apply({"params": p}, xi).astype(jnp.float32)
                       * yi.astype(jnp.bfloat16).astype(jnp.float32))

    clipped = jax.jit(lambda w: ghost.clipped_sum(loss_fn, params, (x, y), w, l2_clip_norm=C,
                                                  rules=run_model.ghost_rules()))
    contributions, plain = [], []
    for i in range(n):
        grad, norms, _, _ = clipped(jnp.zeros(n).at[i].set(1.0))
        contributions.append(float(np.linalg.norm(np.asarray(grad["kernel"], np.float64))))
        a = np.asarray(x[i].astype(jnp.bfloat16), np.float64)
        g = y[i].astype(jnp.bfloat16)
        factor = C / float(norms[i])
        scaled = np.asarray((g.astype(jnp.float32) * factor).astype(jnp.bfloat16), np.float64)
        plain.append(float(np.linalg.norm(a.T @ scaled)))
        assert float(norms[i]) > C
    assert max(contributions) <= C * (1 + 1e-6), max(contributions)
    assert max(plain) > C * (1 + 1e-4), max(plain)  # the control: the bound is needed
    assert min(contributions) > 0.95 * C  # and costs little


def test_ghost_equals_vmap_in_bfloat16_within_its_rounding():
    """``compute.dtype=bfloat16``: the ghost path's products run in bfloat16 (its per-example
    gradients are exact products of the bfloat16 activations and cotangents, the vmap path's are
    rounded to bfloat16 by the model's backward), so the two agree to bfloat16 rounding, not
    float32's; every contribution stays within C."""
    model = _tiny_mvit("v2").clone(dtype=jnp.bfloat16)
    x = jnp.zeros((1, 2, 8, 8, 3))
    params = _random_params(model, x, np.random.default_rng(5))
    result = ghost_equality.compare(model, params, {}, input_size=(2, 8, 8), examples=6,
                                    clips=2)
    for mode, r in result.items():
        assert r["counts_equal"], mode
        assert r["norm_rel"] <= 2e-2 and r["sum_rel"] <= 2e-2 and r["stats_rel"] <= 2e-2, r
        assert r["max_contribution"] <= C * (1 + 1e-6), (mode, r)
        assert r["clipped"] > 0 and r["unclipped"] > 0, (mode, r)


def test_the_bfloat16_ghost_pass_does_its_products_in_bfloat16():
    """Counted in the lowered program (benchmarks/program_flops.py): in bfloat16 compute the
    ghost pass's products are bfloat16 but for the head, whose logits stay float32."""
    model = _tiny_mvit("v2").clone(dtype=jnp.bfloat16)
    x = jnp.zeros((4, 2, 2, 8, 8, 3))
    params = _random_params(model, x[0], np.random.default_rng(5))

    def loss_fn(p, clips):
        return jnp.sum(model.apply({"params": p}, clips).astype(jnp.float32))

    lowered = jax.jit(lambda w: ghost.clipped_sum(
        loss_fn, params, x, w, l2_clip_norm=C, rules=run_model.ghost_rules())).lower(jnp.ones(4))
    counted = program_flops.count(lowered)
    head = 2 * 4 * 2 * 8 * 3 * 2  # forward and weight gradient of the head, per clip
    assert counted.flops[("f32", "f32")] <= 2 * head, counted.lines()
    assert counted.share("bf16") > 0.9, counted.lines()


def test_the_rounding_bound_covers_the_worst_rounding_and_is_within_two_of_it():
    """The dense rule's bound against the rounding ``ClipWeights.scaled`` does, in a worst case:
    a rank-one input and a factor that puts every scaled cotangent just below a bfloat16
    rounding midpoint, the errors adding up over the tokens. The error stays within the bound
    and reaches half of it (the bound uses eps, twice the unit roundoff), so a bound under half
    as large fails."""
    a = jnp.asarray([[[1.0] * 4, [-1.0] * 4]], jnp.bfloat16)  # [P=1, T=2, d_in=4], rank one
    g = jnp.asarray([[[1.0] * 8, [-1.0] * 8]], jnp.bfloat16)  # [P=1, T=2, d_out=8]
    factor = 1.0 + 2.0**-8 - 2.0**-20  # c g just below the midpoint between 1 and 1 + 2^-7
    clip = ghost.ClipWeights(factor=jnp.asarray([factor], jnp.float32), keep=jnp.asarray([True]))
    scaled = np.asarray(clip.scaled(g), np.float64)
    exact = factor * np.asarray(g, np.float64)
    a64 = np.asarray(a, np.float64)[0]
    error = np.linalg.norm(a64.T @ (scaled - exact)[0])
    aa = jnp.einsum("pti,psi->pts", a.astype(jnp.float32), a.astype(jnp.float32))
    bound = factor * float(np.sqrt(ghost_rules._rounding_bound(a, g, aa)[0]))
    assert error <= bound
    assert error >= 0.49 * bound, (error, bound)


def test_an_overflowing_bound_with_a_zero_cotangent_does_not_poison_the_sum():
    """Finite activations whose squared norm overflows, on a layer whose cotangent is 0: its
    rounding bound is 0 (no product to round), not inf × 0 = NaN, which would have made the
    clip factor, hence the whole batch's sum, NaN."""

    class Net(nn.Module):
        @nn.compact
        def __call__(self, example):
            small, huge = example
            out = nn.Dense(64, use_bias=False, name="small")(small)
            unused = nn.Dense(64, use_bias=False, name="huge")(huge)
            return 10.0 * jnp.sum(out) + 0.0 * jnp.sum(unused)

    net = Net()
    rng = np.random.default_rng(0)
    small = jnp.asarray(rng.normal(size=(2, 16, 64)), jnp.float32)
    huge = jnp.full((2, 16, 64), 1e18, jnp.float32)  # finite; its squared norm is not
    params = net.init(jax.random.key(0), (small[0], huge[0]))["params"]
    grads, norms, _, finite = ghost.clipped_sum(
        lambda p, ex: net.apply({"params": p}, ex), params, (small, huge), jnp.ones(2),
        l2_clip_norm=1.0, rules=run_model.ghost_rules())
    assert bool(jnp.all(finite)) and bool(jnp.all(jnp.isfinite(norms)))
    for leaf in jax.tree.leaves(grads):
        assert bool(jnp.all(jnp.isfinite(leaf)))
    assert float(jnp.linalg.norm(grads["small"]["kernel"])) > 0
