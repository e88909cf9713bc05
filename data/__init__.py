"""Datasets: the embedded synthetic dataset (default), real video datasets, and their masks.

What is here: :mod:`data.dataset` (the :class:`Dataset` protocol every split satisfies, and
:func:`mask_chunks` to stream a split's masks); :mod:`data.layouts` (folder layouts and official
splits); :mod:`data.decode` (video decoding, mask files and their one validator
:func:`data.decode.binarize_mask`); :mod:`data.clips` (clip sampling, resize/crop, conservative
mask resizing, normalisation); :mod:`data.labels` (label checks); the sources :mod:`data.synthetic`,
:mod:`data.video_dataset` and :mod:`data.tfds_ucf101`; :mod:`data.loader` (prefetching steps);
:mod:`data.preprocess` (torchvision's Kinetics transform in NumPy); :mod:`data.testing` (small
video files for tests). Token cells and the degenerate-mask check belong to the tokeniser
(:mod:`maskdp_jax.tokenizer`), which reads masks from here: ``data`` imports nothing from
``maskdp_jax``.

Every split is a :class:`Dataset`: ``name``, ``class_names``, ``num_classes``, ``labels [N]``,
``has_masks``, ``__len__``, ``get_batch(indices, *, num_clips, seed) -> {video, mask, label}``
with ``video [n, K, T, H, W, 3]`` float32 (normalised), ``mask [n, K, T, H, W]`` uint8 (1 = public)
and ``label [n]`` int32 (``seed=None`` gives the fixed evaluation views, for real videos
``K * eval_crops`` of them, whose logits the evaluation averages), and
``get_masks(indices) -> [n, T, H, W]`` uint8, the centre view's masks read without decoding video.

``config.input.dataset`` picks the source: ``synthetic``; the folder layouts ``ucf101``,
``hmdb51``, ``ntu60``, ``toyota_smarthome``, ``folder`` (see :mod:`data.layouts`, read with
:mod:`data.video_dataset`); ``tfds_ucf101`` (:mod:`data.tfds_ucf101`, no masks).
"""

from __future__ import annotations

import ml_collections

from data import clips, labels, layouts, synthetic
from data.dataset import Dataset, mask_chunks
from data.loader import StepPrefetcher
from data.video_dataset import VideoDataset, VideoOptions

FOLDER_DATASETS = ("ucf101", "hmdb51", "ntu60", "toyota_smarthome", "folder")
DATASETS = ("synthetic", *FOLDER_DATASETS, "tfds_ucf101")
__all__ = ["DATASETS", "Dataset", "StepPrefetcher", "get_datasets", "mask_chunks"]


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


def get_datasets(
    config: ml_collections.ConfigDict, *, mode: str | None = None
) -> tuple[Dataset, Dataset]:
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


def _build_splits(
    config: ml_collections.ConfigDict, *, mode: str | None
) -> tuple[Dataset, Dataset]:
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

