"""The training and test splits a config names: ``config.input`` -> two
:class:`maskdp_jax.data.Dataset`.

This is where the data config ends: the sources of :mod:`maskdp_jax.data` take typed arguments
(:func:`maskdp_jax.data.synthetic.make_splits`, :class:`maskdp_jax.data.video_dataset.VideoDataset`
with a :class:`~maskdp_jax.data.layouts.Layout` and
:class:`~maskdp_jax.data.video_dataset.VideoOptions`,
:class:`maskdp_jax.data.tfds_ucf101.TfdsUcf101`), built here from the keys of ``config.input``.

``config.input.dataset`` picks the source: ``synthetic``; the folder layouts ``ucf101``,
``hmdb51``, ``ntu60``, ``toyota_smarthome``, ``folder`` (see :mod:`maskdp_jax.data.layouts`, read
with :mod:`maskdp_jax.data.video_dataset`); ``tfds_ucf101`` (:mod:`maskdp_jax.data.tfds_ucf101`, no
masks).
"""

from __future__ import annotations

import os

import ml_collections
import numpy as np

from maskdp_jax import data
from maskdp_jax.core import tokenizer
from maskdp_jax.core.plan import Mode
from maskdp_jax.data import clips, layouts, synthetic
from maskdp_jax.data import dataset as dataset_lib
from maskdp_jax.data.video_dataset import VideoDataset, VideoOptions

FOLDER_DATASETS = ("ucf101", "hmdb51", "ntu60", "toyota_smarthome", "folder")
DATASETS = ("synthetic", *FOLDER_DATASETS, "tfds_ucf101")
#: What a run is evaluated on: the held-out test split, or a part of the training split.
EVAL_SPLITS = ("test", "validation")


def get_datasets(
    config: ml_collections.ConfigDict, *, mode: str | None = None, view: str = "full"
) -> tuple[data.Dataset, data.Dataset]:
    """``(train, test)`` splits for ``config.dataset`` (``config`` is ``config.input``; ``mode``
    guards augmentation; ``view="background"`` gives the videos with the person removed: the
    embedded generator renders the room, a folder dataset reads ``input.background_dir``).

    Raises:
      ValueError: unknown dataset, or a split that is empty or whose labels are not valid class
        indices (:func:`maskdp_jax.data.check_splits`).
    """
    train, test = _build_splits(config, mode=mode, view=view)
    data.check_splits(train, test)
    if config.get("eval_split", "test") not in EVAL_SPLITS:
        raise ValueError(f"input.eval_split must be one of {EVAL_SPLITS}; got "
                         f"{config.eval_split!r}.")
    if config.get("eval_split", "test") == "validation":
        # Hyper-parameters are chosen here; the test split is not read.
        train, test = dataset_lib.validation_split(
            train, fraction=config.validation_fraction, seed=config.validation_seed)
    return train, test


def video_splits(
    config: ml_collections.ConfigDict, *, mode: str | None = None
) -> dict[str, VideoDataset]:
    """``{subset: split}`` of a folder dataset, decoding its files (no clip store): what
    ``python -m maskdp_jax.prepare`` writes into ``<input.store_dir>/<subset>``."""
    if config.dataset not in FOLDER_DATASETS:
        raise ValueError(f"a clip store is made for the folder datasets {FOLDER_DATASETS}; "
                         f"input.dataset is {config.dataset!r}.")
    train, test = _build_splits(config, mode=mode, use_store=False)
    data.check_splits(train, test)
    return {"train": train, config.test_subset: test}


def video_options(config: ml_collections.ConfigDict, *, mode: str | None = None) -> VideoOptions:
    """:class:`~maskdp_jax.data.video_dataset.VideoOptions` from ``config.input``; refuses
    augmentation outside ``nonprivate``."""
    augment = bool(config.augment)
    if augment and mode is not None and Mode(mode) is not Mode.NONPRIVATE:
        raise ValueError(
            f"input.augment=True is for mode 'nonprivate' only; mode {mode!r} trains without "
            "augmentation (the papers' choice under DP)."
        )
    spec = clips.ClipSpec(
        num_frames=config.clip_frames, stride=config.stride, resize_size=config.resize_size,
        crop_size=config.crop_size, short_videos=config.short_videos,
        sampling=config.clip_sampling, starts_on_stride=config.starts_on_stride,
    )
    return VideoOptions(
        clip=spec, mean=tuple(config.mean), std=tuple(config.std),
        mask_dir=config.mask_dir, decoder=config.decoder, num_workers=config.num_workers,
        eval_crops=config.eval_crops, augment=augment, validate=config.validate,
        skip_bad_videos=config.skip_bad_videos, public_part=config.public_part,
    )


