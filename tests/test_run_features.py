"""Feature cache (data/feature_cache.py, run/features.py): a step from the cache equals the step
from the pixels of the same clips in every mode; the public view's features depend only on
public pixels; a cache made for something else is refused; a stopped build continues; bf16
halves the bytes; train.py trains from it."""

import dataclasses
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from maskdp_jax import models
from maskdp_jax.core import partition
from maskdp_jax.core.mechanism import Mechanism
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.core.train_step import LogicalBatchData, PixelViews, TrainState, make_train_step
from maskdp_jax.data import feature_cache, synthetic
from maskdp_jax.models import finetune
from maskdp_jax.run import features

sys.path.insert(0, os.path.dirname(__file__))
from malformed import tiny_config  # noqa: E402

GRID, K, N = 3, 2, 12


@pytest.fixture(scope="module")
def setup():
    train, _ = synthetic.make_splits(num_train=N, num_test=8, frames=16, clip_frames=8,
                                     size=32)
    model = models.get_model("mvit_test", num_classes=train.num_classes)
    params = jax.jit(model.init)(jax.random.key(0),
                                 np.zeros((1, *model.input_size, 3), np.float32))["params"]
    return train, model, params, Tokenizer(patch_stride=tuple(model.patch_stride))


def _config(mode, strategy="selective", **cache):
    config = tiny_config({"mode": mode, "model.finetune": strategy, "model.num_last_blocks": 1,
                          "feature_cache.enabled": True, "hidden_fill": "texture",
                          "feature_cache.clips_per_video": GRID,
                          "input.clips_per_video": K})
    for key, value in cache.items():
        config.feature_cache[key] = value
    return config


def _cache(setup, tmp_path, mode, strategy="selective", source=None, **cache):
    train, model, params, tokens = setup
    mask = finetune.trainable_mask(params, strategy=strategy, num_last_blocks=1)
    cache.setdefault("dir", str(tmp_path / f"{mode}-{strategy}"))
    config = _config(mode, strategy, **cache)
    ds, cut = features.open_or_build(config, train_ds=source or train, model=model,
                                     params=params, trainable_mask=mask, tokens=tokens,
                                     workdir=str(tmp_path))
    return ds, cut, mask


def _pixel_batch(train, indices, seed):
    """The same clips as the cache's batch, read from the pixels."""
    pos = feature_cache.grid_choice(seed, num_videos=len(indices), grid=GRID, num_clips=K)
    clips = train.get_batch(indices, num_clips=GRID, seed=None, normalize=False)
    rows = np.arange(len(indices))[:, None]
    return {"video": clips["video"][rows, pos], "mask": clips["mask"][rows, pos],
            "label": clips["label"]}


@pytest.mark.slow
@pytest.mark.parametrize("mode,strategy", [("maskdp", "selective"), ("dp", "selective"),
                                           ("nonprivate", "selective"), ("maskdp", "linear")])
def test_a_step_from_the_cache_equals_the_step_from_the_pixels(setup, tmp_path, mode,
                                                               strategy):
    train, model, params, tokens = setup
    cache, cut, mask = _cache(setup, tmp_path, mode, strategy)
    assert cut == (len(model.blocks) - 1 if strategy == "selective" else len(model.blocks))
    trainable, frozen = partition.split(params, mask)
    tx = optax.sgd(1.0)  # the update is the gradient (Adam would magnify float-level zeros)
    plan = PrivacyPlan(mode=mode, num_examples=N, batch_size=6, steps=1, l2_clip_norm=0.1,
                       noise_multiplier=0.0 if mode == "nonprivate" else 1.0, delta=1e-3)
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=7))
    state = TrainState.create(trainable=trainable, frozen=frozen, tx=tx, mechanism=mechanism)
    steps = {
        "pixels": make_train_step(
            apply_fn=lambda p, x: model.apply({"params": p}, x), tx=tx, mechanism=mechanism,
            views=PixelViews(tokens), pixel_norm=train.pixel_norm),
        "cache": make_train_step(
            apply_fn=lambda p, h: model.apply({"params": p}, h, start_block=cut), tx=tx,
            mechanism=mechanism, views=features.cached_views),
    }
    indices, seed, weight = np.array([3, 0, 7, 11, 5, 2]), [4, 1, 0, 0], np.ones(6, np.float32)
    weight[-1] = 0.0  # a padding row
    batches = {"pixels": _pixel_batch(train, indices, seed),
               "cache": cache.get_batch(indices, num_clips=K, seed=seed)}
    out = {}
    for name, batch in batches.items():
        batch = {**batch, "weight": weight}
        logical = LogicalBatchData(public=[batch] if plan.mode.has_public_pass else [],
                                   private=[batch] if plan.mode.has_private_pass else [])
        out[name] = steps[name](jax.tree.map(jnp.copy, state), logical)
    (got, got_metrics), (want, want_metrics) = out["cache"], out["pixels"]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6),
                 got.trainable, want.trainable)
    for key, value in want_metrics.items():
        np.testing.assert_allclose(got_metrics[key], value, rtol=2e-5, atol=1e-6, err_msg=key)
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: np.abs(a - b).max(), got.trainable,
                                         state.trainable))
    assert max(moved) > 0  # the step did something


