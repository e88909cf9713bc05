"""Algorithm 1 of Schneider et al. 2024b on one video (:func:`anonymize_video`) and on a folder
(:func:`anonymize_folder`), writing the layout ``train.py`` reads.

Output, for each source video ``<src>/<key>``:

* ``<dst>/<key stem>.mkv``: the anonymised video under the same relative path, named for its
  container (:func:`output_name`). ``store="lossless"`` (default) writes FFV1 ``bgr0`` in
  Matroska (``.mkv``): decord and PyAV read it back bit-exactly. ``store="h264"``: H.264
  (crf 18) in MP4 (``.mp4``), and the public mask is eroded by ``codec_margin`` px more; not a
  guarantee (:mod:`maskdp_jax.anonymize`). Split files that name the source (UCF-101's
  ``trainlist01.txt`` names ``.avi``) still find it: the layouts read a listed video's
  ``.mkv`` / ``.mp4`` output where the listed file is missing (:mod:`maskdp_jax.data.layouts`).
  Outputs of earlier releases, written under the source's name whatever their container, are
  still read, and a rerun renames them to :func:`output_name` instead of redoing them.
* ``<mask_dir>/<key stem>.npz``: uint8 ``[T, H, W]`` under ``mask``, 1 = public (the eroded
  avatar region), and ``<mask_dir>/<key stem>.json``: the video's summary, whose ``outputs``
  names the files written for it, relative to their folders.
* ``<dst>/summary.json``: every video's summary (public fraction, the frames whose written mask
  has no public pixel, what the segmenter read), the videos in which no person was found, and the
  settings.

A video in which no person is left after the cleanup (none found, or the cleanup's temporal vote
removed every one) is written unchanged with an all-private mask, so MaskDP treats it as DP-SGD
would, and listed as such (``refuse_no_person=True`` stops the run there instead).

Optional outputs, for the papers' other rows (configs point at them):

* ``<background_dir>/<key stem>.mkv`` (``background_dir``; ``.mp4`` for ``store="h264"``):
  the *inpainted background*, the video with the person removed and no avatar (Schneider et al.
  2024b Table 3, "Inpainted Background"; ``--config.view= background`` with
  ``--config.input.background_dir``). Every pixel of it is private (the room).
* ``<person_dir>/<key stem>.npz`` (``person_dir``): the cleaned person mask, uint8 ``[T, H, W]``
  under ``mask``, 1 = person. As a training ``mask_dir`` over the *source* videos it makes the
  person public and the rest private: Schneider et al. 2024a's "Real World MaskDP" rows, which
  protect only the background of unanonymised videos (the person is then not protected at all).

Memory does not grow with a video's length: a file is decoded, anonymised and written a window
of frames at a time, in two passes (:func:`run_stages`, :func:`anonymize_file`; measured by
``python -m benchmarks.anonymize_memory``). Files are written to a temporary name and renamed,
so an interrupted run leaves no half file; a run killed outright (``kill -9``) leaves that
temporary file, which the next run into the same folders removes (only those of the files it
writes). A second run skips videos whose outputs exist and were made from the same source file
(size, modification time and probe) with the same settings (``overwrite=True`` redoes them); a
changed source is redone. One run at a time per output folder: a second one at once would remove
the first's temporary files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import warnings
import zipfile
import zlib
from fractions import Fraction

import numpy as np

from maskdp_jax.anonymize import avatar as avatar_lib
from maskdp_jax.anonymize import cleanup, compose, inpaint, model_files, segment
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.stages import (
    READS,
    REFINER_READS,
    Avatar,
    Cleanup,
    Inpainter,
    InputError,
    NoRefinement,
    PoseStage,
    Refiner,
    Renderer,
    Segmenter,
    check_reads,
)
from maskdp_jax.data import atomic, decode
from maskdp_jax.data.decode import MASK_VIDEO_EXTENSIONS
from maskdp_jax.data.layouts import ANONYMISED_EXTENSIONS, VIDEO_EXTENSIONS

STORES = ("lossless", "h264")


@dataclasses.dataclass(frozen=True)
class Stages:
    """The pluggable stages (:mod:`maskdp_jax.anonymize.stages`); ``poses`` None: the renderer gets
    the person mask only (the silhouette avatar)."""

    segmenter: Segmenter
    cleanup: Cleanup = cleanup.MaskCleanup()
    inpainter: Inpainter = inpaint.TemporalMedian()
    renderer: Renderer = avatar_lib.ProceduralAvatar()
    refiner: Refiner = NoRefinement()
    poses: PoseStage | None = None

    def __post_init__(self):
        check_reads(self.segmenter.reads, allowed=READS, what="the segmenter")
        if self.poses is not None:
            check_reads(self.poses.reads, allowed=READS, what="the pose stage")
        check_reads(self.refiner.reads, allowed=REFINER_READS, what="the refiner")


@dataclasses.dataclass(frozen=True)
class Options:
    """Settings of the pipeline around the stages.

    Attributes:
      blend_sigma: std (px) of the avatar's compositing edge; the public mask is the avatar
        region eroded by ⌈3 σ⌉ px.
      tubelet_pad / tubelet_window: ``C``'s crop padding (px) and smoothing window (frames).
      store: ``"lossless"`` or ``"h264"`` (module docstring).
      codec_margin: extra erosion (px) of the public mask under ``store="h264"``.
      max_reads: the most a segmenter may read (:data:`maskdp_jax.anonymize.stages.READS`); e.g.
        ``"boxes"`` refuses background subtraction, whose mask depends on the background.
      refuse_no_person: stop at a video in which no person is left after the cleanup
        (:class:`NoPersonError`; the command exits 2, later videos are not done) instead of
        writing it unchanged with an all-private mask (the default: MaskDP then treats the whole
        video as DP-SGD would) and listing it in the summary. It changes no output, so a resume
        does not compare it.
      chunk_frames: frames read, segmented and composed at once (:func:`run_stages`: memory).
    """

    blend_sigma: float = 1.5
    tubelet_pad: int = 8
    tubelet_window: int = 9
    store: str = "lossless"
    codec_margin: int = 16
    max_reads: str = "video"
    refuse_no_person: bool = False
    chunk_frames: int = 16

    def __post_init__(self):
        if self.store not in STORES:
            raise InputError(f"store must be one of {STORES}; got {self.store!r}.")
        check_reads(self.max_reads, allowed=READS, what="max_reads")
        if self.blend_sigma < 0 or self.tubelet_pad < 0 or self.tubelet_window < 1 or \
                self.codec_margin < 0 or self.chunk_frames < 1:
            raise InputError("blend_sigma, tubelet_pad and codec_margin must be >= 0, "
                             "tubelet_window and chunk_frames >= 1.")


@dataclasses.dataclass(frozen=True)
class Result:
    """One anonymised video: ``video`` uint8 ``[T, H, W, 3]``, ``public`` bool ``[T, H, W]``
    (True = public), the cleaned ``person`` mask, the ``avatar_region``, the ``summary`` and,
    when asked for, the inpainted ``background`` (uint8 ``[T, H, W, 3]``: the person removed, no
    avatar; private)."""

    video: np.ndarray
    public: np.ndarray
    person: np.ndarray
    avatar_region: np.ndarray
    summary: dict
    background: np.ndarray | None = None


class NoPersonError(InputError):
    """No person is left in any frame of a video (``Options.refuse_no_person``)."""


def anonymize_video(video: np.ndarray, key: str, stages: Stages, options: Options, *,
                    in_place: bool = False, with_background: bool = False) -> Result:
    """Algorithm 1 on one video (uint8 ``[T, H, W, 3]``) held in memory; see the package
    docstring for what the returned public mask means. The same computation as
    :func:`anonymize_file`, which reads a file and writes its outputs in windows of frames
    (:func:`run_stages`), here with whole-video arrays in and out.

    Memory: besides the video (3 bytes per pixel and frame) and the output (3 bytes, none with
    ``in_place=True``, which writes the output over ``video``), the whole-video arrays are bool
    masks (the cleaned person mask, the avatar region and the public mask: 3 bytes; the
    stages' own memory is :func:`run_stages`'s). ``with_background`` also keeps the inpainted
    background (3 bytes more).

    A video in which no person is left after the cleanup (the segmenter found none, or the
    cleanup's vote removed every one) comes back unchanged with an all-private mask (the stages
    after the cleanup do not run; ``summary["no_person_found"]`` is True).

    Raises:
      NoPersonError: no person is left and ``options.refuse_no_person``.
      InputError: the segmenter reads more than ``options.max_reads`` or a stage returns a
        wrong array.
    """
    video = np.asarray(video)
    if video.ndim != 4 or video.shape[-1] != 3 or video.dtype != np.uint8:
        raise InputError(f"{key}: video must be uint8 [T, H, W, 3]; got {video.dtype} "
                         f"{video.shape}.")
    out = video if in_place else np.empty_like(video)
    masks = {name: np.empty(video.shape[:3], bool) for name in ("public", "person", "region")}
    background = np.empty_like(video) if with_background else None

    def write(lo: int, frames: Frames) -> None:
        hi = lo + len(frames.output)
        out[lo:hi] = frames.output
        for name, array in masks.items():
            array[lo:hi] = getattr(frames, name)
        if background is not None:
            background[lo:hi] = frames.background

    def windows(size: int):
        return (video[lo:lo + size] for lo in range(0, len(video), size))

    summary = run_stages(windows, video.shape[:3], key, stages, options, write,
                         with_background=with_background)
    return Result(out, masks["public"], masks["person"], masks["region"], summary, background)


@dataclasses.dataclass(frozen=True)
class Frames:
    """A window of the outputs of :func:`run_stages`: ``source`` and ``output`` uint8 ``[n, H,
    W, 3]``, bool ``[n, H, W]`` ``public`` mask, cleaned ``person`` mask and avatar ``region``,
    and the inpainted ``background`` (uint8, private; None unless asked for)."""

    source: np.ndarray
    output: np.ndarray
    public: np.ndarray
    person: np.ndarray
    region: np.ndarray
    background: np.ndarray | None


def run_stages(windows, shape: tuple[int, int, int], key: str, stages: Stages,
               options: Options, write, *, with_background: bool = False) -> dict:
    """Algorithm 1 on a video read a window of frames at a time, in two passes over it.

    Args:
      windows: ``windows(n)`` -> an iterator over the video's frames, ``n`` at a time, from the
        first (uint8 ``[n, H, W, 3]``, the last window shorter); called once per pass.
      shape: ``(T, H, W)``, the video's frame count and size.
      key: the video's name (its path relative to the source folder).
      stages, options: the pipeline's.
      write: ``write(lo, frames)``, called with each window of outputs (:class:`Frames`) in
        order, ``lo`` its first frame.
      with_background: also hand ``write`` the inpainted background.

    Returns:
      the video's summary.

    The first pass segments (:class:`maskdp_jax.anonymize.stages.SegmenterStream`), cleans and
    renders the avatar's region, linking its blobs into tracks
    (:class:`maskdp_jax.anonymize.compose.BlobTracks`) and keeping the frames the inpainter fits
    on; the person and region masks go to a temporary
    file, bit-packed and compressed. The second reads the frames again and composes them in
    chunks of ``options.chunk_frames``. Each chunk's cleanup reads ``temporal_radius`` frames of
    masks on either side, so every output equals the whole video's at once. Memory therefore
    does not grow with the video's length: a chunk of frames, the segmenter's own window
    (:class:`maskdp_jax.anonymize.segment.FacePeopleStream`: ``max_gap`` frames), the
    inpainter's fitting frames (:meth:`maskdp_jax.anonymize.inpaint.TemporalMedian.fit_frames`:
    64) and per-frame boxes and poses. Except where a stage needs the whole video: a segmenter
    without a ``stream`` method, a pose stage other than the segmenter's that reads frames, a
    cleanup without a ``temporal_radius`` or an inpainter with a ``fit`` but no ``fit_frames``
    is given the whole video, held in memory.
    """
    t, h, w = shape
    for name, stage in (("segmenter", stages.segmenter), ("pose stage", stages.poses)):
        if stage is not None and READS.index(stage.reads) > READS.index(options.max_reads):
            raise InputError(
                f"the {name} reads {stage.reads!r}, more than max_reads={options.max_reads!r} "
                "allows: its output (public: the mask and the avatar) would depend on pixels "
                "outside what you allowed. Use masks (and poses) from files or person boxes, or "
                "raise max_reads.")
    if options.store == "h264" and (h % 2 or w % 2):
        raise InputError(f"{key}: store='h264' needs even frame sizes (yuv420p); got "
                         f"{w}x{h}. Use store='lossless'.")
    chunk = options.chunk_frames
    radius = getattr(stages.cleanup, "temporal_radius", None)
    fit = getattr(stages.inpainter, "fit", None)
    fit_frames = getattr(stages.inpainter, "fit_frames", None)
    sample = (np.arange(t) if fit is not None and fit_frames is None else
              np.asarray(fit_frames(t), np.int64) if fit is not None else np.zeros(0, np.int64))
    # the inpainter's fitting frames and their cleaned masks, by index
    kept_frames: dict[int, np.ndarray] = {}
    kept_masks: dict[int, np.ndarray] = {}
    segmentation = _Segmentation(stages, key, shape)
    with _MaskFile(h, w) as q_file, _MaskFile(h, w) as region_file:
        segmented: list[bool] = []
        poses: list[np.ndarray] | None = (
            None if stages.poses is None else list(segmentation.poses_first or []))
        cleaned_frames = np.zeros(t, bool)
        person_pixels = 0
        linker = compose.BlobTracks()
        ids: list[np.ndarray] = []
        whole_cleanup = None  # (cleaned, alpha) of a cleanup run on the whole video
        done = 0  # frames cleaned and rendered

        def take(q: np.ndarray, found: list[np.ndarray]) -> None:
            if q.shape[1:] != (h, w) or q.dtype != np.bool_:
                raise InputError(f"{key}: the segmenter returned {q.dtype} {q.shape}; expected "
                                 f"bool masks of {h}x{w} frames.")
            q_file.append(q)
            segmented.extend(q.any(axis=(1, 2)).tolist())
            if poses is not None:
                poses.extend(found)

        def clean_and_render(until: int) -> None:
            """Clean and render the frames whose cleanup has all its frames (``until``)."""
            nonlocal done, person_pixels, whole_cleanup
            while done < until:
                lo, hi = done, min(done + chunk, until)
                if radius is None:
                    if whole_cleanup is None:
                        whole_cleanup = stages.cleanup(q_file.read(0, t))
                    cleaned = whole_cleanup[0][lo:hi]
                else:
                    cleaned = _clean_chunk(stages.cleanup, q_file, lo, hi, radius, t)[0]
                cleaned_frames[lo:hi] = cleaned.any(axis=(1, 2))
                person_pixels += int(cleaned.sum())
                for i in sample[(sample >= lo) & (sample < hi)]:
                    kept_masks[int(i)] = cleaned[i - lo]
                region = _render(stages, key, cleaned, poses, lo, hi).region
                region_file.append(region)
                ids.extend(linker.add(frame) for frame in region)
                done = hi

        read = 0
        for frames in windows(chunk):
            for i in sample[(sample >= read) & (sample < read + len(frames))]:
                kept_frames[int(i)] = frames[i - read].copy()
            read += len(frames)
            take(*segmentation.push(frames))
            if radius is not None:
                clean_and_render(max(len(segmented) - radius, 0))
        take(*segmentation.close())
        if read != t or len(segmented) != t:
            raise InputError(f"{key}: {read} frames were read and the segmenter returned "
                             f"{len(segmented)} masks; the video has {t} frames (a probe "
                             "that miscounts, or a segmenter stream that lost frames).")
        if poses is not None:
            poses = pose_lib.check_poses(poses, t, key)
        clean_and_render(t)
        no_person = not cleaned_frames.any()
        if no_person:
            found = (f"no person found in any of its {t} frames" if not any(segmented) else
                     "the cleanup's temporal vote (cleanup.window) removed every person the "
                     f"segmenter found (in {int(sum(segmented))} of its {t} frames)")
            if options.refuse_no_person:
                raise NoPersonError(
                    f"{key}: {found}. Nothing to anonymise: its mask would be all private. "
                    "Check the segmenter (configs/anonymize.py: segment.method), or leave "
                    "refuse_no_person=False to write it unchanged with an all-private mask.")
        else:
            crops = linker.tubelets((h, w), pad=options.tubelet_pad,
                                    window=options.tubelet_window)
            inpainter = stages.inpainter
            if fit is not None:
                inpainter = fit(np.stack([kept_frames[int(i)] for i in sample]),
                                np.stack([kept_masks[int(i)] for i in sample]))
            kept_frames.clear()
            kept_masks.clear()
        margin = options.codec_margin if options.store == "h264" else 0
        public_pixels, without_person, lo = 0, [], 0
        for frames in windows(chunk):
            hi = lo + len(frames)
            if no_person:
                nothing = np.zeros(frames.shape[:3], bool)
                out = Frames(frames, frames.copy(), nothing, nothing, nothing,
                             frames.copy() if with_background else None)
            else:
                out = _compose(stages, options, key, frames, lo, q_file, region_file, radius,
                               whole_cleanup, poses, ids, crops, inpainter, margin,
                               with_background, t)
            public_pixels += int(out.public.sum())
            without_person += (lo + np.flatnonzero(~out.public.any(axis=(1, 2)))).tolist()
            write(lo, out)
            lo = hi
        if lo != t:
            raise InputError(f"{key}: the second pass read {lo} frames; the first read {t}.")
    return {
        "frames": int(t),
        "size": [int(h), int(w)],
        "public_fraction": public_pixels / (t * h * w),
        "person_fraction": person_pixels / (t * h * w),
        "no_person_found": no_person,
        # read off the written mask: a person the vote removed, or one too thin to keep a pixel
        # after the blend's erosion, counts as not found there (the segmenter's own count next)
        "frames_without_person": without_person,
        "frames_without_segmented_person": np.flatnonzero(~np.asarray(segmented)).tolist(),
        "tubelets": 0 if no_person else len(crops),
        "segmenter": type(stages.segmenter).__name__,
        "segmenter_reads": stages.segmenter.reads,
        "pose_reads": None if stages.poses is None else stages.poses.reads,
        "frames_with_pose": (None if stages.poses is None else
                             0 if no_person else int(sum(len(p) > 0 for p in poses))),
        "refiner_reads": stages.refiner.reads,
        "store": options.store,
    }


def _compose(stages: Stages, options: Options, key: str, frames: np.ndarray, lo: int,
             q_file: _MaskFile, region_file: _MaskFile, radius: int | None, whole_cleanup,
             poses, ids, crops, inpainter, margin: int, with_background: bool,
             t: int) -> Frames:
    """The second pass on one chunk of frames ``lo .. lo + len(frames) - 1``: inpaint, render,
    merge, ``G`` and ``K``, and the public mask."""
    hi = lo + len(frames)
    cleaned, alpha = (_clean_chunk(stages.cleanup, q_file, lo, hi, radius, t)
                      if radius is not None else
                      (whole_cleanup[0][lo:hi], whole_cleanup[1][lo:hi]))
    removed = np.asarray(inpainter(frames, cleaned))
    if removed.shape != frames.shape or not np.all(np.isfinite(removed)):
        raise InputError(f"{key}: the inpainter returned {removed.dtype} {removed.shape} "
                         "with non-finite values or a shape other than the video's "
                         f"{frames.shape}.")
    background = alpha[..., None] * removed + (1 - alpha[..., None]) * frames
    del removed
    region = region_file.read(lo, hi)
    tracks = (compose.track_map(region, ids[lo:hi])
              if getattr(stages.renderer, "per_track", False) else None)
    avatar = _render(stages, key, cleaned, poses, lo, hi, tracks=tracks)
    if not np.array_equal(avatar.region, region):
        raise InputError(f"{key}: the renderer returned another region for the same input: "
                         "it must be deterministic (it is called once per pass).")
    merged = compose.merge(background, avatar, options.blend_sigma)
    inpainted = (np.clip(np.rint(background), 0, 255).astype(np.uint8) if with_background
                 else None)
    del background
    composed, touched = compose.refine_and_compose(
        merged, avatar, cleaned, _chunk_tubelets(crops, lo, hi), stages.refiner,
        options.blend_sigma)
    del merged
    public = compose.public_mask(avatar.region, options.blend_sigma,
                                 codec_margin=margin) & ~touched
    return Frames(frames, np.clip(np.rint(composed), 0, 255).astype(np.uint8), public, cleaned,
                  region, inpainted)


def _render(stages: Stages, key: str, cleaned: np.ndarray, poses, lo: int, hi: int, *,
            tracks: np.ndarray | None = None) -> Avatar:
    """The renderer on frames ``lo .. hi - 1``, its output checked."""
    extra = {} if tracks is None else {"tracks": tracks}
    avatar = (stages.renderer(cleaned, **extra) if poses is None
              else stages.renderer(cleaned, poses[lo:hi], **extra))
    if (avatar.region.shape != cleaned.shape or avatar.region.dtype != np.bool_
            or avatar.rgb.shape != (*cleaned.shape, 3) or not np.all(np.isfinite(avatar.rgb))):
        raise InputError(f"{key}: the renderer must return a bool region {cleaned.shape} and "
                         f"finite colours {(*cleaned.shape, 3)}; got {avatar.region.dtype} "
                         f"{avatar.region.shape} and {avatar.rgb.shape}.")
    return avatar


class _Segmentation:
    """The segmenter (and the pose stage) over a stream of windows: the segmenter's own
    ``stream`` where it has one and the poses come from it or read no pixel (files: read once,
    before any frame, as :attr:`poses_first`); else the whole video, held, handed over at
    :meth:`close`. A stage that reads no pixel is handed a blank video of the shape (its
    declaration then holds by construction)."""

    def __init__(self, stages: Stages, key: str, shape: tuple[int, int, int]):
        self.stages, self.key, self.shape = stages, key, shape
        segmenter, pose_stage = stages.segmenter, stages.poses
        own_poses = (isinstance(pose_stage, segment.SegmenterPoses)
                     and pose_stage.segmenter is segmenter)
        streams = (hasattr(segmenter, "stream") and segmenter.reads != "none"
                   and (pose_stage is None or own_poses or pose_stage.reads == "none"))
        self.stream = segmenter.stream(key) if streams else None
        self.own_poses = own_poses
        self.poses_first = None
        if self.stream is not None and pose_stage is not None and not own_poses:
            self.poses_first = pose_lib.check_poses(
                list(pose_stage(self._blank(), key)), shape[0], key)
        self.held: list[np.ndarray] = []  # the frames, without a stream

    def push(self, frames: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        if self.stream is not None:
            q, found = self.stream.push(frames)
            return q, found if self.own_poses else []
        if self._reads_frames():
            self.held.append(frames)
        return np.zeros((0, *self.shape[1:]), bool), []

    def close(self) -> tuple[np.ndarray, list[np.ndarray]]:
        if self.stream is not None:
            q, found = self.stream.close()
            return q, found if self.own_poses else []
        stages, key, blank = self.stages, self.key, self._blank()
        video = np.concatenate(self.held) if self.held else blank
        self.held = []
        q = np.asarray(stages.segmenter(blank if stages.segmenter.reads == "none" else video,
                                        key))
        if q.shape != self.shape or q.dtype != np.bool_:
            raise InputError(f"{key}: the segmenter returned {q.dtype} {q.shape}; expected bool "
                             f"{self.shape}.")
        found = []
        if stages.poses is not None:
            found = list(stages.poses(blank if stages.poses.reads == "none" else video, key))
        return q, found

    def _blank(self) -> np.ndarray:
        return np.broadcast_to(np.uint8(0), (*self.shape, 3))

    def _reads_frames(self) -> bool:
        stages = self.stages
        return stages.segmenter.reads != "none" or (
            stages.poses is not None and stages.poses.reads != "none")


class _MaskFile:
    """bool ``[T, H, W]`` masks appended a window at a time and read back by frame range, held
    in a temporary file (each frame bit-packed and zlib-compressed; a person mask compresses
    to a few hundred bytes), so that the pipeline's memory does not grow with the video."""

    def __init__(self, h: int, w: int):
        self.h, self.w = h, w
        self.offsets = [0]

    def __enter__(self) -> _MaskFile:
        self.file = tempfile.TemporaryFile()
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    def append(self, masks: np.ndarray) -> None:
        self.file.seek(self.offsets[-1])
        for frame in masks:
            data = zlib.compress(np.packbits(frame).tobytes(), 1)
            self.file.write(data)
            self.offsets.append(self.offsets[-1] + len(data))

    def read(self, lo: int, hi: int) -> np.ndarray:
        out = np.empty((hi - lo, self.h, self.w), bool)
        self.file.seek(self.offsets[lo])
        for i in range(lo, hi):
            data = self.file.read(self.offsets[i + 1] - self.offsets[i])
            bits = np.frombuffer(zlib.decompress(data), np.uint8)
            out[i - lo] = np.unpackbits(bits, count=self.h * self.w).reshape(self.h, self.w)
        return out


