"""Datasets: the embedded synthetic dataset (default), real video datasets, and their masks.

What is here: :mod:`maskdp_jax.data.dataset` (the :class:`Dataset` protocol every split satisfies,
and :func:`mask_chunks` to stream a split's masks, :func:`check_masks` to read them all once);
:mod:`maskdp_jax.data.layouts` (folder layouts and official splits); :mod:`maskdp_jax.data.decode`
(video decoding, mask files and their one validator :func:`maskdp_jax.data.decode.binarize_mask`);
:mod:`maskdp_jax.data.clips` (clip sampling, resize/crop, conservative mask resizing,
normalisation); :mod:`maskdp_jax.data.labels` (label checks); the sources
:mod:`maskdp_jax.data.synthetic`, :mod:`maskdp_jax.data.video_dataset` and
:mod:`maskdp_jax.data.tfds_ucf101`; :mod:`maskdp_jax.data.loader` (prefetching steps);
:mod:`maskdp_jax.data.preprocess` (torchvision's Kinetics transform in NumPy);
:mod:`maskdp_jax.data.store` (the clip store: a split decoded once into memory-mapped frames and
masks, written by ``python -m maskdp_jax.prepare``); :mod:`maskdp_jax.data.atomic` (atomic file
replacement, for every writer above the data layer too); :mod:`maskdp_jax.data.testing` (small video
files for tests). Token cells and the degenerate-mask check belong to the tokeniser
(:mod:`maskdp_jax.core.tokenizer`), which reads masks from here: ``data`` imports nothing from
``maskdp_jax``.

Every split is a :class:`Dataset`: ``name``, ``class_names``, ``num_classes``, ``labels [N]``,
``has_masks``, ``pixel_norm``, ``__len__``,
``get_batch(indices, *, num_clips, seed, normalize) -> {video, mask, label}`` with
``video [n, K, T, H, W, 3]`` float32 (normalised by ``pixel_norm``; uint8 pixels with
``normalize=False``, which training uses), ``mask [n, K, T, H, W]`` uint8 (1 = public)
and ``label [n]`` int32 (``seed=None`` gives the fixed evaluation views, for real videos
``K * eval_crops`` of them, whose logits the evaluation averages), and
``get_masks(indices) -> [n, T, H, W]`` uint8, the centre view's masks read without decoding video.

The sources take typed arguments; the splits a training config names are built in the run layer
(:func:`maskdp_jax.run.datasets.get_datasets`), which is where ``config.input`` is read.
"""

from __future__ import annotations

from maskdp_jax.data import labels
from maskdp_jax.data.dataset import Dataset, check_masks, mask_chunks
from maskdp_jax.data.loader import StepPrefetcher

__all__ = ["Dataset", "StepPrefetcher", "check_masks", "check_splits", "mask_chunks"]


def check_splits(*splits: Dataset) -> None:
    """Refuse a split that is empty or whose labels are not valid class indices.

    Raises:
      ValueError: naming the split (:func:`maskdp_jax.data.labels.check_labels` for the labels).
    """
    for split in splits:
        if len(split) == 0:
            raise ValueError(f"{split.name}: the split has no video; check the data and splits.")
        labels.check_labels(split.labels, num_classes=split.num_classes,
                            num_examples=len(split), source=split.name)
