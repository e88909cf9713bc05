"""Converter: every checkpoint key consumed, every parameter assigned, clear errors, head
replacement, PySlowFast names, file formats, the orbax CLI and train.py's ``init_from``."""

from __future__ import annotations

import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from maskdp_jax import convert as convert_command
from maskdp_jax import models
from maskdp_jax.configs import default
from maskdp_jax.core import partition
from maskdp_jax.models import convert
from maskdp_jax.run import model as run_model

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
NUM_CLASSES = 5  # of the fixture's head


@pytest.fixture(scope="module")
def fixture():
    with np.load(os.path.join(FIXTURES, "mvit_tiny_torchvision.npz")) as f:
        arrays = {k: f[k] for k in f.files}
    state = {k.removeprefix("state."): v for k, v in arrays.items() if k.startswith("state.")}
    return state, arrays


@pytest.fixture(scope="module")
def like():
    model = models.get_model("mvit_parity", num_classes=NUM_CLASSES)
    return jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 8, 32, 32, 3)))["params"]


def _to_torch_layout(value, path):
    value = np.asarray(value)
    if path[-1] == "kernel" and value.ndim == 5:
        return value.transpose(4, 3, 0, 1, 2)
    if path[-1] == "kernel" and value.ndim == 2:
        return value.T
    return value


def test_round_trip_consumes_every_key_and_assigns_every_parameter(fixture, like):
    state, _ = fixture
    params, info = convert.convert_state_dict(state, like=like)
    flat = traverse_util.flatten_dict(params)
    assert set(flat) == set(traverse_util.flatten_dict(like))
    back = {convert.source_key(p, "torchvision"): _to_torch_layout(v, p) for p, v in flat.items()}
    assert set(back) == set(state)  # a bijection between checkpoint keys and parameters
    for key, value in state.items():
        np.testing.assert_array_equal(back[key], value, err_msg=key)
    assert info["kept_from_init"] == []


def test_unused_key_is_an_error_naming_it(fixture, like):
    state, _ = fixture
    bad = {**state, "blocks.0.attn.extra.weight": np.zeros(3, np.float32)}
    with pytest.raises(convert.ConversionError, match=r"not used.*blocks\.0\.attn\.extra\.weight"):
        convert.convert_state_dict(bad, like=like)


def test_missing_key_is_an_error_naming_key_and_parameter(fixture, like):
    state, _ = fixture
    bad = {k: v for k, v in state.items() if k != "blocks.3.attn.rel_pos_h"}
    with pytest.raises(convert.ConversionError,
                       match=r"missing checkpoint key 'blocks\.3\.attn\.rel_pos_h'.*blocks_3/attn/"
                             r"rel_pos_h \(7, 8\)"):
        convert.convert_state_dict(bad, like=like)


def test_wrong_shape_is_an_error_naming_key_and_shapes(fixture, like):
    state, _ = fixture
    bad = {**state, "blocks.1.mlp.0.weight": state["blocks.1.mlp.0.weight"][:-1]}
    with pytest.raises(convert.ConversionError) as e:
        convert.convert_state_dict(bad, like=like)
    assert re.search(r"'blocks\.1\.mlp\.0\.weight' has shape \(63, 16\) \(-> \(16, 63\) in Flax "
                     r"layout\) but parameter blocks_1/mlp/fc1/kernel expects \(16, 64\)",
                     str(e.value))


def test_unknown_format_is_an_error():
    with pytest.raises(convert.ConversionError, match="cannot tell the checkpoint format"):
        convert.detect_format({"features.0.weight": np.zeros(1)})


def test_head_is_replaced_for_a_new_number_of_classes(fixture):
    state, _ = fixture
    model = models.get_model("mvit_parity", num_classes=7)
    like = convert.import_template(model, input_shape=(8, 32, 32, 3), key=jax.random.key(1))
    params, info = convert.convert_state_dict(state, like=like)
    assert info["head"] == "replaced"
    assert sorted(info["kept_from_init"]) == ["head/bias", "head/kernel"]
    assert params["head"]["kernel"].shape == (32, 7)
    np.testing.assert_array_equal(params["head"]["kernel"], like["head"]["kernel"])
    assert float(jnp.std(params["head"]["kernel"])) > 0  # a real (fresh) init, not zeros
    np.testing.assert_array_equal(params["norm"]["scale"], state["norm.weight"])