def _clean_chunk(cleanup_stage: Cleanup, q: _MaskFile, lo: int, hi: int, radius: int, t: int):
    """The cleanup of frames ``lo:hi``, run on them and ``radius`` frames either side (what a
    temporal window of that radius reads), so the result equals the whole video's cleanup."""
    a, b = max(lo - radius, 0), min(hi + radius, t)
    cleaned, alpha = cleanup_stage(q.read(a, b))
    return cleaned[lo - a: hi - a], alpha[lo - a: hi - a]


def _chunk_tubelets(crops: list[compose.Tubelet], lo: int, hi: int) -> list[compose.Tubelet]:
    """The parts of ``crops`` in frames ``lo:hi``, their starts relative to ``lo``."""
    out = []
    for tube in crops:
        a, b = max(tube.start, lo), min(tube.start + len(tube.boxes), hi)
        if a < b:
            out.append(compose.Tubelet(a - lo, tube.boxes[a - tube.start: b - tube.start]))
    return out


def find_videos(src: str) -> list[str]:
    """Keys (paths relative to ``src``, sorted) of the video files under ``src``."""
    if not os.path.isdir(src):
        raise InputError(f"{src}: source video directory not found.")
    keys = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        keys += [os.path.relpath(os.path.join(root, f), src) for f in sorted(files)
                 if f.lower().endswith(VIDEO_EXTENSIONS)]
    if not keys:
        raise InputError(f"{src}: no video files ({', '.join(VIDEO_EXTENSIONS)}).")
    return keys


