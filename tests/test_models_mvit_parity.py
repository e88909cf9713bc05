"""Our Flax MViTv2 with converted weights computes torchvision's MViT function (no torch needed).

Reference: ``tests/fixtures/mvit_tiny_torchvision.npz``, written by
``tests/fixtures/make_mvit_fixture.py`` from torchvision's ``MViT`` class in MViTv2-S mode with the
``mvit_parity`` block setting, random weights and input, logits in float64.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models import convert

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "mvit_tiny_torchvision.npz")


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
