"""K400 transform = torchvision's ``VideoClassification`` (fixture made by torchvision)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from maskdp_jax.data import preprocess

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "k400_transform_torchvision.npz")
LEVEL = 1.0 / 255 / 0.225  # one uint8 step after normalisation


@pytest.fixture(scope="module")
def ref():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def test_defaults_are_the_mvit_v2_s_k400_preset(ref):
    assert (preprocess.K400_CROP, preprocess.K400_CROP) == tuple(ref["preset_crop_size"])
    assert (preprocess.K400_RESIZE,) == tuple(ref["preset_resize_size"])
    np.testing.assert_array_equal(preprocess.K400_MEAN, ref["preset_mean"])
    np.testing.assert_array_equal(preprocess.K400_STD, ref["preset_std"])


@pytest.mark.parametrize("case", ["down", "up"])
def test_float_video_matches_torchvision(ref, case):
    resize, crop = map(int, ref[f"{case}_sizes"])
    out = preprocess.k400_transform(ref[f"{case}_float_input"], resize_size=resize, crop_size=crop)
    expected = ref[f"{case}_float_output"]
    assert out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", ["down", "up"])
def test_uint8_video_matches_torchvision(ref, case):
    """Equal after rounding to uint8, except where the interpolated value is an exact .5 tie and
    float32 summation order picks the side (at most one level, rare)."""
    resize, crop = map(int, ref[f"{case}_sizes"])
    out = preprocess.k400_transform(ref[f"{case}_uint8_input"], resize_size=resize, crop_size=crop)
    diff = np.abs(out - ref[f"{case}_uint8_output"])
    assert diff.max() <= LEVEL + 1e-5
    assert np.mean(diff > 1e-5) <= 0.002


def test_sizes_and_errors():
    assert preprocess.resized_size(240, 320, 256) == (256, 341)
    assert preprocess.resized_size(320, 240, 256) == (341, 256)
    video = np.zeros((2, 240, 320, 3), np.uint8)
    assert preprocess.k400_transform(video).shape == (2, 224, 224, 3)
    with pytest.raises(ValueError, match="crop 300 is larger"):
        preprocess.k400_transform(video, crop_size=300)
    with pytest.raises(ValueError, match=r"\[T, H, W, C\]"):
        preprocess.k400_transform(video[0])