def test_head_of_a_different_width_is_not_silently_replaced(fixture, like):
    state, _ = fixture
    bad = {**state, "head.1.weight": np.zeros((NUM_CLASSES, 31), np.float32)}
    with pytest.raises(convert.ConversionError, match=r"'head\.1\.weight' has shape \(5, 31\)"):
        convert.convert_state_dict(bad, like=like)


# torchvision -> PySlowFast names, written from PySlowFast's MViT (video_model_builder.py,
# attention.py, head_helper.TransformerBasicHead, stem_helper.PatchEmbed, common.Mlp).
_SLOWFAST_NAMES = [
    (r"^conv_proj\.", "patch_embed.proj."),
    (r"^pos_encoding\.class_token$", "cls_token"),
    (r"\.attn\.project\.0\.", ".attn.proj."),
    (r"\.attn\.pool_([qkv])\.pool\.weight$", r".attn.pool_\1.weight"),
    (r"\.attn\.pool_([qkv])\.norm_act\.0\.", r".attn.norm_\1."),
    (r"\.mlp\.0\.", ".mlp.fc1."),
    (r"\.mlp\.3\.", ".mlp.fc2."),
    (r"^(blocks\.\d+)\.project\.", r"\1.proj."),
    (r"^head\.1\.", "head.projection."),
]


def _slowfast_state(state, *, separate_qkv=False):
    out = {}
    for key, value in state.items():
        for pattern, repl in _SLOWFAST_NAMES:
            key = re.sub(pattern, repl, key)
        if key == "cls_token":
            value = value.reshape(1, 1, -1)
        if separate_qkv and ".attn.qkv." in key:
            for name, part in zip("qkv", np.split(value, 3, axis=0), strict=True):
                out[key.replace(".attn.qkv.", f".attn.{name}.")] = part
            continue
        out[f"module.{key}" if separate_qkv else key] = value
    return out


@pytest.mark.parametrize("separate_qkv", [False, True])
def test_pyslowfast_names_give_the_same_parameters(fixture, like, tmp_path, separate_qkv):
    state, _ = fixture
    expected, _ = convert.convert_state_dict(state, like=like)
    path = str(tmp_path / "slowfast.npz")
    np.savez(path, **_slowfast_state(state, separate_qkv=separate_qkv))
    sf_state = convert.load_state_dict(path)  # also strips the DDP "module." prefix
    assert convert.detect_format(sf_state) == "pyslowfast"
    params, info = convert.convert_state_dict(sf_state, like=like)
    assert info["format"] == "pyslowfast"
    jax.tree.map(np.testing.assert_array_equal, params, expected)


def test_file_formats(fixture, tmp_path, monkeypatch):
    from safetensors.numpy import save_file

    state, _ = fixture
    save_file(state, str(tmp_path / "w.safetensors"))
    np.savez(tmp_path / "w.npz", **state)
    for name in ("w.safetensors", "w.npz"):
        loaded = convert.load_state_dict(str(tmp_path / name))
        assert set(loaded) == set(state)
        for k in state:
            np.testing.assert_array_equal(loaded[k], state[k])
    (tmp_path / "w.pth").write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    with pytest.raises(ImportError, match=r"pip install torch.*safetensors"):
        convert.load_state_dict(str(tmp_path / "w.pth"))
    (tmp_path / "w.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"unsupported checkpoint file .*w\.bin"):
        convert.load_state_dict(str(tmp_path / "w.bin"))
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        convert.load_state_dict(str(tmp_path / "nope.npz"))


def _convert_full_size(preset: str, num_params: int):
    """Shapes only (jax.eval_shape; zero-stride arrays): torchvision's full state dict of
    ``preset`` (the committed ``{key: shape}`` fixture) maps one-to-one onto our preset."""
    with open(os.path.join(FIXTURES, f"{preset}_torchvision_shapes.json")) as f:
        shapes = json.load(f)
    state = {k: np.broadcast_to(np.float32(0), s) for k, s in shapes.items()}
    model = models.get_model(preset, num_classes=400)
    like = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 16, 224, 224, 3)))["params"]
    params, info = convert.convert_state_dict(state, like=like)
    assert info["head"] == "loaded"
    assert models.finetune.count_params(params) == num_params == sum(
        int(np.prod(s)) for s in shapes.values())
    return model, like, params


@pytest.mark.slow
def test_mvit_v2_s_takes_every_torchvision_key():
    model, like, params = _convert_full_size("mvit_v2_s", 34_537_744)
    out = jax.eval_shape(model.apply, {"params": like}, jnp.zeros((2, 16, 224, 224, 3)))
    assert out.shape == (2, 400)
    assert params["blocks_0"]["attn"]["rel_pos_h"].shape == (111, 96)
    assert params["blocks_14"]["attn"]["pool_q"]["conv"]["kernel"].shape == (3, 3, 3, 1, 96)


