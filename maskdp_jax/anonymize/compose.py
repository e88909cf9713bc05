"""``Merge``, tubelet crops ``C``, refinement ``G`` and composition ``K`` (Schneider et al. 2024b,
Alg. 1, lines 6-13), and the public mask they leave.

Which output pixels are public (package docstring): a pixel is public only if every value that
reaches it is a function of public information. ``Merge`` overlays the avatar with a centred
Gaussian edge (:func:`maskdp_jax.anonymize.cleanup.soft_edges`), so only ``erode(r, blur_radius)``
takes the avatar unmixed; ``K`` pastes a refined tubelet with the same edge over the avatar region
(a refiner that reads only the avatar) or over avatar ∪ person (a refiner that reads the crop, as
the paper's diffusion model does), in which case every pixel it touches becomes private.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from maskdp_jax.anonymize.cleanup import blur_radius, erode, soft_edges
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import Avatar, InputError, Refiner


def merge(background: np.ndarray, avatar: Avatar, sigma: float) -> np.ndarray:
    """``x_dd``: the avatar over the inpainted video. float32 ``[T, H, W, 3]``."""
    alpha = soft_edges(avatar.region, sigma, centred=True)[..., None]
    # where alpha is 1 the avatar alone, selected rather than computed (0 * NaN would be NaN)
    return np.where(alpha == 1, avatar.rgb, alpha * avatar.rgb + (1 - alpha) * background)


@dataclasses.dataclass(frozen=True)
class Tubelet:
    """One tracked region's crops: frames ``start .. start + len(boxes) - 1``, boxes int
    ``[t, 4]`` ``(x0, y0, x1, y1)`` of one fixed size, inside the frame."""

    start: int
    boxes: np.ndarray


def tubelets(region: np.ndarray, *, pad: int, window: int, min_iou: float = 0.1) -> list[Tubelet]:
    """``C``: temporally smooth crops around each connected region of ``region`` (bool
    ``[T, H, W]``).

    Blobs are linked frame to frame by box overlap (IoU ≥ ``min_iou``, greedy, largest first:
    :func:`track_ids`, whose track ``k`` is tubelet ``k`` here); a track's box centres are
    averaged over ``window`` frames and its size is its largest box plus ``pad`` on each side, so
    the crop moves smoothly and has one size.
    """
    linker = BlobTracks(min_iou)
    for frame in region:
        linker.add(frame)
    return linker.tubelets(region.shape[1:], pad=pad, window=window)


def track_ids(region: np.ndarray, *, min_iou: float = 0.1) -> list[np.ndarray]:
    """The track of each blob of ``region`` (bool ``[T, H, W]``): per frame, int64 ``[n]``, the
    track index (0, 1, ...: in order of first appearance, the index of its :func:`tubelets`
    entry) of each 8-connected component, in :func:`track_map`'s component order. A function of
    ``region`` alone: of the segmentation, never of a pixel."""
    linker = BlobTracks(min_iou)
    return [linker.add(frame) for frame in region]


def track_map(region: np.ndarray, ids: list[np.ndarray]) -> np.ndarray:
    """int32 ``[T, H, W]``: the track (``ids``, from :func:`track_ids` of these frames) of the
    component each pixel of ``region`` (bool ``[T, H, W]``) lies in, -1 off the region."""
    cv2 = _cv2()
    out = np.full(region.shape, -1, np.int32)
    for i, frame in enumerate(region.astype(np.uint8)):
        _, labels, _, _ = cv2.connectedComponentsWithStats(frame, connectivity=8)
        out[i] = np.concatenate([[-1], ids[i]]).astype(np.int32)[labels]
    return out


class BlobTracks:
    """The region's blobs linked into tracks one frame at a time (:meth:`add`): what
    :func:`tubelets` and :func:`track_ids` compute over a whole region, for a stream of frames.
    A blob joins the track of the previous frame whose last box overlaps its own most (IoU ≥
    ``min_iou``; greedy, largest blob first), else starts a track. It keeps each track's boxes
    (four numbers per track and frame), never a frame."""

    def __init__(self, min_iou: float = 0.1):
        self.min_iou = min_iou
        self.tracks: list[dict] = []  # {"start", "boxes": [[x0, y0, x1, y1], ...], "last"}
        self.frames = 0

    def add(self, frame: np.ndarray) -> np.ndarray:
        """bool ``[H, W]``, the next frame's region -> int64 ``[n - 1]``: the track of each of its
        components ``1 .. n - 1`` in OpenCV's labelling (:func:`track_map`'s order)."""
        cv2 = _cv2()
        i = self.frames
        n, _, stats, _ = cv2.connectedComponentsWithStats(frame.astype(np.uint8), connectivity=8)
        frame_ids = np.empty(n - 1, np.int64)
        active = [k for k, tr in enumerate(self.tracks) if tr["last"] == i - 1]
        for c in sorted(range(1, n), key=lambda c: -stats[c][4]):
            x, y, bw, bh, _ = stats[c]
            box = np.array([x, y, x + bw, y + bh], np.float64)
            best = max(active, key=lambda k: _iou(self.tracks[k]["boxes"][-1], box),
                       default=None)
            if best is not None and _iou(self.tracks[best]["boxes"][-1], box) >= self.min_iou:
                active.remove(best)
                self.tracks[best]["boxes"].append(box)
                self.tracks[best]["last"] = i
            else:
                best = len(self.tracks)
                self.tracks.append({"start": i, "boxes": [box], "last": i})
            frame_ids[c - 1] = best
        self.frames += 1
        return frame_ids

    def tubelets(self, frame_size: tuple[int, int], *, pad: int, window: int) -> list[Tubelet]:
        """The tracks' crops (:func:`tubelets`) in frames of ``frame_size`` ``(H, W)``."""
        h, w = frame_size
        out = []
        for tr in self.tracks:
            boxes = np.asarray(tr["boxes"])
            centre = (boxes[:, :2] + boxes[:, 2:]) / 2
            k = np.ones(min(window, len(boxes)))
            norm = np.convolve(np.ones(len(boxes)), k, mode="same")
            centre = np.stack([np.convolve(centre[:, j], k, mode="same") / norm
                               for j in range(2)], 1)
            size = np.minimum((boxes[:, 2:] - boxes[:, :2]).max(axis=0) + 2 * pad, (w, h))
            lo = np.clip(np.rint(centre - size / 2), 0, (w, h) - size)
            out.append(Tubelet(tr["start"], np.concatenate([lo, lo + size], 1)
                               .astype(np.int64)))
        return out


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.prod(np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None))
    union = np.prod(a[2:] - a[:2]) + np.prod(b[2:] - b[:2]) - inter
    return float(inter / union) if union > 0 else 0.0


