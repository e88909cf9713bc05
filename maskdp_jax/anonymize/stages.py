"""The interfaces of the anonymisation stages (Schneider et al. 2024b, Alg. 1), one small Protocol
each.

Arrays: a video is uint8 ``[T, H, W, 3]`` RGB; a mask is bool ``[T, H, W]``; an alpha is float32
``[T, H, W]`` in [0, 1]; rendered colours are float32 ``[T, H, W, 3]`` in [0, 255].

Each stage declares what it *reads* so that the pipeline can say what the public mask and the
public pixels depend on (package docstring, "What the guarantee covers"):

* :data:`READS` for a segmenter, ordered from least to most: ``"none"`` < ``"boxes"`` <
  ``"video"``.
* a :class:`Refiner` reads ``"avatar"`` (only the avatar's pixels: its output stays public) or
  ``"crop"`` (the whole tubelet crop, background included: its pasted pixels become private).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

#: What a segmenter may read of a video, from least to most (its ``reads`` declaration).
READS = ("none", "boxes", "video")
REFINER_READS = ("avatar", "crop")


class Segmenter(Protocol):
    """``f_seg``: person mask ``q`` of a video.

    A segmenter that has a ``stream(key)`` method (returning a :class:`SegmenterStream`) is
    given a long video a window of frames at a time, and the pipeline's memory does not grow
    with the video's length; one without is handed the whole video (which the pipeline then
    holds).

    Attributes:
      reads: one of :data:`READS`, what the mask may depend on.
    """

    reads: str

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        """``video`` uint8 ``[T, H, W, 3]``, ``key`` its path relative to the source folder ->
        bool ``[T, H, W]``, True = person."""


class SegmenterStream(Protocol):
    """A segmenter over one video given a window of frames at a time; its masks (and poses, for a
    segmenter that finds them) must equal the whole video's."""

    def push(self, frames: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """uint8 ``[n, H, W, 3]``, the next frames -> (bool ``[m, H, W]``, ``m`` float32 ``[k,
        33, 3]`` poses: empty arrays for a segmenter without poses) of the frames now final, in
        order; ``m`` may be smaller than ``n`` (a frame waits for the frames it depends on)."""

    def close(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The video has ended: the masks and poses of the frames not yet returned."""


class Cleanup(Protocol):
    """``B``: unflicker and grow a person mask and give it soft edges.

    A cleanup with an int ``temporal_radius`` attribute (a frame's output depends on that many
    frames either side) is run on chunks of frames; one without is run on the whole video.
    """

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """bool ``[T, H, W]`` -> (cleaned bool ``[T, H, W]``, alpha float32 ``[T, H, W]``, 1 on
        the cleaned mask, falling to 0 over a blurred edge outside it)."""


class Inpainter(Protocol):
    """``f_inp``: the video with the person removed (every output pixel is *private*: it is
    computed from the background).

    The pipeline calls it on chunks of frames. One that needs more of the video (a background
    plate) has a ``fit(video, q)`` method, called once, that returns the inpainter used on the
    chunks; with a ``fit_frames(num_frames)`` method (the indices it reads) it is handed only
    those frames and their masks, else the whole video (which the pipeline then holds).
    """

    def __call__(self, video: np.ndarray, q: np.ndarray) -> np.ndarray:
        """uint8 ``[T, H, W, 3]``, bool ``[T, H, W]`` -> float32 ``[T, H, W, 3]``."""


@dataclasses.dataclass(frozen=True)
class Avatar:
    """A rendered avatar: ``rgb`` float32 ``[T, H, W, 3]`` (meaningful where ``region``) and its
    region ``r`` bool ``[T, H, W]``. Both must be functions of the renderer's inputs (the cleaned
    person mask) and public constants only."""

    rgb: np.ndarray
    region: np.ndarray


class PoseStage(Protocol):
    """``f_pos``: body poses of a video (:mod:`maskdp_jax.anonymize.pose`: a list with one float32
    ``[n, 33, 3]`` array of ``(x, y, visibility)`` keypoints per frame).

    Attributes:
      reads: one of :data:`READS`, what the poses may depend on; held to ``max_reads`` like the
        segmenter's (the poses reach the public avatar). A stage reading ``"none"`` is handed a
        blank video.
    """

    reads: str

    def __call__(self, video: np.ndarray, key: str) -> list[np.ndarray]:
        """uint8 ``[T, H, W, 3]``, its key -> ``T`` arrays float32 ``[n, 33, 3]``."""


class Renderer(Protocol):
    """``f_ren``: an avatar that occupies the person's region.

    The renderer receives the cleaned person mask and, when the pipeline has a pose stage, the
    poses; never the video: the avatar then depends on the source pixels only through the
    segmentation and the poses, both declared by their stages' ``reads``. It is called on chunks
    of consecutive frames (the pipeline bounds memory so), so it must be frame-local.

    A renderer whose ``per_track`` attribute is true is also handed, when it draws the colours,
    ``tracks=``: int32 ``[T, H, W]``, for each pixel of the region it returned for the same
    ``q`` the index of the track (the tubelet) its blob belongs to, -1 off the region
    (:func:`maskdp_jax.anonymize.compose.track_map`). Tracks link the region's blobs across the
    whole video, which a frame-local renderer cannot; they are a function of the region, so of
    the segmentation: public.
    """

    def __call__(self, q: np.ndarray, poses: list[np.ndarray] | None = None) -> Avatar:
        """bool ``[T, H, W]`` and optionally ``T`` arrays float32 ``[n, 33, 3]`` (and, for a
        ``per_track`` renderer, keyword ``tracks``) -> :class:`Avatar`."""


class Refiner(Protocol):
    """``G``: refines a tubelet crop of the merged video (the paper: Stable Diffusion +
    AnimateDiff + ControlNets conditioned on depth, pose and face keypoints). It is called on a
    tubelet's frames one chunk of the pipeline's frames at a time (``Options.chunk_frames``).

    Attributes:
      reads: ``"avatar"``: the pipeline hands it the crop with every non-avatar pixel zeroed, so
        its output is a function of public pixels and is pasted over the avatar region only; the
        public mask is unchanged. ``"crop"``: it sees the whole crop (background included, as in
        the paper) and every pixel it pastes becomes private.
    """

    reads: str

    def __call__(self, crop: np.ndarray, avatar: np.ndarray) -> np.ndarray:
        """float32 ``[t, h, w, 3]``, bool ``[t, h, w]`` (the avatar region in the crop) ->
        float32 ``[t, h, w, 3]``."""


class NoRefinement:
    """The documented default ``G``: returns the crop unchanged (no diffusion model ships here;
    plug a real one in behind :class:`Refiner`)."""

    reads = "avatar"

    def __call__(self, crop: np.ndarray, avatar: np.ndarray) -> np.ndarray:
        del avatar
        return crop


class InputError(ValueError):
    """Bad input or settings given to the anonymisation pipeline (the CLI prints it and exits 2;
    any other exception is a bug and keeps its traceback)."""


def check_reads(reads: str, *, allowed: tuple[str, ...], what: str) -> None:
    """Refuse a stage whose ``reads`` declaration is not one of ``allowed`` (``what`` names it)."""
    if reads not in allowed:
        raise InputError(f"{what} must declare reads in {allowed}; got {reads!r}.")