def test_mvit_v1_b_takes_every_torchvision_key():
    """Luo et al. 2024's network, MViT-B 16x4; no q pooling outside the strided blocks."""
    _, _, params = _convert_full_size("mvit_v1_b", 36_610_672)
    assert params["spatial_pos"].shape == (56 * 56, 96) and params["temporal_pos"].shape == (8, 96)
    assert {i for i in range(16) if "pool_q" in params[f"blocks_{i}"]["attn"]} == {1, 3, 14}
    assert params["blocks_13"]["project"]["kernel"].shape == (384, 768)


# ----------------------------------------------------------------------------------------------
# CLI -> orbax -> train.py
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoints(fixture, tmp_path_factory):
    """Orbax checkpoints written by the CLI from a state-dict-only .npz: 5 classes and 3 classes."""
    state, _ = fixture
    root = tmp_path_factory.mktemp("convert")
    src = str(root / "tv.npz")
    np.savez(src, **state)
    out = {"src": src}
    for classes in (NUM_CLASSES, 3):
        out[classes] = str(root / f"ckpt_{classes}")
        assert convert_command.cli(["prog", "--src", src, "--dst", out[classes],
                                    "--num_classes", str(classes), "--preset", "mvit_parity"]) == 0
    return out


def test_cli_checkpoint_restores_the_converted_parameters(fixture, checkpoints, like,
                                                           capsys):
    """What the CLI wrote is what the converter produces (whose logits test_models_mvit_parity
    checks)."""
    state, _ = fixture
    expected, _ = convert.convert_state_dict(state, like=like)
    model = models.get_model("mvit_parity", num_classes=NUM_CLASSES)
    template = convert.import_template(model, input_shape=(8, 32, 32, 3), key=jax.random.key(0))
    params = convert.restore_params(checkpoints[NUM_CLASSES], like=template)
    jax.tree.map(np.testing.assert_array_equal, params, expected)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    assert convert_command.cli(["prog", "--src", checkpoints["src"], "--dst",
                                checkpoints[NUM_CLASSES], "--num_classes", "5",
                                "--preset", "mvit_parity"]) == 2
    assert "choose a new --dst" in capsys.readouterr().err


def test_restore_from_a_checkpoint_file_converts_on_the_fly(fixture, checkpoints):
    state, _ = fixture
    model = models.get_model("mvit_parity", num_classes=3)
    like = convert.import_template(model, input_shape=(8, 32, 32, 3), key=jax.random.key(2))
    params = convert.restore_params(checkpoints["src"], like=like)
    np.testing.assert_array_equal(params["head"]["kernel"], like["head"]["kernel"])  # replaced
    np.testing.assert_array_equal(params["blocks_1"]["project"]["kernel"],
                                  state["blocks.1.project.weight"].T)


def test_restore_with_other_classes_is_an_error_with_a_hint(checkpoints, like):
    init = like
    with pytest.raises(convert.ConversionError, match=r"head/kernel: checkpoint \(32, 3\), model "
                                                      r"\(32, 5\).*--num_classes"):
        convert.restore_params(checkpoints[3], like=init)
    with pytest.raises(FileNotFoundError, match="maskdp_jax.convert"):
        convert.restore_params("/nonexistent/ckpt", like=init)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["selective", "adapters"])
def test_run_model_starts_from_the_checkpoint(fixture, checkpoints, strategy):
    """model.init_from (run.model.build, train.py's and the audits' model): the restored
    weights, split by the strategy; adapters keep their identity init."""
    state, _ = fixture
    config = default.get_config()
    config.model.name = "mvit_parity"
    config.model.finetune = strategy
    config.model.init_from = checkpoints[3]
    built = run_model.build(config.model, num_classes=3, seed=0)
    trainable, frozen = built.trainable, built.frozen
    params = partition.merge(trainable, frozen)
    np.testing.assert_array_equal(params["blocks_4"]["norm2"]["scale"],
                                  state["blocks.4.norm2.weight"])
    np.testing.assert_array_equal(params["blocks_2"]["attn"]["qkv"]["kernel"],
                                  state["blocks.2.attn.qkv.weight"].T)
    assert "head" in trainable and "patch_embed" in frozen
    if strategy == "adapters":
        assert not np.any(np.asarray(params["blocks_0"]["adapter"]["up"]["kernel"]))
