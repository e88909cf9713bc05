"""Datasets: the embedded synthetic dataset (default) and real video datasets.

Every dataset split exposes ``name``, ``class_names``, ``num_classes``, ``labels [N]``,
``has_masks``, ``__len__`` and ``get_batch(indices, *, num_clips, seed) -> {video, mask, label}``
with ``video [n, K, T, H, W, 3]`` float32 (normalised), ``mask [n, K, T, H, W]`` uint8 (1 = public)
and ``label [n]`` int32.
"""

from __future__ import annotations

import ml_collections

from data import synthetic


def get_datasets(config: ml_collections.ConfigDict):
    """``(train, test)`` splits for ``config.dataset``."""
    if config.dataset == "synthetic":
        return synthetic.make_splits(
            num_train=config.num_train, num_test=config.num_test, frames=config.frames,
            clip_frames=config.clip_frames, size=config.size, seed=config.get("data_seed", 0),
        )
    raise ValueError(f"unknown dataset {config.dataset!r}; available: 'synthetic'.")
