"""Kinetics-400 evaluation transform of torchvision's video classifiers, in NumPy, channels-last.

``MViT_V2_S_Weights.KINETICS400_V1.transforms()`` is torchvision's ``VideoClassification`` with
``resize_size=(256,)``, ``crop_size=(224, 224)``, mean 0.45 and std 0.225 per channel. It resizes
the short side to 256 (bilinear, ``align_corners=False``, no antialias; uint8 frames are rounded
back to uint8 after resizing), takes the centre 224x224 crop, scales uint8 to [0, 1] and
normalises. :func:`k400_transform` reproduces it operation by operation in float32 (tested against
torchvision's output in ``tests/fixtures/k400_transform_torchvision.npz``), so the imported
Kinetics-400 weights see the inputs they were trained on.

Privacy: a deterministic per-frame function of one video; it mixes no data across examples.
"""

from __future__ import annotations

import numpy as np

K400_RESIZE = 256
K400_CROP = 224
K400_MEAN = (0.45, 0.45, 0.45)
K400_STD = (0.225, 0.225, 0.225)


def resized_size(height: int, width: int, short_side: int) -> tuple[int, int]:
    """``(H', W')`` with the short side at ``short_side`` and the long side truncated, as
    torchvision's ``resize(size=[short_side])``."""
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(short_side * long / short)
    return (new_long, short_side) if width <= height else (short_side, new_long)


def _linear_taps(in_size: int, out_size: int):
    """Source indices and weights of bilinear resizing along one axis (half-pixel centres,
    ``align_corners=False``), computed in float32 like PyTorch's CPU kernel."""
    scale = np.float32(in_size) / np.float32(out_size)
    src = scale * (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5)
    src = np.maximum(src, np.float32(0.0))
    i0 = src.astype(np.int64)  # floor, src >= 0
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = np.clip(src - i0.astype(np.float32), 0.0, 1.0).astype(np.float32)
    return i0, i1, (np.float32(1.0) - w1), w1


def k400_transform(
    video: np.ndarray,
    *,
    resize_size: int = K400_RESIZE,
    crop_size: int = K400_CROP,
    mean: tuple[float, ...] = K400_MEAN,
    std: tuple[float, ...] = K400_STD,
) -> np.ndarray:
    """torchvision's ``VideoClassification`` transform on a channels-last clip.

    Args:
      video: ``[T, H, W, C]`` uint8 (0..255), or float in [0, 1].
      resize_size: target of the short side.
      crop_size: side of the centre crop (at most the resized short side).
      mean, std: per-channel normalisation, applied after scaling to [0, 1].

    Returns:
      ``[T, crop_size, crop_size, C]`` float32.
    """
    video = np.asarray(video)
    if video.ndim != 4:
        raise ValueError(f"video must be [T, H, W, C]; got shape {video.shape}.")
    is_uint8 = video.dtype == np.uint8
    if not (is_uint8 or np.issubdtype(video.dtype, np.floating)):
        raise ValueError(f"video must be uint8 (0..255) or float in [0, 1]; got {video.dtype}. "
                         "Convert the frames to one of them before the transform.")
    _, h, w, _ = video.shape
    new_h, new_w = resized_size(h, w, resize_size)
    if crop_size > min(new_h, new_w):
        raise ValueError(f"crop {crop_size} is larger than the resized frame {(new_h, new_w)}.")
    top = int(round((new_h - crop_size) / 2.0))  # Python round (half to even), as torchvision
    left = int(round((new_w - crop_size) / 2.0))
    h0, h1, lh0, lh1 = (a[top:top + crop_size] for a in _linear_taps(h, new_h))
    w0, w1, lw0, lw1 = (a[left:left + crop_size] for a in _linear_taps(w, new_w))

    x = video.astype(np.float32)
    lw0, lw1 = lw0[:, None], lw1[:, None]
    # Interpolate along W within the two source rows, then combine the rows (PyTorch's order).
    rows = [x[:, hi] for hi in (h0, h1)]
    t0, t1 = (r[:, :, w0] * lw0 + r[:, :, w1] * lw1 for r in rows)
    out = t0 * lh0[:, None, None] + t1 * lh1[:, None, None]
    if is_uint8:
        out = np.clip(np.round(out), 0, 255) / np.float32(255.0)
    mean = np.asarray(mean, np.float32)
    std = np.asarray(std, np.float32)
    return ((out - mean) / std).astype(np.float32)
