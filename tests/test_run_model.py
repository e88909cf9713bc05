"""run.model: the one model factory of train.py, the audits and the benchmarks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax import models
from maskdp_jax.configs import (
    audit_canaries,
    audit_canaries_default,
    audit_coupled,
    audit_feature_masking,
    audit_synthetic,
    default,
)
from maskdp_jax.run import model as run_model


def _model_config(**overrides):
    config = default.model()
    config.update({"name": "mvit_test", **overrides})
    return config


@pytest.fixture(scope="module")
def selective():
    return run_model.build(_model_config(finetune="selective", num_last_blocks=1),
                           num_classes=3, seed=0)


def test_initial_values_are_a_function_of_the_public_seed(selective):
    again = run_model.build(_model_config(finetune="selective", num_last_blocks=1),
                            num_classes=3, seed=0)
    other = run_model.build(_model_config(finetune="selective", num_last_blocks=1),
                            num_classes=3, seed=1)
    jax.tree.map(np.testing.assert_array_equal, selective.params, again.params)
    assert not np.array_equal(selective.params["head"]["kernel"], other.params["head"]["kernel"])


def test_the_split_follows_the_strategy_and_num_last_blocks(selective):
    expected = models.finetune.trainable_mask(selective.params, strategy="selective",
                                              num_last_blocks=1)
    assert jax.tree.all(jax.tree.map(lambda a, b: a == b, selective.trainable_mask, expected))
    two = run_model.build(_model_config(finetune="selective", num_last_blocks=2),
                          num_classes=3, seed=0)
    assert two.counts()["total"] == selective.counts()["total"]
    assert two.counts()["trainable"] > selective.counts()["trainable"] > 0
    assert "head" in selective.trainable and "patch_embed" in selective.frozen


def test_apply_and_the_suffix_agree(selective):
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, *selective.input_shape)),
                    jnp.float32)
    logits = jax.jit(selective.apply_fn)(selective.params, x)
    assert logits.shape == (2, 3) and selective.input_shape == (8, 32, 32, 3)
    cut = models.finetune.first_trainable_block(selective.trainable_mask)
    prefix = jax.jit(lambda p, x: selective.module.apply({"params": p}, x, stop_block=cut))
    suffix = jax.jit(selective.apply_from(cut))
    np.testing.assert_allclose(suffix(selective.params, prefix(selective.params, x)), logits,
                               rtol=1e-5, atol=1e-5)


def _compute(**overrides):
    config = default.compute()
    config.update(overrides)
    return config


def test_compute_dtype_given_params_and_bad_input():
    bf16 = run_model.build(_model_config(), num_classes=3, seed=0,
                           compute=_compute(dtype="bfloat16"))
    assert bf16.module.dtype == jnp.bfloat16
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(bf16.params))
    given = jax.tree.map(lambda x: x + 1.0, bf16.params)
    built = run_model.build(_model_config(), num_classes=3, seed=0, params=given)
    jax.tree.map(np.testing.assert_array_equal, built.params, given)
    with pytest.raises(ValueError, match="compute.dtype"):
        run_model.build(_model_config(), num_classes=3, seed=0, compute=_compute(dtype="float16"))
    # the default, "auto": float32 on this CPU (so CPU results do not change), bfloat16 on
    # accelerators; parameters float32 either way
    assert default.compute().dtype == "auto"
    assert built.module.dtype == jnp.float32
    assert [run_model.compute_dtype_name("auto", b) for b in ("cpu", "gpu", "tpu")] == [
        "float32", "bfloat16", "bfloat16"]
    assert run_model.compute_dtype_name("float32", "gpu") == "float32"
    with pytest.raises(ValueError, match="compute.dtype must be one of"):
        run_model.compute_dtype_name("half")
    with pytest.raises(ValueError, match="unknown model"):
        run_model.input_shape("mvit_nope")


@pytest.mark.parametrize("module", [audit_synthetic, audit_canaries, audit_canaries_default,
                                    audit_coupled, audit_feature_masking])
def test_audits_configure_the_model_a_user_trains(module):
    """Every audit's model section has the training schema's keys, so run.model.build reads
    init_from and num_last_blocks there as in training."""
    assert set(module.get_config().model) == set(default.model())


def test_per_example_picks_the_ghost_rules_as_measured():
    """compute.per_example: vmap -> None; ghost -> the rules of every trainable layer kind; auto
    -> ghost only for full fine-tuning of the papers' models (run/model.py AUTO_GHOST)."""
    compute = default.get_config().compute
    assert compute.per_example == "auto"

    def rules(per_example, name, finetune):
        compute.per_example = per_example
        return run_model.per_example_rules(compute, _model_config(name=name, finetune=finetune))

    assert rules("vmap", "mvit_v2_s", "full") is None
    ghost = rules("ghost", "mvit_test", "selective")
    assert {cls.__name__ for cls, _ in ghost} >= {"Dense", "LayerNorm", "QKV", "PatchEmbed",
                                                  "DepthwiseConv3d", "MultiscaleAttention", "MViT"}
    assert rules("auto", "mvit_v2_s", "full") is not None
    assert rules("auto", "mvit_v1_b", "full") is not None
    assert rules("auto", "mvit_v2_s", "selective") is None
    assert rules("auto", "mvit_cpu", "full") is None
    with pytest.raises(ValueError, match=r"compute.per_example must be one of"):
        rules("hooks", "mvit_test", "full")