def read_video(path: str) -> np.ndarray:
    """Every frame of ``path`` at its own size, uint8 ``[T, H, W, 3]`` (PyAV);
    :class:`maskdp_jax.data.decode.BadVideoError` if it cannot be read."""
    info = decode.probe_video(path, decoder="pyav")
    return decode.read_video(path, np.arange(info.num_frames), size=(info.height, info.width),
                             decoder="pyav")


def write_video(path: str, frames: np.ndarray, *, store: str, fps: float = 25) -> None:
    """Write uint8 ``[T, H, W, 3]`` atomically (temporary file, then rename): FFV1 ``bgr0`` in
    Matroska (lossless) or H.264 crf 18 in MP4, whatever ``path``'s extension
    (:func:`video_writer`)."""
    with video_writer(path, frames.shape[1:3], store=store, fps=fps) as write:
        write(frames)


@contextlib.contextmanager
def video_writer(path: str, size: tuple[int, int], *, store: str, fps: float = 25):
    """``with video_writer(path, (H, W), store=...) as write:`` ``write(frames)`` (uint8 ``[n, H,
    W, 3]``) as many times as there are windows; the video replaces ``path`` on a normal exit
    (atomically), and nothing is left on an exception. FFV1 ``bgr0`` in Matroska (lossless) or
    H.264 crf 18 in MP4."""
    import av

    lossless = store == "lossless"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with (atomic.replacing(path) as tmp,
          av.open(tmp, "w", format="matroska" if lossless else "mp4") as container):
        stream = container.add_stream("ffv1" if lossless else "libx264",
                                      rate=Fraction(fps).limit_denominator(1001))
        stream.height, stream.width = size
        stream.pix_fmt = "bgr0" if lossless else "yuv420p"
        if not lossless:
            stream.options = {"crf": "18"}

        def write(frames: np.ndarray) -> None:
            for frame in frames:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))

        yield write
        container.mux(stream.encode())