def refine_and_compose(merged: np.ndarray, avatar: Avatar, person: np.ndarray,
                       crops: list[Tubelet], refiner: Refiner, sigma: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``G`` on each tubelet crop, then ``K``: paste the refined crops back.

    Args:
      merged: float32 ``[T, H, W, 3]``, ``x_dd``.
      avatar: the rendered avatar (``rgb``, region ``r``). An ``"avatar"`` refiner is given the
        avatar's own colours on ``r`` and zeros elsewhere, never the merged crop: the merged
        pixels on ``r``'s blended rim mix in the private background.
      person: bool ``[T, H, W]``, the cleaned person mask ``q``.
      crops: from :func:`tubelets`.
      refiner: ``G``; see :class:`maskdp_jax.anonymize.stages.Refiner` for what ``reads`` changes.
      sigma: the blending edge (the merge's).

    Returns:
      (the composed float32 ``[T, H, W, 3]``, bool ``[T, H, W]`` of pixels a ``"crop"`` refiner
      touched, which the caller removes from the public mask; all False for an ``"avatar"``
      refiner).
    """
    region = avatar.region
    out = merged.copy()
    touched = np.zeros(region.shape, bool)
    reads_crop = refiner.reads == "crop"
    for tube in crops:
        x0, y0, x1, y1 = tube.boxes.T

        def cut(a, x0=x0, y0=y0, x1=x1, y1=y1, start=tube.start):
            return np.stack([a[start + j, y0[j]:y1[j], x0[j]:x1[j]] for j in range(len(x0))])

        crop, r = cut(merged), cut(region)
        if not reads_crop:
            refined = refiner(cut(avatar.rgb) * r[..., None], r)
            weight = soft_edges(r, sigma, centred=True) * r  # only over the avatar's own pixels
        else:
            refined = refiner(crop, r)
            weight = soft_edges(r | cut(person), sigma, centred=True)
        if refined.shape != crop.shape or not np.all(np.isfinite(refined)):
            raise InputError(f"the refiner returned {refined.shape} with non-finite values or a "
                             f"shape other than the crop's {crop.shape}.")
        for j, t in enumerate(range(tube.start, tube.start + len(tube.boxes))):
            a = weight[j][..., None]
            box = (slice(y0[j], y1[j]), slice(x0[j], x1[j]))
            out[t][box] = np.where(a == 1, refined[j], a * refined[j] + (1 - a) * out[t][box])
            if reads_crop:
                touched[t][box] |= weight[j] > 0
    return out, touched


def public_mask(region: np.ndarray, sigma: float, *, codec_margin: int = 0) -> np.ndarray:
    """bool ``[T, H, W]``: the avatar region eroded by the blend's kernel radius and by
    ``codec_margin`` (lossy storage)."""
    return erode(region, blur_radius(sigma) + codec_margin)
