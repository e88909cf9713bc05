r"""Clip store: every video of a split decoded once into memory-mapped uint8 frames and masks.

Decoding is the loader's cost (docs/benchmarks.md, "Data throughput"); a GPU
step consumes clips far faster than a few cores decode them. A store holds, for every video of a
split, the frames a clip can use at the config's resized size (what
:func:`maskdp_jax.data.decode.read_video` returns before the crop) and their masks after the
conservative resize (:func:`maskdp_jax.data.clips.resize_mask`), so a training or evaluation clip is
a slice of two memory-mapped arrays. Which frames: every frame, or with ``input.starts_on_stride``
(:attr:`maskdp_jax.data.clips.ClipSpec.frame_step`) every ``stride``-th frame and the last (a padded
clip repeats it), a ``stride``-fold saving. Which pixels: the whole resized frame, or where every
view is the centre crop (no augmentation, one evaluation crop: the DP setting) only that crop. The
clip positions, crops, flips and normalisation stay in
:class:`~maskdp_jax.data.video_dataset.VideoDataset`, and a batch read from the store equals the
batch decoded from the videos bit for bit (tested).

Layout of a store directory (one per split)::

    frames.u8     every video's stored frames [R_i, h_i, w_i, 3] uint8, concatenated
    masks.u8      their masks                 [R_i, h_i, w_i]    uint8 (absent without masks)
    index.npz     per video: byte offsets into both files, (R_i, h_i, w_i) and F_i
    meta.json     fingerprint, video count, ``complete``
    done.txt      videos written so far (one index per line): what a restart skips

The directory part (:func:`begin`, :class:`DoneLog`, :func:`complete`, :func:`open_complete`:
fixed-size files written in place, fingerprint, resume by video, completion) is shared with the
feature cache (:mod:`maskdp_jax.data.feature_cache`), whose payload is the frozen prefix's features
instead of frames: one store, two payloads.

Why raw memory-mapped NumPy and not a record format (ArrayRecord, TFRecord): a clip reads 16 of a
video's frames, scattered by the stride; with raw rows that is an index into a memory map (no
deserialisation, no copy beyond the frames wanted, pages shared between processes and cached by
the OS), where a record format would read and deserialise a whole record per video or per frame.
Measured (``benchmarks/data_throughput.py --sources=...,store``;
benchmarks/results/clip_store.md): a clip's 16 rows and masks read several times faster from the
memory maps than from an ArrayRecord file of the same rows (one record per frame, uncompressed).
Lossless, so the equality with decoding holds; the price is disk (docs/guides/own_videos.md,
"Decode once: the clip store").

The fingerprint covers what decides the bytes: the store version, the decoder, the resize, the
frame step, the crop, and for every video its key, label, file size, frame count and size, and
its mask file's size. A store whose fingerprint differs from the split's is refused, in both
directions (``prepare`` into a directory holding another store, and training from it).

Privacy: a store holds the training videos and their masks decoded: it is as private as the
videos. Keep it where the videos are, never beside the reports.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
from collections.abc import Callable, Sequence

import numpy as np

from maskdp_jax.data import atomic, clips, decode

STORE_VERSION = 1
FRAMES, MASKS, INDEX, META, DONE = "frames.u8", "masks.u8", "index.npz", "meta.json", "done.txt"
_CHUNK_FRAMES = 64  # frames decoded at a time while writing (bounds a worker's memory)


@dataclasses.dataclass(frozen=True)
class VideoEntry:
    """What the store needs of one video: its files and its decoded geometry.

    Attributes:
      key: the video's key in its layout (for messages and the fingerprint).
      label: class index.
      path: video file.
      mask_path: mask file, or None (the split has no masks).
      num_frames: F, frames of the video.
      size: ``(h, w)`` of the resized frames (:func:`maskdp_jax.data.clips.resized_shape`).
      crop_size: store only the centre ``crop_size`` square of each resized frame (every view
        of the split is that crop), or None: the whole frame.
    """

    key: str
    label: int
    path: str
    mask_path: str | None
    num_frames: int
    size: tuple[int, int]
    crop_size: int | None = None

    @property
    def stored_size(self) -> tuple[int, int]:
        """``(h, w)`` of a stored frame."""
        return (self.crop_size, self.crop_size) if self.crop_size else self.size


def stored_frames(num_frames: int, frame_step: int) -> np.ndarray:
    """Frame indices a store keeps of a video of ``num_frames`` frames: every ``frame_step``-th
    and the last one (the frame a padded clip repeats), ascending."""
    return np.union1d(np.arange(0, num_frames, frame_step), [num_frames - 1])


def fingerprint(
    entries: Sequence[VideoEntry], *, decoder: str, resize_size: int, frame_step: int
) -> str:
    """sha256 of everything that decides a store's bytes (see the module docstring)."""
    videos = [
        [e.key, int(e.label), os.path.getsize(e.path),
         None if e.mask_path is None else os.path.getsize(e.mask_path),
         e.num_frames, *e.size, e.crop_size]
        for e in entries
    ]
    blob = json.dumps({"version": STORE_VERSION, "decoder": decoder, "resize_size": resize_size,
                       "frame_step": frame_step, "videos": videos}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _offsets(entries: Sequence[VideoEntry], frame_step: int) -> dict[str, np.ndarray]:
    rows = [len(stored_frames(e.num_frames, frame_step)) for e in entries]
    pixels = np.array([r * e.stored_size[0] * e.stored_size[1]
                       for r, e in zip(rows, entries, strict=True)], np.int64)
    starts = np.concatenate([[0], np.cumsum(pixels)[:-1]]).astype(np.int64)
    return {
        "frame_offset": 3 * starts, "mask_offset": starts,
        "shape": np.array([(r, *e.stored_size) for r, e in zip(rows, entries, strict=True)],
                          np.int64).reshape(-1, 3),
        "num_frames": np.array([e.num_frames for e in entries], np.int64),
        "total_pixels": np.int64(pixels.sum()),
    }


def _files(entries: Sequence[VideoEntry], layout: dict) -> dict[str, int]:
    """File name -> bytes of a store: 3 per stored pixel, and 1 more in the masks' file."""
    pixels = int(layout["total_pixels"])
    return {FRAMES: 3 * pixels,
            MASKS: pixels if any(e.mask_path is not None for e in entries) else 0}


def store_bytes(entries: Sequence[VideoEntry], *, frame_step: int) -> int:
    """Bytes a store of ``entries`` takes on disk (what ``prepare`` writes)."""
    return sum(_files(entries, _offsets(entries, frame_step)).values())


# ----------------------------------------------------------------------------------------------
# A store directory: the part both payloads share (this module's clip store, and the feature
# cache of run.features / data.feature_cache): fixed-size files written in place, a fingerprint,
# resume by index, and completion.
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Kind:
    """What a store directory holds, for messages: ``"clip store"`` written by ``python -m
    maskdp_jax.prepare``, or ``"feature cache"`` written by ``train.py``."""

    name: str
    writer: str
    differs: str  # what a different fingerprint means, in words


CLIPS = Kind("clip store", "python -m maskdp_jax.prepare --config=<the same config> "
             "(docs/guides/own_videos.md, 'Decode once: the clip store')",
             "from other videos or with another preprocessing (decoder, resize_size, "
             "starts_on_stride, crop, files changed)")


def read_meta(directory: str) -> dict | None:
    """The store's ``meta.json``, or None when there is no store in ``directory``."""
    path = os.path.join(directory, META)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _write_meta(directory: str, meta: dict) -> None:
    atomic.write(os.path.join(directory, META), json.dumps(meta, indent=1))


def done_indices(directory: str) -> set[int]:
    """Indices (videos) already written into the store in ``directory``."""
    path = os.path.join(directory, DONE)
    if not os.path.isfile(path):
        return set()
    with open(path) as f:
        # A line cut by a kill has no newline: that video is written again.
        return {int(line) for line in f.read().split("\n")[:-1] if line.strip()}


def begin(directory: str, *, kind: Kind, fingerprint: str, files: dict[str, int],
          meta: dict, write_index: Callable[[], None] | None = None) -> tuple[dict, set[int]]:
    """Open the store in ``directory`` for writing: ``(meta, indices already written)``.

    A new store: checks the free space, sizes ``files`` (name -> bytes; sparse until written),
    then writes ``meta`` with the fingerprint and ``complete`` False. An existing store with the
    same fingerprint is continued (a complete one is returned as it is). ``write_index`` runs
    for a new store before its meta exists, so a store with a meta always has its index.

    Raises:
      ValueError: ``directory`` holds a store with another fingerprint.
      OSError: the files do not fit on the disk (a memory map written past a full disk dies
        with SIGBUS, mid-way, so this is checked before anything is written).
    """
    os.makedirs(directory, exist_ok=True)
    old = read_meta(directory)
    if old is not None and old["fingerprint"] != fingerprint:
        raise ValueError(
            f"{directory} holds a {kind.name} made {kind.differs} than this one (fingerprint "
            f"{old['fingerprint'][:12]}… vs {fingerprint[:12]}…); write it into another "
            "directory, or delete this one.")
    if old is not None:
        return old, done_indices(directory)
    needed, free = sum(files.values()), shutil.disk_usage(directory).free
    if needed > free:
        raise OSError(
            f"the {kind.name} needs {needed / 2**30:.1f} GiB but {directory} has "
            f"{free / 2**30:.1f} GiB free: free space or choose another directory (docs/guides/"
            "own_videos.md: disk per dataset).")
    for name, size in files.items():
        if size:
            with open(os.path.join(directory, name), "wb") as f:
                f.truncate(int(size))
    if write_index is not None:
        write_index()
    meta = {**meta, "fingerprint": fingerprint, "bytes": int(needed), "complete": False}
    _write_meta(directory, meta)
    return meta, set()


class DoneLog:
    """``with DoneLog(directory) as finished: finished(i)`` records index ``i`` as written
    (flushed at once, fsynced at the end), so a restart skips it."""

    def __init__(self, directory: str):
        self._path = os.path.join(directory, DONE)

    def __enter__(self) -> Callable[[int], None]:
        self._log = open(self._path, "a")  # noqa: SIM115 (closed in __exit__)

        def finished(i: int) -> None:
            self._log.write(f"{i}\n")
            self._log.flush()

        return finished

    def __exit__(self, *exc) -> None:
        os.fsync(self._log.fileno())
        self._log.close()


def complete(directory: str, meta: dict) -> dict:
    """Mark the store complete (after every index was written); returns the new meta."""
    meta = {**meta, "complete": True}
    _write_meta(directory, meta)
    return meta


def open_complete(directory: str, *, kind: Kind, fingerprint: str) -> dict:
    """The meta of the complete store in ``directory`` whose fingerprint is ``fingerprint``.

    Raises:
      FileNotFoundError: no store there.
      ValueError: another fingerprint, or an incomplete store.
    """
    meta = read_meta(directory)
    if meta is None:
        raise FileNotFoundError(f"no {kind.name} in {directory}: write it first with "
                                f"{kind.writer}.")
    if meta["fingerprint"] != fingerprint:
        raise ValueError(
            f"the {kind.name} in {directory} was made {kind.differs} than this run needs; "
            f"write one with {kind.writer} into a new directory.")
    if not meta["complete"]:
        raise ValueError(
            f"the {kind.name} in {directory} is incomplete ({len(done_indices(directory))} of "
            f"{meta['num_videos']} videos written): run {kind.writer} again to finish it.")
    return meta


def _write_video(task: tuple) -> int:
    """Decode one video (and resize its mask) into its rows of the store files; returns its
    index. Runs in a worker process: everything it needs is in ``task``."""
    i, entry, directory, decoder, frame_step, frame_offset, mask_offset = task
    keep, (h, w) = stored_frames(entry.num_frames, frame_step), entry.size
    (sh, sw), (y, x) = entry.stored_size, (0, 0)
    if entry.crop_size:  # the same box the dataset cuts at the centre position
        y, x = clips.crop_box(h, w, crop_size=entry.crop_size, position=0.5)
    frames = np.memmap(os.path.join(directory, FRAMES), np.uint8, "r+", offset=frame_offset,
                       shape=(len(keep), sh, sw, 3))
    for a in range(0, len(keep), _CHUNK_FRAMES):
        rows = slice(a, a + _CHUNK_FRAMES)
        decoded = decode.read_video(entry.path, keep[rows], size=(h, w), decoder=decoder)
        frames[rows] = decoded[:, y:y + sh, x:x + sw]
    frames.flush()
    if entry.mask_path is not None:
        masks = np.memmap(os.path.join(directory, MASKS), np.uint8, "r+", offset=mask_offset,
                          shape=(len(keep), sh, sw))
        for a in range(0, len(keep), _CHUNK_FRAMES):
            rows = slice(a, a + _CHUNK_FRAMES)
            raw, _ = decode.load_mask(entry.mask_path, keep[rows])
            masks[rows] = clips.resize_mask(raw, (h, w))[:, y:y + sh, x:x + sw]
        masks.flush()
    return i


def prepare(
    entries: Sequence[VideoEntry], directory: str, *, decoder: str, resize_size: int,
    frame_step: int = 1, workers: int = 1, progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Write (or finish) the store of one split in ``directory``.

    Resumable: the videos already listed in ``done.txt`` are skipped, so a killed ``prepare``
    continues where it stopped; a complete store with the same fingerprint is left as it is.

    Args:
      entries: the split's videos, in its index order
        (:meth:`~maskdp_jax.data.video_dataset.VideoDataset.store_entries`).
      directory: the store of this split; created if missing.
      decoder: ``"decord"`` or ``"pyav"`` (part of the fingerprint).
      resize_size: the short side the frames are resized to (part of the fingerprint).
      frame_step: keep every ``frame_step``-th frame and the last (:func:`stored_frames`;
        the clip spec's :attr:`~maskdp_jax.data.clips.ClipSpec.frame_step`; part of the
        fingerprint).
      workers: processes decoding in parallel (1: in this process).
      progress: called as ``progress(done, total)`` after every video.

    Returns:
      the store's ``meta.json`` contents.

    Raises:
      ValueError: ``directory`` holds a store made from other videos or another preprocessing.
      OSError: the store does not fit on its disk (nothing is written).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}.")
    fp = fingerprint(entries, decoder=decoder, resize_size=resize_size, frame_step=frame_step)
    layout = _offsets(entries, frame_step)
    files = _files(entries, layout)
    meta, done = begin(
        directory, kind=CLIPS, fingerprint=fp, files=files,
        meta={"version": STORE_VERSION, "num_videos": len(entries), "decoder": decoder,
              "resize_size": resize_size, "frame_step": frame_step,
              "has_masks": files[MASKS] > 0},
        write_index=lambda: np.savez(os.path.join(directory, INDEX), **{
            k: v for k, v in layout.items() if k != "total_pixels"}))
    if meta["complete"]:
        return meta
    tasks = [(i, e, directory, decoder, frame_step, int(layout["frame_offset"][i]),
              int(layout["mask_offset"][i]))
             for i, e in enumerate(entries) if i not in done]
    with DoneLog(directory) as log:
        def finished(i: int) -> None:
            log(i)
            done.add(i)
            if progress is not None:
                progress(len(done), len(entries))

        if workers == 1:
            for task in tasks:
                finished(_write_video(task))
        else:
            ctx = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                for i in pool.map(_write_video, tasks, chunksize=1):
                    finished(i)
    return complete(directory, meta)


class ClipStore:
    """A complete store opened for reading (thread-safe: reads are slices of memory maps).

    Args:
      directory: the split's store (written by :func:`prepare`).
      expected_fingerprint: :func:`fingerprint` of the split that will read it.

    Raises:
      FileNotFoundError: no store there.
      ValueError: the store is incomplete, or was made from other videos or with another
        preprocessing.
    """

    def __init__(self, directory: str, *, expected_fingerprint: str):
        meta = open_complete(directory, kind=CLIPS, fingerprint=expected_fingerprint)
        self.directory = directory
        self.meta = meta
        with np.load(os.path.join(directory, INDEX)) as index:
            self._frame_offset = index["frame_offset"]
            self._mask_offset = index["mask_offset"]
            self._shape = index["shape"]
            self._num_frames = index["num_frames"]
        self.frame_step = int(meta["frame_step"])
        self._frames = np.memmap(os.path.join(directory, FRAMES), np.uint8, "r")
        self._masks = (np.memmap(os.path.join(directory, MASKS), np.uint8, "r")
                       if meta["has_masks"] else None)

    def __len__(self) -> int:
        return len(self._shape)

    def _rows(self, i: int, wanted: np.ndarray) -> np.ndarray:
        """Store rows of frames ``wanted`` of video ``i`` (see :func:`stored_frames`)."""
        wanted, step = np.asarray(wanted, np.int64), self.frame_step
        last = int(self._num_frames[i]) - 1
        missing = (wanted % step != 0) & (wanted != last)
        if missing.any():
            raise ValueError(
                f"frame {int(wanted[missing][0])} of video {i} is not in the clip store in "
                f"{self.directory}, which holds every {step}-th frame: the clips must start on "
                "multiples of the stride (input.starts_on_stride=True, as when it was written).")
        return np.where(wanted == last, int(self._shape[i][0]) - 1, wanted // step)

    def frames(self, i: int, wanted: np.ndarray) -> np.ndarray:
        """Frames ``wanted`` (source indices) of video ``i``: uint8 ``[n, h, w, 3]`` (a copy)."""
        r, h, w = (int(x) for x in self._shape[i])
        start = int(self._frame_offset[i])
        rows = self._rows(i, wanted)
        return self._frames[start:start + r * h * w * 3].reshape(r, h, w, 3)[rows]

    def masks(self, i: int, wanted: np.ndarray) -> np.ndarray:
        """Resized masks of frames ``wanted`` of video ``i``: uint8 ``[n, h, w]`` (a copy)."""
        if self._masks is None:
            raise ValueError(f"the clip store in {self.directory} holds no masks.")
        r, h, w = (int(x) for x in self._shape[i])
        start = int(self._mask_offset[i])
        return self._masks[start:start + r * h * w].reshape(r, h, w)[self._rows(i, wanted)]