@contextlib.contextmanager
def mask_writer(path: str, shape: tuple[int, int, int]):
    """``with mask_writer(path, (T, H, W)) as write:`` ``write(masks)`` (bool ``[n, H, W]``) in
    order until ``T`` frames: the ``.npz`` ``train.py`` reads (uint8 ``mask``, what
    :func:`numpy.savez_compressed` writes, deflated), written a window at a time; it replaces
    ``path`` on a normal exit, nothing is left on an exception or if fewer than ``T`` frames
    came. NumPy's own savez needs the whole array; this writes the same ``.npy`` member
    (``numpy.lib.format.write_array_header_1_0``) through ``zipfile``, in pieces."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    written = 0

    with (atomic.replacing(path) as tmp,
          zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive,
          archive.open("mask.npy", "w", force_zip64=True) as member):
        np.lib.format.write_array_header_1_0(
            member, {"descr": np.dtype(np.uint8).str, "fortran_order": False,
                     "shape": tuple(int(n) for n in shape)})

        def write(masks: np.ndarray) -> None:
            nonlocal written
            member.write(np.ascontiguousarray(masks, np.uint8).tobytes())
            written += len(masks)

        yield write
        if written != shape[0]:
            raise ValueError(f"{path}: {written} mask frames were written of {shape[0]}.")


#: The file extension of each ``store``'s container (:func:`write_video`): the layouts' own
#: table, so that a split file naming the source finds the output.
CONTAINER_EXTENSIONS = ANONYMISED_EXTENSIONS


def output_name(key: str, store: str) -> str:
    """The relative name an anonymised video of source ``key`` is written under: the source's
    path and stem with its container's extension (:data:`CONTAINER_EXTENSIONS`), so that a tool
    that goes by the name reads FFV1 in Matroska as ``.mkv``."""
    return os.path.splitext(key)[0] + CONTAINER_EXTENSIONS[store]


def _save(path: str, content: bytes | str) -> None:
    """Atomically write ``content`` to ``path``, making its directory."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    atomic.write(path, content)


