"""Ghost norms and book-keeping (maskdp_jax/ghost.py, models/ghost_rules.py): the private pass
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

from benchmarks import ghost_equality
from maskdp_jax import clipping, ghost
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
        sq_norms, clipped_sum = rule.per_example(static, a, g, names)
        return {k: v for k, v in sq_norms.items() if k != "bias"}, clipped_sum

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
