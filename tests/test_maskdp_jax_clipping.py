"""Per-example clipping: norm bound, padding, non-finite examples."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from maskdp_jax.core.clipping import clipped_grad_sum


def _loss(w, example):
    x, y = example
    return jnp.sum((x @ w["a"] + w["b"] - y) ** 2)


def _params():
    return {"a": jnp.ones((5, 3)), "b": jnp.zeros(3)}


def _per_example_clipped(examples, weights, c):
    """Each example alone through clipped_grad_sum: its own clipped gradient times its weight."""
    out = []
    for i in range(len(weights)):
        one = jax.tree.map(lambda v, i=i: v[i : i + 1], examples)
        g, _ = clipped_grad_sum(_loss, _params(), one, weights[i : i + 1], l2_clip_norm=c)
        out.append(g)
    return out


def test_every_clipped_gradient_has_norm_at_most_c():
    rng = np.random.default_rng(0)
    scale = np.geomspace(1e-3, 1e2, 16)[:, None].astype(np.float32)
    x = rng.normal(size=(16, 5)).astype(np.float32) * scale
    y = rng.normal(size=(16, 3)).astype(np.float32) * scale
    for c in (0.1, 1.0, 7.5):
        for g in _per_example_clipped((x, y), np.ones(16, np.float32), c):
            assert float(optax.tree.norm(g)) <= c * (1 + 1e-6)
        _, stats = clipped_grad_sum(_loss, _params(), (x, y), jnp.ones(16), l2_clip_norm=c)
        assert 0 < int(stats.num_clipped) < 16  # both regimes are exercised


def test_small_gradients_pass_unchanged_and_sum_is_weighted():
    x = np.full((3, 5), 1e-3, np.float32)
    y = np.zeros((3, 3), np.float32)
    g_sum, _ = clipped_grad_sum(_loss, _params(), (x, y), jnp.array([1.0, 1.0, 0.0]),
                                l2_clip_norm=1e6)
    raw = jax.grad(_loss)(_params(), (x[0], y[0]))
    jax.tree.map(lambda s, r: np.testing.assert_allclose(s, 2 * r, rtol=1e-6), g_sum, raw)


def test_padding_contributes_exactly_zero():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 5)).astype(np.float32)
    y = rng.normal(size=(6, 3)).astype(np.float32)
    w = np.array([1, 1, 1, 0, 0, 0], np.float32)
    full, stats = clipped_grad_sum(_loss, _params(), (x, y), w, l2_clip_norm=1.0)
    real, _ = clipped_grad_sum(
        _loss, _params(), (x[:3], y[:3]), jnp.ones(3), l2_clip_norm=1.0
    )
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)),
                 full, real)
    assert int(stats.count) == 3


def test_nonfinite_example_is_zeroed_and_counted_others_unaffected():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 5)).astype(np.float32)
    y = rng.normal(size=(4, 3)).astype(np.float32)
    bad_x = x.copy()
    bad_x[1, 0] = np.nan
    bad_x[2, 3] = np.inf
    g_bad, stats = clipped_grad_sum(_loss, _params(), (bad_x, y), jnp.ones(4), l2_clip_norm=1.0)
    keep = np.array([0, 3])
    g_ok, _ = clipped_grad_sum(_loss, _params(), (x[keep], y[keep]), jnp.ones(2),
                               l2_clip_norm=1.0)
    assert int(stats.num_nonfinite) == 2
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), g_bad, g_ok)
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(g_bad))


def test_a_norm_beyond_float32_range_is_zeroed_and_counted_like_a_nonfinite_gradient():
    """Every element of example 1's gradient is finite (~1e21) but its squared norm overflows
    float32: the example contributes exactly zero, is counted with the non-finite ones, and
    leaves the norm sum finite."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 5)).astype(np.float32)
    y = rng.normal(size=(3, 3)).astype(np.float32)
    big = x.copy()
    big[1] = 1e10
    raw = jax.grad(_loss)(_params(), (big[1], y[1]))
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(raw))
    assert not np.isfinite(float(optax.tree.norm(raw)))
    g_big, stats = clipped_grad_sum(_loss, _params(), (big, y), jnp.ones(3), l2_clip_norm=1.0)
    keep = np.array([0, 2])
    g_ok, ok_stats = clipped_grad_sum(_loss, _params(), (x[keep], y[keep]), jnp.ones(2),
                                      l2_clip_norm=1.0)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), g_big, g_ok)
    assert int(stats.num_nonfinite) == 1 and int(stats.count) == 3
    assert int(stats.num_clipped) == int(ok_stats.num_clipped)
    np.testing.assert_allclose(stats.norm_sum, ok_stats.norm_sum, rtol=1e-6)