def _fps(path: str) -> float:
    import av

    with av.open(path) as container:
        rate = container.streams.video[0].average_rate
    return float(rate) if rate else 25.0


def preview_frames(num_frames: int, frames: int = 5) -> np.ndarray:
    """Indices of the ``frames`` evenly spaced frames a preview shows."""
    return np.linspace(0, num_frames - 1, frames).round().astype(int)


PREVIEW_ROWS = ("source", "anonymised", "public mask")
PREVIEW_HEADER = 20  # pixels above the frames: each column's frame number
PREVIEW_MARGIN = 92  # pixels left of the frames: each row's name


def preview(source: np.ndarray, result: Result, *, frames: int = 5) -> np.ndarray:
    """uint8 ``[PREVIEW_HEADER + 3 H, PREVIEW_MARGIN + frames W, 3]`` RGB: ``frames`` evenly
    spaced frames of the source (top row), the anonymised video (middle) and the public mask
    (bottom, white = public), each row named on the left and each column headed by its frame
    number (:func:`label_strip`). ``source`` is the whole source video or just those frames
    (:func:`preview_frames`)."""
    idx = preview_frames(len(result.video), frames)
    shown = source if len(source) == len(idx) != len(result.video) else source[idx]
    return preview_strip(shown, result.video[idx], result.public[idx], idx)


def preview_strip(source: np.ndarray, output: np.ndarray, public: np.ndarray,
                  idx: np.ndarray) -> np.ndarray:
    """:func:`preview`'s strip from the frames ``idx`` alone: uint8 ``[n, H, W, 3]`` source and
    output frames and their bool ``[n, H, W]`` public masks."""
    mask = np.repeat(public[..., None], 3, axis=-1).astype(np.uint8) * 255
    rows = [np.concatenate(list(a), axis=1) for a in (source, output, mask)]
    return label_strip(np.concatenate(rows, axis=0), frame_indices=idx)