def test_public_features_depend_only_on_public_pixels(setup, tmp_path):
    """The views are cut before the prefix: changing a video's private pixels leaves its
    public-view features bit-identical and changes its private-view features."""
    train = setup[0]
    other = dataclasses.replace(train, frames=train.frames.copy(), name="synthetic/changed")
    private = other.masks == 0
    other.frames[private] = 255 - other.frames[private]
    a, _, _ = _cache(setup, tmp_path / "a", "maskdp")
    b, _, _ = _cache(setup, tmp_path / "b", "maskdp", source=other)
    np.testing.assert_array_equal(a._arrays["public"], b._arrays["public"])
    np.testing.assert_array_equal(a._arrays["flags"], b._arrays["flags"])
    assert not np.allclose(a._arrays["private"], b._arrays["private"])


def test_a_cache_for_other_weights_or_settings_is_refused(setup, tmp_path):
    train, model, params, tokens = setup
    _cache(setup, tmp_path, "maskdp")
    changed = jax.tree.map(lambda x: x, params)
    changed["blocks_0"]["mlp"]["fc1"]["kernel"] = changed["blocks_0"]["mlp"]["fc1"]["kernel"] + 1
    mask = finetune.trainable_mask(changed, strategy="selective", num_last_blocks=1)
    config = _config("maskdp", dir=str(tmp_path / "maskdp-selective"))
    with pytest.raises(ValueError, match="feature cache in .* was made from other videos"):
        features.open_or_build(config, train_ds=train, model=model, params=changed,
                               trainable_mask=mask, tokens=tokens, workdir=str(tmp_path))
    # The head and the trainable norms are not part of it: they change every step.
    trained = jax.tree.map(lambda x: x, params)
    trained["head"]["kernel"] = trained["head"]["kernel"] + 1
    features.open_or_build(config, train_ds=train, model=model, params=trained,
                           trainable_mask=mask, tokens=tokens, workdir=str(tmp_path))
    with pytest.raises(ValueError, match="feature cache in .* was made from other videos"):
        _cache(setup, tmp_path, "maskdp", clips_per_video=GRID + 1,
               dir=str(tmp_path / "maskdp-selective"))


def test_a_stopped_build_continues_and_bf16_halves_the_bytes(setup, tmp_path, monkeypatch):
    train = setup[0]
    whole, _, _ = _cache(setup, tmp_path / "whole", "dp", batch_size=4)
    calls = []
    original = type(train).get_batch

    def dies_on_the_second_chunk(self, *args, **kw):
        calls.append(1)
        if len(calls) == 3:  # a shape probe, the first chunk, then the second
            raise KeyboardInterrupt
        return original(self, *args, **kw)

    monkeypatch.setattr(type(train), "get_batch", dies_on_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _cache(setup, tmp_path / "stopped", "dp", batch_size=4)
    monkeypatch.setattr(type(train), "get_batch", original)
    directory = tmp_path / "stopped" / "dp-selective"
    assert len(open(directory / "done.txt").read().split()) == 4
    resumed, _, _ = _cache(setup, tmp_path / "stopped", "dp", batch_size=4)
    np.testing.assert_array_equal(resumed._arrays["full"], whole._arrays["full"])
    half, _, _ = _cache(setup, tmp_path / "bf16", "dp", dtype="bfloat16")
    assert half.layout.bytes_per_clip() * 2 == whole.layout.bytes_per_clip()
    np.testing.assert_allclose(np.asarray(half._arrays["full"], np.float32),
                               whole._arrays["full"], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("overrides,match", [
    ({"model.finetune": "full"}, "model.finetune='full' trains every parameter"),
    ({"feature_cache.clips_per_video": 1}, "must be >= input.clips_per_video"),
    ({"input.clip_sampling": "consecutive"}, "the cache draws K of its G fixed clips"),
    ({"feature_cache.dtype": "float16"}, "feature_cache.dtype"),
])
def test_a_config_the_cache_cannot_serve_is_refused(overrides, match):
    from maskdp_jax.run import config as run_config

    config = _config("maskdp")
    for key, value in overrides.items():
        section, name = key.split(".")
        config[section][name] = value
    with pytest.raises(ValueError, match=match):
        run_config.check_config(config)


@pytest.mark.slow
def test_train_py_trains_from_the_cache_beside_the_checkpoints(tmp_path):
    from maskdp_jax import train

    config = _config("maskdp")
    config.privacy.randomness = "seeded"
    out = train.train_and_evaluate(config, str(tmp_path))
    cache = tmp_path / "private" / "feature_cache"
    assert (cache / "public.features").is_file() and (cache / "private.features").is_file()
    assert out["config"]["feature_cache"]["enabled"]
    assert np.isfinite(out["metrics"]["top1"])