def _layout(config: ml_collections.ConfigDict, subset: str, *, video_dir: str) -> layouts.Layout:
    name = config.dataset
    # Split files next to the original videos also name the background videos (same keys).
    split_dir = config.split_dir or config.data_dir
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
    return layouts.folder(video_dir=video_dir, split_dir=config.split_dir, subset=subset,
                          test_fraction=config.test_fraction, split_seed=config.split_seed)


def check_held_out(train: layouts.Layout, test: layouts.Layout, *, name: str) -> None:
    """Refuse a test split that shares videos with the training split.

    Its accuracy would be measured partly on training videos and published as held-out, and
    those numbers are computed from private training data without noise.

    Raises:
      ValueError: naming how many videos overlap, one of them and the split files it came from.
    """
    train_paths = {os.path.realpath(r.path): r for r in train.records}
    shared = [r for r in test.records if os.path.realpath(r.path) in train_paths]
    if shared:
        r = shared[0]
        r0 = train_paths[os.path.realpath(r.path)]
        raise ValueError(
            f"{name}: {len(shared)} test video(s) are also training videos (e.g. {r.key}: "
            f"{r0.source} and {r.source}); the test split must be held out. Fix the split "
            "files."
        )


def describe_split(train: data.Dataset, test: data.Dataset, workdir: str) -> str | None:
    """How a folder dataset's held-out split was made, for the report; a split not given by
    both split files (the other videos of the class folders, or the seeded stratified split)
    is written to ``<workdir>/private/split/{train,test}.txt`` so that it can be reused and
    checked. Private: the lists name the training videos. None for other datasets.
    """
    records = [getattr(d, "records", None) for d in (train, test)]
    if any(r is None or not r for r in records) or train.name.split("/")[0] != "folder":
        return None
    sources = [r[0].source for r in records]
    if all(" line " in s for s in sources):
        return "the split files train.txt and test.txt"
    out = os.path.join(os.path.abspath(workdir), "private", "split")
    os.makedirs(out, exist_ok=True)
    for name, recs in (("train", records[0]), ("test", records[1])):
        with open(os.path.join(out, f"{name}.txt"), "w") as f:
            f.writelines(f"{r.key}\n" for r in recs)
    how = [s.split(" line ")[0] if " line " in s else s for s in sources]
    return (f"train: {how[0]}; test: {how[1]} ({len(records[0])} / {len(records[1])} videos); "
            f"the lists are in private/split/ (private: they name the training videos)")


