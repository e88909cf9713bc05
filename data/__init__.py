"""Datasets: the embedded synthetic dataset (default) and real video datasets.

Every dataset split exposes ``name``, ``class_names``, ``num_classes``, ``labels [N]``,
``has_masks``, ``__len__`` and ``get_batch(indices, *, num_clips, seed) -> {video, mask, label}``
with ``video [n, K, T, H, W, 3]`` float32 (normalised), ``mask [n, K, T, H, W]`` uint8 (1 = public)
and ``label [n]`` int32. ``seed=None`` gives the fixed evaluation views (for real videos
``K * eval_crops`` of them), whose logits the evaluation averages.

``config.input.dataset`` picks the source: ``synthetic``; the folder layouts ``ucf101``,
``hmdb51``, ``ntu60``, ``toyota_smarthome``, ``folder`` (see :mod:`data.layouts`, read with
:mod:`data.video_dataset`); ``tfds_ucf101`` (:mod:`data.tfds_ucf101`, no masks).
"""

from __future__ import annotations

import warnings

import ml_collections
import numpy as np

from data import clips, labels, layouts, synthetic
from data.loader import StepPrefetcher
from data.video_dataset import VideoDataset, VideoOptions

FOLDER_DATASETS = ("ucf101", "hmdb51", "ntu60", "toyota_smarthome", "folder")
DATASETS = ("synthetic", *FOLDER_DATASETS, "tfds_ucf101")
__all__ = ["DATASETS", "StepPrefetcher", "get_datasets", "warn_degenerate_masks"]


def video_options(config: ml_collections.ConfigDict, *, mode: str | None = None) -> VideoOptions:
    """:class:`VideoOptions` from ``config.input``; refuses augmentation outside ``nonprivate``."""
    augment = bool(config.get("augment", False))
    if augment and mode not in (None, "nonprivate"):
        raise ValueError(
            f"input.augment=True is for mode 'nonprivate' only; mode {mode!r} trains without "
            "augmentation (the papers' choice under DP)."
        )
    spec = clips.ClipSpec(
        num_frames=config.clip_frames, stride=config.stride, resize_size=config.resize_size,
        crop_size=config.crop_size, short_videos=config.get("short_videos", "pad"),
    )
    return VideoOptions(
        clip=spec, mean=tuple(config.mean), std=tuple(config.std),
        mask_dir=config.get("mask_dir", ""), decoder=config.get("decoder", "decord"),
        num_workers=config.get("num_workers", 4), eval_crops=config.get("eval_crops", 1),
        augment=augment, validate=config.get("validate", "metadata"),
        skip_bad_videos=config.get("skip_bad_videos", False),
    )


def _layout(config: ml_collections.ConfigDict, subset: str) -> layouts.Layout:
    name, video_dir = config.dataset, config.data_dir
    split_dir = config.get("split_dir", "") or video_dir
    if not video_dir:
        raise ValueError(f"dataset {name!r} needs --config.input.data_dir=<video root>.")
    if name == "ucf101":
        return layouts.ucf101(video_dir=video_dir, split_dir=split_dir, split=config.split,
                              subset=subset)
    if name == "hmdb51":
        return layouts.hmdb51(video_dir=video_dir, split_dir=split_dir, split=config.split,
                              subset=subset)
    if name == "ntu60":
        return layouts.ntu60(video_dir=video_dir, protocol=config.protocol, subset=subset)
    if name == "toyota_smarthome":
        return layouts.toyota_smarthome(video_dir=video_dir, protocol=config.protocol,
                                        subset=subset)
    return layouts.folder(video_dir=video_dir, split_dir=config.get("split_dir", ""),
                          subset=subset)


def get_datasets(config: ml_collections.ConfigDict, *, mode: str | None = None):
    """``(train, test)`` splits for ``config.dataset`` (``mode`` guards augmentation).

    Raises:
      ValueError: unknown dataset, or a split that is empty or whose labels are not valid class
        indices (:func:`data.labels.check_labels`).
    """
    train, test = _build_splits(config, mode=mode)
    for split in (train, test):
        if len(split) == 0:
            raise ValueError(f"{split.name}: the split has no video; check the data and splits.")
        labels.check_labels(split.labels, num_classes=split.num_classes,
                            num_examples=len(split), source=split.name)
    return train, test


def _build_splits(config: ml_collections.ConfigDict, *, mode: str | None):
    if config.dataset == "synthetic":
        return synthetic.make_splits(
            num_train=config.num_train, num_test=config.num_test, frames=config.frames,
            clip_frames=config.clip_frames, size=config.size, seed=config.get("data_seed", 0),
        )
    if config.dataset in FOLDER_DATASETS:
        options = video_options(config, mode=mode)
        test_subset = config.get("test_subset", "test")
        return tuple(
            VideoDataset(_layout(config, subset), options, name=f"{config.dataset}/{subset}")
            for subset in ("train", test_subset)
        )
    if config.dataset == "tfds_ucf101":
        from data import tfds_ucf101

        options = video_options(config, mode=mode)
        return tuple(
            tfds_ucf101.TfdsUcf101(data_dir=config.data_dir, config_name=config.tfds_config,
                                   split=split, options=options)
            for split in ("train", "test")
        )
    raise ValueError(f"unknown dataset {config.dataset!r}; available: {DATASETS}.")


def warn_degenerate_masks(
    dataset, *, patch_stride: tuple[int, int, int], chunk: int = 64
) -> tuple[int, int]:
    """Warn about training videos with no private / no public token cell (centre view).

    The synthetic dataset holds its masks in memory; a video dataset reads its mask files (no
    video decoding) in chunks. Returns ``(num_all_public, num_all_private)``.
    """
    from maskdp_jax import tokenizer

    if hasattr(dataset, "masks"):
        return tokenizer.warn_degenerate_masks(
            dataset.masks, patch_stride=patch_stride, source=dataset.name
        )
    counts = np.zeros(2, np.int64)
    for start in range(0, len(dataset), chunk):
        masks = dataset.get_masks(np.arange(start, min(start + chunk, len(dataset))))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            counts += tokenizer.warn_degenerate_masks(masks, patch_stride=patch_stride)
    all_public, all_private = (int(c) for c in counts)
    n = len(dataset)
    if all_public:
        warnings.warn(
            f"{dataset.name}: {all_public}/{n} videos have no private token cell in the centre "
            "view; they contribute no private gradient and have nothing protected.", stacklevel=2,
        )
    if all_private:
        warnings.warn(
            f"{dataset.name}: {all_private}/{n} videos have no public token cell in the centre "
            "view; for them MaskDP is ordinary DP-SGD.", stacklevel=2,
        )
    return all_public, all_private
