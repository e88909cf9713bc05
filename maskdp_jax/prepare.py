r"""Decode a folder dataset once into clip stores (:mod:`maskdp_jax.data.store`), one per split.

Usage::

    python -m maskdp_jax.prepare --config=configs/ucf101_maskdp.py \
        --config.input.data_dir=/data/UCF-101 --config.input.split_dir=/data/ucfTrainTestlist \
        --config.input.mask_dir=/data/UCF-101-masks --config.input.store_dir=/fast/ucf101-store \
        --workers=16
    python train.py --config=configs/ucf101_maskdp.py <the same --config.input flags>

Takes the training config (the same flags as the training run: the store is checked against
them) and writes ``<input.store_dir>/train`` and ``<input.store_dir>/<input.test_subset>``.
``--dry_run`` prints the disk space each store will take (from the videos' headers) and writes
nothing; a store that does not fit on its disk is refused before anything is written.
Resumable: run it again after an interruption and it continues with the videos not yet
written; a complete store is left as it is. ``--workers`` decoding processes (default: every
CPU). The store is as private as the videos (it holds them decoded).

A command like ``train.py``: it reads a training config, so it sits above the run layer
(``data`` reads no configs, README, "Code layout") and builds the splits through
:func:`maskdp_jax.run.datasets.video_splits`; the library part is :mod:`maskdp_jax.data.store`.
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

from maskdp_jax.data import check_masks, store
from maskdp_jax.run import command
from maskdp_jax.run import datasets as run_datasets
from maskdp_jax.run.metrics import progress_bar


def prepare_stores(config, *, workers: int, dry_run: bool = False) -> dict[str, dict]:
    """Write (or finish) the clip store of every split of ``config.input``; returns
    ``{subset: meta}``. ``dry_run``: write nothing; the metas hold the bytes each store would
    take (``complete`` False), read from the videos' headers.

    Raises:
      ValueError: ``input.store_dir`` is empty, the dataset is not a folder dataset, a mask file
        is malformed (refused before anything is written; a video that cannot be decoded is
        found only while writing, and leaves its store marked incomplete, which training
        refuses and a rerun continues), or a store directory holds another store.
    """
    if config.input.dataset not in run_datasets.FOLDER_DATASETS:
        raise ValueError(f"a clip store is made for the folder datasets "
                         f"{run_datasets.FOLDER_DATASETS}; input.dataset is "
                         f"{config.input.dataset!r}.")
    root = config.input.store_dir
    if not root:
        raise ValueError("set --config.input.store_dir=<directory for the clip stores>; "
                         "train with the same flag afterwards.")
    splits = run_datasets.video_splits(config.input, mode=config.mode)
    for split in splits.values():  # every mask file is checked before any store is written
        if split.has_masks:
            check_masks(split)
    out = {}
    for subset, split in splits.items():
        entries = split.store_entries()
        directory = os.path.join(root, subset)
        if dry_run:
            size = store.store_bytes(entries, frame_step=split.store_settings()["frame_step"])
            out[subset] = {"num_videos": len(entries), "complete": False, "bytes": size}
            split.close()
            continue
        with progress_bar(len(entries), f"store {split.name}") as progress:
            out[subset] = store.prepare(entries, directory, **split.store_settings(),
                                        workers=workers, progress=progress)
        split.close()
    return out


def run_command(f: flags.FlagValues) -> int:
    """Write the stores the parsed flags ``f`` name and print their sizes."""
    start = time.time()
    metas = prepare_stores(f.config, workers=f.workers, dry_run=f.dry_run)
    for subset, meta in metas.items():
        print(f"{subset}: {meta['num_videos']} videos, {meta['bytes'] / 2**30:.2f} GiB"
              + (" (would be written: --dry_run)" if f.dry_run else
                 f", complete={meta['complete']}"))
    print(f"done in {time.time() - start:.0f} s")
    return 0


def define_flags(fv: flags.FlagValues, argv) -> None:
    """The command's flags (on ``fv``); ``--config`` and its keys are checked first."""
    command.config_flag(fv, argv, help="Training config (configs/*.py).",
                        sections=("mode", "input"),
                        kind="a training config of a folder dataset (configs/*_maskdp.py)")
    flags.DEFINE_integer("workers", os.cpu_count() or 1, "Decoding processes.", flag_values=fv)
    flags.DEFINE_bool("dry_run", False, "Print each store's size on disk; write nothing.",
                      flag_values=fv)


def cli(argv) -> int:
    """``python -m maskdp_jax.prepare ...`` as a function of the command line: its exit status
    (2: bad input, with ``error: <reason>`` on stderr; a store left incomplete by a bad video is
    marked so in its ``meta.json`` and never read as finished)."""
    return command.run(argv, define=define_flags, work=run_command, about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.prepare --config=configs/<dataset>_maskdp.py "
          "--config.input.store_dir=DIR",
    summary="Decode a folder dataset once into memory-mapped clip stores, one per split, that "
            "training then reads instead of the videos.",
    keys="docs/guides/own_videos.md (the `input` section of a training config)")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
