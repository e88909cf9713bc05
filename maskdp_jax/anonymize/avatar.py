"""``f_ren``: a procedural avatar over the person's region (an
:class:`maskdp_jax.anonymize.stages.Renderer`).

The paper renders SMPL-H bodies from 4D poses; no body model ships here, so the avatar is drawn
from the cleaned person mask and, where the pipeline has poses (:mod:`maskdp_jax.anonymize.pose`),
from the 2D keypoints:

* *region* ``r``: the person mask itself (``cell=0``, the default): the avatar is clipped to
  the mask, so it puts no public pixel where the segmenter did not declare a person; the pixels
  between the mask and the person's true outline are left to the inpainting (private). With
  ``cell >= 1`` the region is instead the mask reduced to a coarse grid (``cell`` px: a cell is
  occupied if any of its pixels is person) and smoothed into a rounded silhouette, united with
  the mask: it hides the outline's detail but spills up to about ``cell`` px past the mask
  onto whatever is next to the person (measured in docs/results/anonymize_quality);
* *texture*: a clay-like figure (head, shirt and trousers bands by height within each blob,
  shaded by the distance to the outline, stripes on the shirt), colours from a palette per track
  (:meth:`ProceduralAvatar.palette`: a function of ``seed`` and the track's index only), so two
  people in one video wear different colours and each keeps theirs from frame to frame;
* *pose* (where a frame has poses): the body drawn over that figure from the keypoints, inside
  the region: limbs as thick bones in the shirt and trousers colours with dark outlines, the
  head as a disc at the nose, so the arms, legs and head move as the person's do (Schneider et al.
  2024b's
  point: the public view keeps the action). Frames without a pose keep the silhouette figure.

Nothing here reads a pixel of the video: ``rgb`` and ``region`` are functions of the person
mask, the poses, the tracks (linked from the region, so from the mask) and the constants above,
which is what lets the pipeline call the avatar's pixels public.
"""

from __future__ import annotations

import colorsys
import dataclasses
from typing import ClassVar

import numpy as np

from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.cleanup import blur_radius
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import Avatar, InputError

_SKIN = ((224, 172, 140), (198, 134, 96), (141, 85, 56), (255, 219, 180))
# The shirt hue advances by the golden ratio's fraction of the colour wheel per track: any two of
# the first n tracks' hues lie more than 0.44 / n of the wheel apart (checked for n < 2000;
# consecutive ones 0.38).
_HUE_STEP = (5 ** 0.5 - 1) / 2