def label_strip(strip: np.ndarray, *, frame_indices, row_names=PREVIEW_ROWS) -> np.ndarray:
    """``strip`` (uint8 ``[R H, F W, 3]``: R rows of F frames) with a white margin: each row's
    name on the left, ``frame <i>`` above each column, so a strip read on its own says what it
    shows."""
    from maskdp_jax.anonymize.opencv import cv2

    cv = cv2()
    height, width = strip.shape[0] // len(row_names), strip.shape[1] // len(frame_indices)
    out = np.full((PREVIEW_HEADER + strip.shape[0], PREVIEW_MARGIN + strip.shape[1], 3), 255,
                  np.uint8)
    out[PREVIEW_HEADER:, PREVIEW_MARGIN:] = strip
    font, scale = cv.FONT_HERSHEY_SIMPLEX, 0.4
    for r, name in enumerate(row_names):
        y = PREVIEW_HEADER + r * height + height // 2 + 4
        cv.putText(out, name, (4, y), font, scale, (0, 0, 0), 1, cv.LINE_AA)
    for c, frame in enumerate(frame_indices):
        x = PREVIEW_MARGIN + c * width + 4
        cv.putText(out, f"frame {int(frame)}", (x, 14), font, scale, (0, 0, 0), 1, cv.LINE_AA)
    return out


def source_signature(path: str) -> dict:
    """What a resume compares to notice a replaced source: its size in bytes, modification time
    (ns), probe (frames, height, width) and the SHA-256 of its bytes. The digest catches a
    source replaced by another of the same size whose modification time was kept (a copy with
    ``cp -p`` or ``rsync -t``); reading the file once more costs little next to decoding it."""
    st = os.stat(path)
    info = decode.probe_video(path, decoder="pyav")
    return {"bytes": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "frames": int(info.num_frames), "height": int(info.height),
            "width": int(info.width), "sha256": model_files.sha256(path)}


def anonymize_folder(src: str, dst: str, mask_dir: str, stages: Stages, options: Options, *,
                     overwrite: bool = False, skip_bad: bool = False, preview_dir: str = "",
                     progress: bool = True, background_dir: str = "",
                     person_dir: str = "") -> dict:
    """Anonymise every video under ``src`` (module docstring for what is written).

    Every source video is probed first: an unreadable one stops the run before anything is
    written (``skip_bad=True`` leaves it out and lists it in the summary instead). A video with
    no person left after the cleanup is written unchanged with an all-private mask and listed
    under ``videos_no_person_found`` (with ``options.refuse_no_person`` it raises
    :class:`NoPersonError` instead: videos already written stay, and a rerun resumes). Temporary
    files that a killed run left for this run's outputs are removed. ``dst`` and ``mask_dir``
    must differ from ``src``. ``preview_dir``: also write ``<preview_dir>/<key stem>.png``
    (:func:`preview`) for each video processed.

    Returns:
      the summary written to ``<dst>/summary.json``.
    """
    keys = find_videos(src)
    _check_output_dirs(src, dst, mask_dir, stages, background_dir=background_dir,
                       person_dir=person_dir)
    stems: dict[str, str] = {}
    for key in keys:
        stem = os.path.splitext(key)[0]
        if stem in stems:
            raise InputError(f"{stems[stem]} and {key} would share the mask {stem}.npz (masks "
                             "mirror the path without its extension); rename one.")
        stems[stem] = key
        shadows = [os.path.join(mask_dir, stem) + ext for ext in (".npy", *MASK_VIDEO_EXTENSIONS)
                   if os.path.isfile(os.path.join(mask_dir, stem) + ext)]
        if shadows:  # train.py would read it instead of (or beside) the .npz written here
            raise InputError(f"{shadows[0]} exists: train.py would read it as the mask of {key} "
                             f"instead of the {stem}.npz this run writes (a stale or person "
                             "mask would be trained as public). Remove it or pick another "
                             "--mask_dir. Nothing was written.")
    settings = _settings(stages, options)
    if stages.segmenter.reads == "video" and progress:
        print(f"note: the segmenter {type(stages.segmenter).__name__} reads the whole video "
              "(reads='video'): each public mask and avatar then depends on every pixel of its "
              "video, background included (whatever a detector takes for a person, anywhere in "
              "the frame), not only on the person; masks or boxes from files "
              "(max_reads='boxes') bound that.", flush=True)
    bad = []
    for key in keys:
        try:
            decode.probe_video(os.path.join(src, key), decoder="pyav")
        except decode.BadVideoError as e:
            bad.append((key, str(e)))
    if bad and not skip_bad:
        listed = "\n  ".join(f"{k}: {reason}" for k, reason in bad)
        raise InputError(f"{len(bad)} unreadable source video(s); nothing was written "
                         f"(skip_bad=True leaves them out):\n  {listed}")
    bad_keys = {k for k, _ in bad}

    def outputs(key: str) -> dict[str, str]:
        """What this run writes for ``key``: name -> path."""
        stem, name = os.path.splitext(key)[0], output_name(key, options.store)
        paths = {"video": os.path.join(dst, name), "mask": os.path.join(mask_dir, stem + ".npz"),
                 "summary": os.path.join(mask_dir, stem + ".json")}
        if background_dir:
            paths["background"] = os.path.join(background_dir, name)
        if person_dir:
            paths["person"] = os.path.join(person_dir, stem + ".npz")
        if preview_dir:
            paths["preview"] = os.path.join(preview_dir, stem + ".png")
        return paths

    summary_path = os.path.join(dst, "summary.json")
    # Temporary files a killed run left (atomic writes), by the output they were for; each
    # output's are removed once its video is resumed or redone, never another program's files.
    left_over: dict[str, list[str]] = {}
    for directory in {os.path.dirname(p) for key in keys if key not in bad_keys
                      for p in outputs(key).values()} | {os.path.dirname(summary_path)}:
        left_over.update({os.path.normpath(target): found for target, found in
                          atomic.temporaries(directory).items()})
    removed = 0

    def remove_left_over(paths) -> int:
        found = [t for p in paths for t in left_over.pop(os.path.normpath(p), [])]
        for tmp in found:
            os.remove(tmp)
        return len(found)

    videos = {}
    from tqdm import tqdm

    for key in tqdm(keys, desc="anonymise", unit="video", disable=not progress):
        if key in bad_keys:
            continue
        paths = outputs(key)
        stem = os.path.splitext(paths["mask"])[0]
        out_path = paths["video"]
        source = os.path.join(src, key)
        signature = source_signature(source)
        extra = {k: paths[k] for k in ("background", "person") if k in paths}
        earlier = None
        if os.path.isfile(stem + ".json"):
            with open(stem + ".json") as f:
                earlier = json.load(f)
        if not overwrite and earlier is not None:
            if earlier.get("settings") != settings:
                raise InputError(
                    f"{key}'s outputs were made with other settings than this run's (stages, "
                    "reads, store or options differ; see its summary "
                    f"{stem}.json): rerun with --overwrite, or write to another --dst and "
                    "--mask_dir. Nothing was changed.")
            for old, new in _earlier_videos(earlier, key, paths, dst=dst,
                                            background_dir=background_dir):
                if not os.path.exists(new):  # an earlier release's name: keep the video
                    os.replace(old, new)
            if all(os.path.isfile(p) for p in (out_path, stem + ".npz", *extra.values())):
                if earlier.get("source") == signature:
                    removed += remove_left_over(paths.values())
                    videos[key] = earlier
                    continue
                print(f"{key}: the source changed since its outputs were written (size, "
                      "modification time, probe or content digest differ from its summary): "
                      "anonymised again.", flush=True)
        removed += remove_left_over(paths.values())
        video_summary = anonymize_file(source, key, stages, options, paths)
        if video_summary["no_person_found"] and progress:
            print(f"{key}: no person found; written unchanged with an all-private mask (listed "
                  "in summary.json).", flush=True)
        video_summary["settings"] = settings
        video_summary["source"] = signature
        video_summary["outputs"] = {
            "video": os.path.relpath(out_path, dst), "mask": os.path.relpath(stem + ".npz",
                                                                             mask_dir),
            **{k: os.path.relpath(extra[k], d) for k, d in (("background", background_dir),
                                                            ("person", person_dir))
               if k in extra}}
        _save(stem + ".json", _json(video_summary))  # last: what a resume takes as done
        # An earlier run's videos under other names (another store's container, or an earlier
        # release's source-named file) would stay beside these as a second copy of the video.
        for old, _ in _earlier_videos(earlier or {}, key, paths, dst=dst,
                                      background_dir=background_dir):
            os.remove(old)
        videos[key] = video_summary
    if options.store == "h264":
        warnings.warn("store='h264': the public pixels are not bit-exact functions of public "
                      "information (motion compensation, rate control); the codec margin only "
                      "narrows the leak. Use store='lossless' for the guarantee.", stacklevel=2)
    summary = {
        "src": os.path.abspath(src),
        "videos": videos,
        "skipped_unreadable": [{"key": k, "reason": r} for k, r in bad],
        "settings": settings,
        "segmenter_reads": sorted({v["segmenter_reads"] for v in videos.values()}),
        "public_fraction_mean": float(np.mean([v["public_fraction"] for v in videos.values()]))
        if videos else 0.0,
        "videos_no_person_found": sorted(
            k for k, v in videos.items() if v.get("no_person_found")),
        "videos_with_frames_without_person": sorted(
            k for k, v in videos.items() if v["frames_without_person"]),
    }
    removed += remove_left_over([summary_path])
    if removed and progress:
        print(f"removed {removed} temporary file(s) that an interrupted run left beside this "
              "run's outputs.", flush=True)
    _save(summary_path, _json(summary))
    return summary


