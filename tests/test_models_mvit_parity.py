"""Our Flax MViT with converted weights computes torchvision's MViT function (no torch needed).

References, written by ``tests/fixtures/make_mvit_fixture.py`` from torchvision's ``MViT`` class
with random weights and input, logits in float64: ``tests/fixtures/mvit_tiny_torchvision.npz``
(MViTv2-S mode, the ``mvit_parity`` block setting) and ``mvit_v1_tiny_torchvision.npz`` (MViTv1
mode, what ``mvit_v1_b`` builds, the ``mvit_v1_parity`` setting).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax import models
from maskdp_jax.models import convert

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
FIXTURE = os.path.join(FIXTURES, "mvit_tiny_torchvision.npz")


def relative_error(out, ref) -> float:
    """max |out - ref| / max |ref|."""
    return float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())


@pytest.fixture(scope="module")
def fixture():
    with np.load(FIXTURE) as f:
        arrays = {k: f[k] for k in f.files}
    state = {k.removeprefix("state."): v for k, v in arrays.items() if k.startswith("state.")}
    x = jnp.asarray(arrays["input"].transpose(0, 2, 3, 4, 1))  # [B, 3, T, H, W] -> [B, T, H, W, 3]
    return arrays, state, x


@pytest.fixture(scope="module")
def converted(fixture):
    arrays, state, x = fixture
    model = models.get_model("mvit_parity", num_classes=arrays["logits"].shape[-1])
    like = jax.eval_shape(model.init, jax.random.key(0), x[:1])["params"]  # shapes suffice
    params, info = convert.convert_state_dict(state, like=like)
    return model, params, info, jax.jit(lambda p, v: model.apply({"params": p}, v))


def test_fixture_setting_is_the_mvit_parity_preset(fixture):
    arrays, _, _ = fixture
    preset = models.PRESETS["mvit_parity"]
    ours = np.array([[b.num_heads, b.dim_in, b.dim_out, *b.stride_q, *b.stride_kv]
                     for b in preset["blocks"]])
    np.testing.assert_array_equal(arrays["blocks"], ours)
    np.testing.assert_array_equal(arrays["input_size"], preset["input_size"])
    assert all(b.kernel_q == b.kernel_kv == (3, 3, 3) for b in preset["blocks"])


@pytest.mark.slow
def test_logits_match_torchvision(fixture, converted):
    arrays, _, x = fixture
    _, params, info, apply = converted
    assert info == {"format": "torchvision", "head": "loaded", "kept_from_init": []}
    out = apply(params, x)
    assert out.dtype == jnp.float32
    assert relative_error(out, arrays["logits"]) <= 1e-4


@pytest.mark.parametrize("perturb", ["rel_pos_t", "pool_norm", "clip_layout"])
def test_parity_check_is_sensitive(fixture, converted, perturb):
    """The tolerance catches a wrong temporal table, a wrong pooling norm or a wrong token order.

    (Random perturbations: a constant shift of a table or of the k norm's bias moves every logit
    of a query equally, which softmax ignores.)
    """
    arrays, _, x = fixture
    _, params, _, apply = converted
    params = jax.tree.map(jnp.asarray, params)
    attn = {"rel_pos_t": params["blocks_2"]["attn"], "pool_norm": params["blocks_0"]["attn"]}
    if perturb == "rel_pos_t":
        table = attn["rel_pos_t"]["rel_pos_t"]
        attn["rel_pos_t"]["rel_pos_t"] = table + 0.05 * jax.random.normal(
            jax.random.key(1), table.shape)
    elif perturb == "pool_norm":
        norm = attn["pool_norm"]["pool_k"]["norm"]
        norm["scale"] = norm["scale"] * (1 + 0.05 * jax.random.normal(
            jax.random.key(2), norm["scale"].shape))
    else:
        x = x.transpose(0, 1, 3, 2, 4)  # H and W swapped
    assert relative_error(apply(params, x), arrays["logits"]) > 1e-3


# ----------------------------------------------------------------------------------------------
# MViTv1 (mvit_v1_b, Luo et al. 2024's MViT-B 16x4)
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def v1():
    with np.load(os.path.join(FIXTURES, "mvit_v1_tiny_torchvision.npz")) as f:
        arrays = {k: f[k] for k in f.files}
    state = {k.removeprefix("state."): v for k, v in arrays.items() if k.startswith("state.")}
    x = jnp.asarray(arrays["input"].transpose(0, 2, 3, 4, 1))
    model = models.get_model("mvit_v1_parity", num_classes=arrays["logits"].shape[-1])
    like = jax.eval_shape(model.init, jax.random.key(0), x[:1])["params"]
    params, info = convert.convert_state_dict(state, like=like)
    return arrays, x, params, info, jax.jit(lambda p, v: model.apply({"params": p}, v))


def test_v1_fixture_setting_is_the_mvit_v1_parity_preset(v1):
    arrays = v1[0]
    preset = models.PRESETS["mvit_v1_parity"]
    ours = np.array([[b.num_heads, b.dim_in, b.dim_out, *b.kernel_q, *b.kernel_kv, *b.stride_q,
                      *b.stride_kv] for b in preset["blocks"]])
    np.testing.assert_array_equal(arrays["blocks"], ours)
    np.testing.assert_array_equal(arrays["input_size"], preset["input_size"])
    assert preset["rel_pos_embed"] is preset["residual_pool"] is preset["proj_after_attn"] is False


@pytest.mark.slow
def test_v1_logits_match_torchvision(v1):
    arrays, x, params, info, apply = v1
    assert info == {"format": "torchvision", "head": "loaded", "kept_from_init": []}
    assert relative_error(apply(params, x), arrays["logits"]) <= 1e-4


@pytest.mark.parametrize("perturb", ["temporal_pos", "spatial_pos", "class_pos"])
def test_v1_parity_check_is_sensitive(v1, perturb):
    """A wrong temporal, spatial or class position table is caught by the tolerance."""
    arrays, x, params, _, apply = v1
    params = jax.tree.map(jnp.asarray, params)
    table = params[perturb]
    params[perturb] = table + 0.1 * jax.random.normal(jax.random.key(3), table.shape)
    assert relative_error(apply(params, x), arrays["logits"]) > 1e-3