@dataclasses.dataclass(frozen=True)
class ProceduralAvatar:
    """See the module docstring.

    Attributes:
      cell: 0: the region is the person mask (clipped); else px of the coarse silhouette grid.
      smooth: std of the coarse outline's smoothing, in cells (``cell >= 1`` only).
      seed: palette seed (public).
      min_visibility: keypoints less visible than this are not drawn.
    """

    cell: int = 0
    smooth: float = 0.5
    seed: int = 0
    min_visibility: float = 0.5
    #: The pipeline hands this renderer ``tracks`` (:class:`maskdp_jax.anonymize.stages.Renderer`).
    per_track: ClassVar[bool] = True

    def __post_init__(self):
        if self.cell < 0 or self.smooth < 0:
            raise InputError("avatar.cell and avatar.smooth must be >= 0.")

    def palette(self, track: int = 0) -> np.ndarray:
        """float32 ``[3, 3]``: head, shirt and trousers colours (0-255) of track ``track``.

        Public: a function of ``seed`` and ``track`` only. The seed draws a starting hue and skin
        tone; track ``k``'s shirt has the starting hue advanced by ``k`` golden-ratio steps
        (``_HUE_STEP``), its trousers the opposite hue, darker, and the skin tones cycle.

        >>> a = ProceduralAvatar()
        >>> bool((a.palette(0) == a.palette(0)).all()), bool((a.palette(0) != a.palette(1)).any())
        (True, True)
        """
        rng = np.random.default_rng(self.seed)
        start, skin = rng.random(), int(rng.integers(len(_SKIN)))
        hue = (start + track * _HUE_STEP) % 1.0
        shirt = colorsys.hsv_to_rgb(hue, 0.6, 0.8)
        trousers = colorsys.hsv_to_rgb((hue + 0.5) % 1.0, 0.45, 0.45)
        return np.asarray([_SKIN[(skin + track) % len(_SKIN)], np.multiply(shirt, 255),
                           np.multiply(trousers, 255)], np.float32)

    def region(self, q: np.ndarray) -> np.ndarray:
        """bool ``[T, H, W]``: the avatar's region ``r`` (module docstring); ``q`` itself (a copy)
        with ``cell=0``."""
        if self.cell == 0:
            return q.copy()
        cv2 = _cv2()
        t, h, w = q.shape
        c = self.cell
        gh, gw = -(-h // c), -(-w // c)
        padded = np.zeros((t, gh * c, gw * c), bool)
        padded[:, :h, :w] = q
        grid = padded.reshape(t, gh, c, gw, c).any(axis=(2, 4))
        coarse = np.repeat(np.repeat(grid, c, axis=1), c, axis=2)[:, :h, :w].astype(np.float32)
        sigma = self.smooth * c
        if sigma > 0:
            k = 2 * blur_radius(sigma) + 1
            coarse = np.stack([cv2.GaussianBlur(f, (k, k), sigma) for f in coarse])
        return (coarse >= 0.5) | q

    def __call__(self, q: np.ndarray, poses: list[np.ndarray] | None = None, *,
                 tracks: np.ndarray | None = None) -> Avatar:
        """The avatar of the cleaned person mask ``q`` (bool ``[T, H, W]``), posed where
        ``poses`` has a pose; ``tracks`` (int ``[T, H, W]``, the track of each region pixel, -1
        off it: :func:`maskdp_jax.anonymize.compose.track_map` of this avatar's region) picks
        each blob's palette, its smallest track (None: every blob wears track 0's)."""
        cv2 = _cv2()
        r = self.region(q)
        palettes = {}  # track -> palette, drawn once per call
        rgb = np.zeros((*r.shape, 3), np.float32)
        ys = np.arange(r.shape[1], dtype=np.float32)[:, None]
        stripes = 1.0 + 0.08 * np.sin(2 * np.pi * ys / 6.0)
        for i, frame in enumerate(r.astype(np.uint8)):
            n, labels, stats, _ = cv2.connectedComponentsWithStats(frame, connectivity=8)
            if n == 1:
                continue
            blob_track = np.zeros(n, np.int64)
            if tracks is not None:
                inside = frame > 0
                found = np.full(n, np.iinfo(np.int64).max)
                np.minimum.at(found, labels[inside], tracks[i][inside].astype(np.int64))
                blob_track = np.where(found == np.iinfo(np.int64).max, 0, np.maximum(found, 0))
            for k in set(blob_track.tolist()) - palettes.keys():
                palettes[k] = self.palette(k)
            table = np.stack([palettes[k] for k in blob_track.tolist()])  # [n, part, 3]
            dist = cv2.distanceTransform(frame, cv2.DIST_L2, 3)
            top = stats[labels, cv2.CC_STAT_TOP].astype(np.float32)
            height = np.maximum(stats[labels, cv2.CC_STAT_HEIGHT], 1).astype(np.float32)
            rel = (ys - top) / height
            depth = np.zeros(n, np.float32)
            np.maximum.at(depth, labels.ravel(), dist.ravel())
            shade = 0.6 + 0.4 * np.minimum(dist / np.maximum(depth[labels], 1.0), 1.0)
            part = np.where(rel < 0.18, 0, np.where(rel < 0.6, 1, 2))  # head, shirt, trousers
            colour = table[labels, part] * np.where(part == 1, stripes, 1.0)[..., None]
            rgb[i] = np.where(frame[..., None] > 0, colour * shade[..., None], 0.0)
            if poses is not None and len(poses[i]):
                self._draw_poses(rgb[i], frame > 0, poses[i],
                                 [palettes[k] for k in self._pose_tracks(
                                     poses[i], labels, blob_track)])
        return Avatar(rgb=np.clip(rgb, 0, 255), region=r)

    def _pose_tracks(self, poses: np.ndarray, labels: np.ndarray,
                     blob_track: np.ndarray) -> list[int]:
        """The track of each pose (float32 ``[n, 33, 3]``): the one most of its visible keypoints
        lie on (``labels``: the frame's blobs, ``blob_track``: each blob's track), else the
        first blob's."""
        h, w = labels.shape
        out = []
        for pose in poses:
            xy = np.round(pose[:, :2]).astype(np.int64)
            seen = ((pose[:, 2] >= self.min_visibility) & (xy[:, 0] >= 0) & (xy[:, 0] < w)
                    & (xy[:, 1] >= 0) & (xy[:, 1] < h))
            blobs = labels[xy[seen, 1], xy[seen, 0]]
            blobs = blobs[blobs > 0]
            out.append(int(blob_track[np.bincount(blobs).argmax()] if len(blobs)
                           else blob_track[1]))
        return out

    def _draw_poses(self, rgb: np.ndarray, region: np.ndarray, poses: np.ndarray,
                    palettes: list[np.ndarray]) -> None:
        """Paint ``poses`` (float32 ``[n, 33, 3]``) over ``rgb`` (float32 ``[H, W, 3]``, in
        place) inside ``region``: outlined bones, then the head; pose ``j`` in the colours of
        ``palettes[j]`` (float32 ``[3, 3]``)."""
        cv2 = _cv2()
        layer = rgb.copy()
        for pose, palette in zip(poses, palettes, strict=True):
            xy, vis = pose[:, :2], pose[:, 2]
            shoulders = np.linalg.norm(xy[11] - xy[12])
            width = max(int(round(0.22 * shoulders)), 2)
            for a, b, part in pose_lib.BONES:
                if min(vis[a], vis[b]) < self.min_visibility:
                    continue
                p, r = _point(xy[a]), _point(xy[b])
                cv2.line(layer, p, r, (25.0, 25.0, 30.0), width + 4, cv2.LINE_8)
                cv2.line(layer, p, r, tuple(float(c) * 0.85 for c in palette[part]), width,
                         cv2.LINE_8)
            if vis[0] >= self.min_visibility:
                ears = np.linalg.norm(xy[7] - xy[8])
                radius = max(int(round(0.7 * max(ears, 0.35 * shoulders))), 2)
                centre = _point(xy[0])
                cv2.circle(layer, centre, radius + 2, (25.0, 25.0, 30.0), -1, cv2.LINE_8)
                cv2.circle(layer, centre, radius, tuple(float(c) for c in palette[0]), -1,
                           cv2.LINE_8)
        rgb[region] = layer[region]


def _point(xy: np.ndarray) -> tuple[int, int]:
    return int(np.round(xy[0])), int(np.round(xy[1]))