def anonymize_file(source: str, key: str, stages: Stages, options: Options,
                   paths: dict[str, str]) -> dict:
    """Algorithm 1 on the video file ``source``, read and written a window of frames at a time
    (:func:`run_stages`: memory does not grow with its length), its outputs written to
    ``paths`` (``"video"`` and ``"mask"``, and, when given, ``"background"`` (the inpainted
    video), ``"person"`` (the cleaned person mask, ``.npz``) and ``"preview"`` (:func:`preview`'s
    strip, ``.png``)), each atomically once complete. Returns the video's summary (not
    written: the caller writes it last).

    Raises:
      maskdp_jax.data.decode.BadVideoError: the file cannot be decoded.
    """
    info = decode.probe_video(source, decoder="pyav")
    shape = (info.num_frames, info.height, info.width)
    fps = _fps(source)
    shown = preview_frames(info.num_frames) if "preview" in paths else np.zeros(0, np.int64)
    strip: dict[int, tuple] = {}
    with contextlib.ExitStack() as outputs:
        write_video_ = outputs.enter_context(
            video_writer(paths["video"], shape[1:], store=options.store, fps=fps))
        write_mask = outputs.enter_context(mask_writer(paths["mask"], shape))
        write_background = (outputs.enter_context(
            video_writer(paths["background"], shape[1:], store=options.store, fps=fps))
            if "background" in paths else None)
        write_person = (outputs.enter_context(mask_writer(paths["person"], shape))
                        if "person" in paths else None)

        def write(lo: int, frames: Frames) -> None:
            write_video_(frames.output)
            write_mask(frames.public)
            if write_background is not None:
                write_background(frames.background)
            if write_person is not None:
                write_person(frames.person)
            for i in shown[(shown >= lo) & (shown < lo + len(frames.output))]:
                strip[int(i)] = (frames.source[i - lo].copy(), frames.output[i - lo].copy(),
                                 frames.public[i - lo].copy())

        summary = run_stages(lambda n: decode.iter_video(source, n), shape, key, stages,
                             options, write, with_background=write_background is not None)
    if "preview" in paths:
        source_frames, output, public = (
            np.stack(a) for a in zip(*(strip[int(i)] for i in shown), strict=True))
        _save(paths["preview"], _png(preview_strip(source_frames, output, public, shown)))
    return summary


def _earlier_videos(earlier: dict, key: str, paths: dict[str, str], *, dst: str,
                    background_dir: str) -> list[tuple[str, str]]:
    """``(earlier path, this run's path)`` of each video (anonymised, background) that the run
    summarised in ``earlier`` (a video's summary; ``{}`` for none) wrote for ``key`` under
    another name than this run's ``paths``, and that still exists: the name its ``outputs``
    records, or, in a summary of an earlier release without it, the source's name
    (``<dst>/<key>``)."""
    if not earlier:
        return []
    named = earlier.get("outputs", {"video": key, "background": key})
    found = []
    for name, folder in (("video", dst), ("background", background_dir)):
        if name not in paths or name not in named or not folder:
            continue
        old = os.path.join(folder, named[name])
        if os.path.normpath(old) != os.path.normpath(paths[name]) and os.path.isfile(old):
            found.append((old, paths[name]))
    return found