def _build_splits(
    config: ml_collections.ConfigDict, *, mode: str | None, use_store: bool = True,
    view: str = "full",
) -> tuple[data.Dataset, data.Dataset]:
    # Only the video inputs (configs/default.py: video_input) have a store_dir.
    store_dir = config.store_dir if use_store and "store_dir" in config else ""
    background = view == "background"
    if background and config.dataset not in ("synthetic", *FOLDER_DATASETS):
        raise ValueError(f"--config.view=background needs the videos with the person removed; "
                         f"dataset {config.dataset!r} has none. Anonymise the raw videos with "
                         "`python -m maskdp_jax.anonymize ... --background_dir=DIR` and train on "
                         "the folder layout with --config.input.background_dir=DIR.")
    if background and config.dataset != "synthetic":
        if not config.background_dir:
            raise ValueError("--config.view=background reads the inpainted background videos: "
                             "set --config.input.background_dir to the --background_dir of "
                             "`python -m maskdp_jax.anonymize`.")
        if store_dir:
            raise ValueError("--config.view=background decodes input.background_dir; the clip "
                             "store holds input.data_dir's clips: leave input.store_dir empty.")
    if store_dir and config.dataset not in FOLDER_DATASETS:
        raise ValueError(f"input.store_dir is for the folder datasets {FOLDER_DATASETS}; "
                         f"input.dataset is {config.dataset!r}: leave input.store_dir empty.")
    if config.dataset == "synthetic":
        return synthetic.make_splits(
            num_train=config.num_train, num_test=config.num_test, frames=config.frames,
            clip_frames=config.clip_frames, size=config.size, seed=config.data_seed,
            clip_sampling=config.clip_sampling, num_subjects=config.num_subjects,
            cue=config.cue, cue_frames=config.cue_frames, background=background,
            setting=config.setting, private_share=config.get("private_share"),
        )
    if config.dataset in FOLDER_DATASETS:
        options = video_options(config, mode=mode)
        test_subset = config.test_subset
        if test_subset == "train":
            raise ValueError(
                "--config.input.test_subset='train' evaluates on the training videos: the report "
                "would publish accuracy measured on training data (not covered by the privacy "
                "guarantee, and no measure of generalisation). Use a held-out subset "
                "(e.g. 'test')."
            )
        video_dir = config.background_dir if background else config.data_dir
        train, test = (_layout(config, subset, video_dir=video_dir)
                       for subset in ("train", test_subset))
        check_held_out(train, test, name=config.dataset)
        return tuple(VideoDataset(layout, options, name=f"{config.dataset}/{subset}",
                                  store_dir=os.path.join(store_dir, subset) if store_dir else "")
                     for layout, subset in ((train, "train"), (test, test_subset)))
    if config.dataset == "tfds_ucf101":
        from maskdp_jax.data import tfds_ucf101

        options = video_options(config, mode=mode)
        return tuple(
            tfds_ucf101.TfdsUcf101(data_dir=config.data_dir, config_name=config.tfds_config,
                                   split=split, options=options)
            for split in ("train", "test")
        )
    raise ValueError(f"unknown dataset {config.dataset!r}; available: {DATASETS}.")


def explain_lost_public_regions(
    dataset: data.Dataset, *, patch_stride: tuple[int, int, int], limit: int = 512
) -> str | None:
    """Why videos whose masks mark a public region have no public token cell, or None.

    For up to ``limit`` videos, compares the public fraction of the source masks, after the
    conservative resize and crop (``dataset.mask_coverage``), and after the erosion to token
    cells; for the videos that had public pixels and kept no public cell, says where it was lost
    (medians) and what to change.
    """
    coverage = getattr(dataset, "mask_coverage", None)
    if coverage is None or not dataset.has_masks:
        return None
    idx = np.arange(min(len(dataset), limit))
    cov = coverage(idx)
    masks = dataset.get_masks(idx)
    cells = tokenizer.public_cells_batch(masks, patch_stride=patch_stride)
    lost = (cov[:, 0] > 0) & (cells == 0)
    if not lost.any():
        return None
    src, resized, scale = (float(np.median(cov[lost, k])) for k in range(3))
    margin = max(scale, 1.0) + clips.CHROMA_MARGIN
    st, sh, sw = patch_stride
    stage = ("the conservative resize" if resized == 0 else
             f"the erosion to whole {st}x{sh}x{sw} token cells")
    return (
        f"Of {len(idx)} videos checked, {int(lost.sum())} have public pixels in their masks "
        f"but no public token cell. Median public area: {100 * src:.1f}% of the "
        f"source frames, {100 * resized:.1f}% after the conservative resize (factor "
        f"{scale:.2g}: the public region shrinks by {margin:.2g} source px per side), 0% after "
        f"the erosion to token cells (a cell is public only if all its {sh}x{sw} px in all "
        f"{st} frames are). Lost at: {stage}. To keep them: make the public regions larger "
        f"(at least {int(np.ceil((2 * max(sh, sw) - 1) * max(scale, 1) + 2 * margin))} source "
        "px across, which holds a whole cell wherever the grid falls), "
        "resize less (a larger input.resize_size and crop_size, with a model for that size), "
        "or accept that these videos train as plain DP-SGD."
    )