def test_a_nonfinite_loss_with_a_finite_gradient_is_zeroed_and_counted():
    """The loss is checked as well as the norm: example 1's loss is -inf through a term with no
    gradient (log 0 behind stop_gradient), its gradient finite. It contributes exactly zero, is
    counted as non-finite, and leaves the loss sum finite."""

    def loss(w, example):
        x, y = example
        return _loss(w, (x, y)) + jax.lax.stop_gradient(jnp.log(jnp.abs(x[0])))

    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 5)).astype(np.float32) + 3.0
    y = rng.normal(size=(3, 3)).astype(np.float32)
    x[1, 0] = 0.0
    assert not np.isfinite(float(loss(_params(), (x[1], y[1]))))
    raw = jax.grad(loss)(_params(), (x[1], y[1]))
    assert np.isfinite(float(optax.tree.norm(raw)))
    g_bad, stats = clipped_grad_sum(loss, _params(), (x, y), jnp.ones(3), l2_clip_norm=1.0)
    keep = np.array([0, 2])
    g_ok, ok_stats = clipped_grad_sum(loss, _params(), (x[keep], y[keep]), jnp.ones(2),
                                      l2_clip_norm=1.0)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), g_bad, g_ok)
    assert int(stats.num_nonfinite) == 1 and int(stats.count) == 3
    np.testing.assert_allclose(stats.loss_sum, ok_stats.loss_sum, rtol=1e-6)

def _mixed_batch(size):
    """Examples across four decades of gradient norm, some padding, one non-finite example."""
    rng = np.random.default_rng(3)
    scale = np.geomspace(1e-2, 1e2, size)[:, None].astype(np.float32)
    x = rng.normal(size=(size, 5)).astype(np.float32) * scale
    y = rng.normal(size=(size, 3)).astype(np.float32) * scale
    x[5, 2] = np.nan
    w = np.ones(size, np.float32)
    w[[2, 9, 10]] = 0.0
    return (x, y), w


def test_microbatching_gives_the_same_sum_and_stats():
    examples, w = _mixed_batch(12)
    whole, whole_stats = clipped_grad_sum(_loss, _params(), examples, w, l2_clip_norm=1.0)
    for m in (1, 3, 4, 12):
        chunked, stats = jax.jit(
            lambda e, w, m=m: clipped_grad_sum(_loss, _params(), e, w, l2_clip_norm=1.0,
                                               microbatch_size=m)
        )(examples, w)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6),
                     chunked, whole)
        assert [int(s) for s in stats[:2]] == [int(s) for s in whole_stats[:2]] == [1, 5]
        assert int(stats.count) == int(whole_stats.count) == 9
        np.testing.assert_allclose(stats.norm_sum, whole_stats.norm_sum, rtol=1e-6)
        np.testing.assert_allclose(stats.loss_sum, whole_stats.loss_sum, rtol=1e-6)


def test_microbatching_bounds_the_per_example_gradient_memory():
    """Per-example gradients of a 4096-parameter model: 64 of them take 1 MiB; with chunks of 4,
    the compiled program's temporary buffers stay far below that."""
    params = {"a": jnp.ones((512, 8)), "b": jnp.zeros(8)}
    rng = np.random.default_rng(4)
    examples = (rng.normal(size=(64, 512)).astype(np.float32),
                rng.normal(size=(64, 8)).astype(np.float32))

    def temp_bytes(m):
        fn = jax.jit(lambda p, e, w: clipped_grad_sum(_loss, p, e, w, l2_clip_norm=1.0,
                                                      microbatch_size=m))
        compiled = fn.lower(params, examples, jnp.ones(64)).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    whole, chunked = temp_bytes(None), temp_bytes(4)
    assert whole >= 64 * 4104 * 4
    assert chunked < whole / 8


def test_microbatch_size_must_divide_the_batch():
    examples, w = _mixed_batch(12)
    for m in (0, 5, 24):
        with pytest.raises(ValueError, match="positive divisor of the physical batch size 12"):
            clipped_grad_sum(_loss, _params(), examples, w, l2_clip_norm=1.0, microbatch_size=m)


@pytest.mark.parametrize("c,error", [(0.0, ValueError), (-1.0, ValueError),
                                     (float("nan"), ValueError), (True, TypeError)])
def test_a_clip_norm_that_bounds_nothing_is_refused_as_the_plan_refuses_it(c, error):
    """The clipping function checks C with the plan's one rule (accounting.inputs)."""
    from maskdp_jax.core.plan import PrivacyPlan

    def loss(w, x):
        return jnp.sum(w * x)

    with pytest.raises(error, match=r"l2_clip_norm \(C\) must be"):
        clipped_grad_sum(loss, jnp.zeros(2), jnp.ones((3, 2)), jnp.ones(3), l2_clip_norm=c)
    with pytest.raises(error, match=r"l2_clip_norm \(C\) must be"):
        PrivacyPlan(mode="dp", num_examples=100, batch_size=10, steps=1, l2_clip_norm=c,
                    noise_multiplier=1.0, delta=1e-3)
