"""Fine-tuning strategies: trainable counts on mvit_v2_s (shapes only); adapters start as the
identity."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from maskdp_jax import models
from maskdp_jax.core import partition
from maskdp_jax.models import convert, finetune

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


def test_mvit_v1_b_counts_match_seed_003_table_2():
    """Luo et al. 2024, Table 2 (UCF-101, 101 classes, MViT-B 16x4): linear probe "77.7K", selective
    fine-tuning (every normalization layer and the last linear layer) "110K"."""
    model = models.get_model("mvit_v1_b", num_classes=101)
    params = jax.eval_shape(model.init, jax.random.key(0),
                            jnp.zeros((1, 16, 224, 224, 3)))["params"]
    head = 769 * 101
    blocks = models.PRESETS["mvit_v1_b"]["blocks"]
    # norm1 and norm2 over each block's input width (v1 widens after the MLP), 2 k/v pooling norms
    # per block and 3 q pooling norms, all over head_dim 96, and the final norm.
    norms = (sum(4 * b.dim_in for b in blocks) + (2 * 16 + 3) * 2 * 96 + 2 * 768)
    assert norms == 33_216
    assert _trainable(params, "linear") == head == 77_669
    assert _trainable(params, "norms") == norms + head == 110_885
    assert _trainable(params, "full") == finetune.count_params(params) == 36_610_672 - 769 * 299
    # Adapters (bottleneck width / 4 after every block) and the head: the table's "1.8M".
    model = models.get_model("mvit_v1_b", num_classes=101, adapters=True)
    params = jax.eval_shape(model.init, jax.random.key(0),
                            jnp.zeros((1, 16, 224, 224, 3)))["params"]
    assert _trainable(params, "adapters") == 1_818_917


def test_norms_trains_every_layer_norm_and_the_head(v2s):
    flat = traverse_util.flatten_dict(finetune.trainable_mask(v2s, strategy="norms"))
    trained = {p for p, t in flat.items() if t}
    assert trained == {p for p in flat if p[0] == "head" or any(
        q.startswith("norm") for q in p[:-1])}
    assert any(p[0] == "blocks_0" for p in trained)  # not only the last blocks (cf. selective)
    # The same set as the MaskDP paper's selective strategy over all 16 blocks.
    assert _trainable(v2s, "norms") == _trainable(v2s, "selective", num_last_blocks=16)


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


@pytest.mark.slow
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


def test_first_trainable_block_is_where_the_frozen_prefix_ends():
    """The feature cache's cut: selective k trains from block L - k, linear only after the last
    block, norms and adapters from block 0; full has no frozen prefix and is refused."""
    from maskdp_jax import models
    from maskdp_jax.models import finetune

    model = models.get_model("mvit_parity", num_classes=3)
    params = jax.eval_shape(model.init, jax.random.key(0),
                            jax.ShapeDtypeStruct((1, *model.input_size, 3), jnp.float32))["params"]
    depth = len(model.blocks)

    def cut(strategy, **kw):
        return finetune.first_trainable_block(finetune.trainable_mask(params, strategy=strategy,
                                                                      **kw))

    assert [cut("selective", num_last_blocks=k) for k in (0, 1, 2)] == [depth, depth - 1,
                                                                        depth - 2]
    assert cut("linear") == depth and cut("norms") == 0
    with pytest.raises(ValueError, match="parameter .* trains, so nothing before block 0"):
        cut("full")