def _check_output_dirs(src: str, dst: str, mask_dir: str, stages: Stages, *,
                       background_dir: str = "", person_dir: str = "") -> None:
    src_real = os.path.realpath(src)
    outputs = [(d, n) for d, n in ((dst, "dst"), (mask_dir, "mask_dir"),
                                   (background_dir, "background_dir"),
                                   (person_dir, "person_dir")) if d]
    for out_dir, name in outputs:
        real = os.path.realpath(out_dir)
        if real == src_real or real.startswith(src_real + os.sep):
            raise InputError(f"{name} ({out_dir}) must lie outside the source directory {src}: "
                             "the source videos would be overwritten or read back as sources.")
    for i, (a, name_a) in enumerate(outputs[1:], start=1):
        for b, name_b in outputs[:i]:
            if name_a in ("background_dir", "person_dir") and (
                    os.path.realpath(a) == os.path.realpath(b)):
                raise InputError(f"{name_a} ({a}) must differ from {name_b}: a person mask would "
                                 "be read as a public mask, or a background as the anonymised "
                                 "video.")
    files_dir = getattr(stages.segmenter, "mask_dir", "")
    if files_dir and os.path.realpath(files_dir) == os.path.realpath(mask_dir):
        raise InputError(f"mask_dir must differ from the person-mask folder {files_dir}: "
                         "train.py would read person masks (1 = person) as public masks.")


def _settings(stages: Stages, options: Options) -> dict:
    """What a video's outputs were made with (compared on resume): each stage's class and
    parameters, the segmenter's ``reads``, and the options that change an output (not
    :data:`_OUTPUT_IRRELEVANT`)."""

    def describe(stage) -> dict:
        params = (dataclasses.asdict(stage) if dataclasses.is_dataclass(stage)
                  else dict(getattr(stage, "__dict__", {})))
        return {"class": type(stage).__name__,
                **{k: v for k, v in params.items() if isinstance(v, (str, int, float, bool))}}

    options_out = {k: v for k, v in dataclasses.asdict(options).items()
                   if k not in _OUTPUT_IRRELEVANT}
    return json.loads(json.dumps({
        "stages": {f.name: describe(getattr(stages, f.name)) for f in dataclasses.fields(stages)},
        "segmenter_reads": stages.segmenter.reads,
        "options": options_out,
    }))


# Options that change whether a video is written, never what is written: not compared on resume.
_OUTPUT_IRRELEVANT = ("refuse_no_person",)


def _png(rgb: np.ndarray) -> bytes:
    from maskdp_jax.anonymize.opencv import cv2

    ok, data = cv2().imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:
        raise OSError("PNG encoding failed.")
    return data.tobytes()


def _json(payload: dict) -> str:
    return json.dumps(payload, indent=1) + "\n"


def build_stages(config) -> tuple[Stages, Options]:
    """:class:`Stages` and :class:`Options` from a ``configs/anonymize.py`` config.

    Files given to a method that does not read them are refused
    (:class:`~maskdp_jax.anonymize.stages.InputError`), never ignored: box files
    (``segment.boxes_dir``) need ``segment.method="grabcut"``, person masks
    (``segment.files_dir``) ``"files"``, poses (``pose.files_dir``) ``pose.method="files"``.
    """
    seg = config.segment
    for key, given, method_key, method, reader in (
            ("segment.boxes_dir", seg.boxes_dir, "segment.method", seg.method, "grabcut"),
            ("segment.files_dir", seg.files_dir, "segment.method", seg.method, "files"),
            ("pose.files_dir", config.pose.files_dir, "pose.method", config.pose.method,
             "files")):
        if given and method != reader:
            raise InputError(f"{key}={given!r} is read only by {method_key}={reader!r}; "
                             f"{method_key}={method!r} would ignore it. Set "
                             f"--config.{method_key}={reader}, or leave {key} empty.")
    if seg.method == "centerface":
        segmenter = segment.FacePeople(threshold=seg.face_threshold,
                                       max_side=seg.face_max_side, refine=seg.refine,
                                       bodies=seg.bodies, body_min_height=seg.body_min_height,
                                       body_max_side=seg.body_max_side,
                                       body_threshold=seg.body_threshold,
                                       movenet_side=seg.movenet_side,
                                       movenet_score=seg.movenet_score,
                                       movenet_tiles=seg.movenet_tiles,
                                       presence=seg.presence, edge_people=seg.edge_people,
                                       margin=seg.margin, max_gap=seg.face_max_gap)
    elif seg.method == "grabcut":
        segmenter = segment.GrabCutPeople(boxes_dir=seg.boxes_dir, margin=seg.margin,
                                          max_gap=seg.max_gap)
    elif seg.method == "selfie":
        segmenter = segment.SelfieSegmentation()
    elif seg.method == "background":
        segmenter = segment.BackgroundSubtraction(detector=seg.detector, max_gap=seg.max_gap)
    elif seg.method == "files":
        if not seg.files_dir:
            raise InputError("segment.method='files' needs segment.files_dir (your person masks).")
        segmenter = segment.MaskFiles(seg.files_dir)
    else:
        raise InputError(f"segment.method must be 'centerface', 'grabcut', 'selfie', "
                         f"'background' or 'files'; got {seg.method!r}.")
    if config.pose.method == "segmenter":
        poses = (segment.SegmenterPoses(segmenter) if getattr(segmenter, "refine", "") == "pose"
                 else None)
    elif config.pose.method == "files":
        if not config.pose.files_dir:
            raise InputError("pose.method='files' needs pose.files_dir (your poses).")
        poses = pose_lib.PoseFiles(config.pose.files_dir)
    elif config.pose.method == "none":
        poses = None
    else:
        raise InputError(f"pose.method must be 'segmenter', 'files' or 'none'; got "
                         f"{config.pose.method!r}.")
    inpainters = {"median": inpaint.TemporalMedian, "opencv": inpaint.OpenCVInpaint}
    if config.inpaint not in inpainters:
        raise InputError(f"inpaint must be one of {sorted(inpainters)}; got {config.inpaint!r}.")
    stages = Stages(
        segmenter=segmenter,
        cleanup=cleanup.MaskCleanup(**config.cleanup),
        inpainter=inpainters[config.inpaint](),
        renderer=avatar_lib.ProceduralAvatar(**config.avatar),
        poses=poses,
    )
    options = Options(blend_sigma=config.blend_sigma, tubelet_pad=config.tubelet_pad,
                      tubelet_window=config.tubelet_window, store=config.store,
                      codec_margin=config.codec_margin, max_reads=config.max_reads,
                      refuse_no_person=config.refuse_no_person,
                      chunk_frames=config.chunk_frames)
    return stages, options
