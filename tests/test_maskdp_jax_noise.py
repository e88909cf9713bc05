"""Gaussian noise: standard deviation sigma * C, fresh per key."""

import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax.core.noise import add_gaussian_noise


def test_empirical_std_within_one_percent():
    g = {"a": jnp.zeros((400_000,)), "b": {"c": jnp.zeros((100, 1000))}}
    for sigma, c in ((0.7, 1.0), (2.0, 0.25)):
        noisy = add_gaussian_noise(g, jax.random.key(3), noise_multiplier=sigma, l2_clip_norm=c)
        values = np.concatenate([np.ravel(v) for v in jax.tree.leaves(noisy)])
        assert abs(values.std() / (sigma * c) - 1) < 0.01
        assert abs(values.mean()) < 0.01 * sigma * c


def test_leaves_get_independent_noise_and_keys_matter():
    g = {"a": jnp.zeros((1000,)), "b": jnp.zeros((1000,))}
    n1 = add_gaussian_noise(g, jax.random.key(0), noise_multiplier=1.0, l2_clip_norm=1.0)
    n2 = add_gaussian_noise(g, jax.random.key(1), noise_multiplier=1.0, l2_clip_norm=1.0)
    assert abs(np.corrcoef(n1["a"], n1["b"])[0, 1]) < 0.1
    assert not np.allclose(n1["a"], n2["a"])


def test_noise_keeps_each_leafs_shape_and_dtype_and_the_draw_is_per_key():
    """One flat draw cut into the leaves: shapes and dtypes are the tree's; the same key gives
    the same noise (replicas agree), and a zero σ gives zeros."""
    g = {"w": jnp.zeros((3, 4), jnp.bfloat16), "b": jnp.zeros((5,)), "s": jnp.zeros(())}
    n1 = add_gaussian_noise(g, jax.random.key(0), noise_multiplier=1.0, l2_clip_norm=1.0)
    n2 = add_gaussian_noise(g, jax.random.key(0), noise_multiplier=1.0, l2_clip_norm=1.0)
    for name, x in g.items():
        assert n1[name].shape == x.shape and n1[name].dtype == x.dtype
        np.testing.assert_array_equal(np.asarray(n1[name], np.float32),
                                      np.asarray(n2[name], np.float32))
    assert float(jnp.abs(n1["b"]).sum()) > 0
    zero = add_gaussian_noise(g, jax.random.key(0), noise_multiplier=0.0, l2_clip_norm=1.0)
    assert all(float(jnp.abs(v.astype(jnp.float32)).sum()) == 0 for v in jax.tree.leaves(zero))
