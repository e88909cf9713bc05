"""Fine-tuning strategies: trainable counts on mvit_v2_s (shapes only); adapters start as the
identity."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

import models
from maskdp_jax import partition
from models import convert, finetune

CLASSES = 60
HEAD = 769 * CLASSES  # 768 features + bias per class


def _shapes(**overrides):
    model = models.get_model("mvit_v2_s", num_classes=CLASSES, **overrides)
    return jax.eval_shape(model.init, jax.random.key(0),
                          jnp.zeros((1, 16, 224, 224, 3)))["params"]


@pytest.fixture(scope="module")
def v2s():
    return _shapes()


def _trainable(params, strategy, **kw):
    mask = finetune.trainable_mask(params, strategy=strategy, **kw)
    return finetune.count_params(partition.split(params, mask)[0])


def test_mvit_v2_s_counts_per_strategy(v2s):
    assert finetune.count_params(v2s) == 34_537_744 - 769 * 400 + HEAD
    assert _trainable(v2s, "full") == finetune.count_params(v2s)
    # MaskDP paper: LayerNorms of blocks 14 (norm1 over 384, norm2 over 768, 3 pooling norms
    # over head_dim 96) and 15, the final norm, the head.
    norms = (2 * 384 + 2 * 768 + 3 * 2 * 96) + (2 * 768 + 2 * 768 + 3 * 2 * 96) + 2 * 768
    assert norms == 8_064
    assert _trainable(v2s, "selective", num_last_blocks=2) == norms + HEAD == 54_204
    assert _trainable(v2s, "selective", num_last_blocks=0) == 2 * 768 + HEAD
    assert _trainable(v2s, "linear") == HEAD


def test_mvit_v2_s_adapter_count():
    params = _shapes(adapters=True)
    widths = [b.dim_out for b in models.PRESETS["mvit_v2_s"]["blocks"]]
    adapters = sum(2 * d * (d // 4) + d // 4 + d for d in widths)  # down + up, with biases
    assert _trainable(params, "adapters") == adapters + HEAD
    flat = traverse_util.flatten_dict(finetune.trainable_mask(params, strategy="adapters"))
    assert all(train == ("adapter" in p or p[0] == "head") for p, train in flat.items())


def test_strategy_errors(v2s):
    with pytest.raises(ValueError, match="unknown fine-tuning strategy"):
        finetune.trainable_mask(v2s, strategy="lora")
    with pytest.raises(ValueError, match=r"num_last_blocks must be in \[0, 16\]"):
        finetune.trainable_mask(v2s, strategy="selective", num_last_blocks=17)
    with pytest.raises(ValueError, match="adapters=True"):
        finetune.trainable_mask(v2s, strategy="adapters")


def test_adapters_at_init_leave_the_output_unchanged():
    plain = models.get_model("mvit_test", num_classes=4)
    adapted = models.get_model("mvit_test", num_classes=4, adapters=True)
    x = jax.random.normal(jax.random.key(0), (2, 8, 32, 32, 3))
    rng = np.random.default_rng(0)
    shapes = jax.eval_shape(plain.init, jax.random.key(0), x[:1])["params"]
    base = jax.tree.map(lambda s: jnp.asarray(0.3 * rng.normal(size=s.shape), s.dtype), shapes)
    template = convert.import_template(adapted, input_shape=x.shape[1:], key=jax.random.key(1))
    adapters = {k: v["adapter"] for k, v in template.items()
                if isinstance(v, dict) and "adapter" in v}
    with_adapters = {**base, **{k: {**base[k], "adapter": a} for k, a in adapters.items()}}
    assert float(jnp.abs(with_adapters["blocks_0"]["adapter"]["down"]["kernel"]).sum()) > 0
    apply = jax.jit(lambda m, p: m.apply({"params": p}, x), static_argnums=0)
    expected = apply(plain, base)
    np.testing.assert_allclose(apply(adapted, with_adapters), expected, rtol=1e-6, atol=1e-6)
    # ... and they are live: a non-zero up-projection changes the output (random, since a
    # constant shift of every channel would vanish in the next LayerNorm).
    up = with_adapters["blocks_1"]["adapter"]["up"]
    kernel = up["kernel"] + 0.5 * jax.random.normal(jax.random.key(2), up["kernel"].shape)
    moved = {**with_adapters, "blocks_1": {**with_adapters["blocks_1"], "adapter": {
        **with_adapters["blocks_1"]["adapter"], "up": {**up, "kernel": kernel}}}}
    assert float(jnp.abs(apply(adapted, moved) - expected).max()) > 1e-3
