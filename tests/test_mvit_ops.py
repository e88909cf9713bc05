"""Hand-written MViT ops (written for speed) must equal the library op they replace."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models.mvit import DepthwiseConv3d


@pytest.mark.parametrize(
    "shape, kernel, stride",
    [
        ((3, 4, 8, 8, 16), (3, 3, 3), (1, 2, 2)),   # q pooling at a stage transition
        ((2, 5, 7, 9, 8), (3, 3, 3), (1, 1, 1)),    # odd sizes, no stride
        ((2, 8, 14, 14, 8), (3, 3, 3), (1, 8, 8)),  # mvit_v2_s first-stage kv pooling
        ((2, 4, 8, 8, 4), (1, 3, 3), (1, 4, 4)),    # kernel 1 along t
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
    np.testing.assert_allclose(ours.apply(params, x), reference.apply(params, x),
                               rtol=1e-5, atol=1e-5)

    def grads(module):
        return jax.grad(lambda p: jnp.sum(jnp.sin(module.apply(p, x))))(params)

    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                 grads(ours), grads(reference))
