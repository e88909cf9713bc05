"""UCF-101 through TensorFlow Datasets' ``ucf101`` builder, with the same element format as
:class:`maskdp_jax.data.video_dataset.VideoDataset`.

Random access (needed for Poisson sampling: any video can be in any batch) goes through
``tfds.data_source``, which needs the ``array_record`` file format. Prepare the data once with::

    import tensorflow_datasets as tfds
    tfds.builder("ucf101/ucf101_1_256", data_dir=DATA_DIR,
                 file_format="array_record").download_and_prepare()

then run with ``--config.input.dataset=tfds_ucf101 --config.input.data_dir=DATA_DIR``.

Masks: the builder's elements are ``{"video": uint8 [F, 256, 256, 3], "label": int64}`` and carry
no video file name or other stable key, so per-video masks cannot be joined to them. This source
therefore has no masks: ``dp`` and ``nonprivate`` work, ``maskdp`` refuses (use the ``ucf101``
folder layout with ``mask_dir`` for MaskDP).

Requires ``pip install -r requirements-tfds.txt`` (TensorFlow is not in requirements.txt).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json

import numpy as np

from maskdp_jax.data import clips
from maskdp_jax.data.video_dataset import VideoOptions


def _tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ImportError(
            "the tfds_ucf101 source needs tensorflow-datasets: pip install -r requirements-tfds.txt"
        ) from e
    return tfds


class TfdsUcf101:
    """One split of TFDS ``ucf101`` (``config_name`` e.g. ``ucf101_1_256`` = split 1 at 256²)."""

    has_masks = False

    def __init__(self, *, data_dir: str, config_name: str, split: str, options: VideoOptions):
        if options.mask_dir:
            raise ValueError(
                "tfds_ucf101 elements have no stable video key to join masks on; drop "
                "input.mask_dir, or use the 'ucf101' folder layout for MaskDP."
            )
        tfds = _tfds()
        self.name = f"tfds:ucf101/{config_name}/{split}"
        self.options = options
        self.pixel_norm = clips.PixelNorm(options.mean, options.std)
        builder = tfds.builder(f"ucf101/{config_name}", data_dir=data_dir or None)
        self.class_names = tuple(builder.info.features["label"].names)
        self._source = tfds.data_source(
            f"ucf101/{config_name}", split=split, data_dir=data_dir or None
        )
        self._labels_source = tfds.data_source(
            f"ucf101/{config_name}", split=split, data_dir=data_dir or None,
            decoders={"video": tfds.decode.SkipDecoding()},
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(options.num_workers)
        self.labels = np.array(
            list(self._pool.map(lambda i: int(self._labels_source[i]["label"]),
                                range(len(self._source)))), np.int32,
        )

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        """Refused: this source has no masks (``has_masks`` is False, see the module docstring)."""
        raise ValueError(
            f"{self.name} has no masks: the TFDS ucf101 elements carry no key to join mask files "
            "on; use the 'ucf101' folder layout with input.mask_dir for masks."
        )

    def _load_one(self, i: int, plan: clips.ViewPlan, num_clips: int) -> np.ndarray:
        spec = self.options.clip
        frames = np.asarray(self._source[i]["video"])  # [F, H, W, 3] uint8
        if len(frames) < spec.span and spec.short_videos == "error":
            raise ValueError(
                f"{self.name} element {i}: {len(frames)} frames, fewer than the clip span "
                f"{spec.span} (short_videos='error')."
            )
        starts = plan.starts(num_video_frames=len(frames), clip=spec, num_clips=num_clips)
        height, width = frames.shape[1:3]
        h, w = clips.resized_shape(height, width, short_side=spec.resize_size)
        c = spec.crop_size
        out = np.empty((len(starts), spec.num_frames, c, c, 3), np.uint8)
        for v, (s, pos, flip) in enumerate(zip(starts, plan.positions, plan.flips, strict=True)):
            idx = clips.frame_indices(num_video_frames=len(frames), num_frames=spec.num_frames,
                                      stride=spec.stride, start=int(s))
            clip = frames[idx]
            if (h, w) != (height, width):
                clip = _resize_bilinear(clip, (h, w))
            y, x = clips.crop_box(h, w, crop_size=c, position=float(pos))
            clip = clip[:, y:y + c, x:x + c]
            out[v] = clip[:, :, ::-1] if flip else clip
        return out

    def fingerprint(self) -> str:
        """sha256 of the split's name, labels and clip options (what a feature cache made from
        it is checked against; the TFDS files themselves are versioned by TFDS)."""
        blob = json.dumps({"name": self.name, "options": self.options.clip_settings()},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode() + self.labels.tobytes()).hexdigest()

    def get_batch(self, indices, *, num_clips: int = 1, seed=None,
                  normalize: bool = True) -> dict[str, np.ndarray]:
        """Same contract as :meth:`~maskdp_jax.data.video_dataset.VideoDataset.get_batch`; ``mask``
        is all zeros (all private)."""
        indices = np.asarray(indices, np.int64)
        rng = None if seed is None else np.random.default_rng(seed)
        o = self.options
        plans = [clips.plan_views(rng, num_clips=num_clips, eval_crops=o.eval_crops,
                                  augment=o.augment, sampling=o.clip.sampling) for _ in indices]
        video = np.stack(list(self._pool.map(
            lambda a: self._load_one(*a, num_clips),
            zip((int(i) for i in indices), plans, strict=True),
        )))
        return {
            "video": self.pixel_norm(video) if normalize else video,
            "mask": np.zeros(video.shape[:-1], np.uint8),
            "label": self.labels[indices],
        }


def _resize_bilinear(frames: np.ndarray, size) -> np.ndarray:
    """Bilinear resize of uint8 ``[n, H, W, 3]`` frames with Pillow."""
    from PIL import Image

    h, w = size
    return np.stack([
        np.asarray(Image.fromarray(f).resize((w, h), Image.BILINEAR)) for f in frames
    ])
