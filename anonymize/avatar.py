"""``f_pos`` + ``f_ren``: a procedural avatar over the person's region
(an :class:`anonymize.stages.Renderer`).

The paper renders SMPL-H bodies from 4D poses; no such model ships here, so the avatar is drawn
from the cleaned person mask alone:

* *pose*: the mask reduced to a coarse grid (``cell`` px: a cell is occupied if any of its pixels
  is person), which keeps posture and position but not the outline's detail;
* *region* ``r``: that grid smoothed into a rounded silhouette, united with the person mask so the
  avatar covers the whole person;
* *texture*: a clay-like figure (head, shirt and trousers bands by height within each blob,
  shaded by the distance to the outline, stripes on the shirt), colours from a palette drawn with
  ``seed``.

Nothing here reads a pixel of the video: ``rgb`` and ``region`` are functions of the person mask
and of the constants above, which is what lets the pipeline call the avatar's pixels public.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from anonymize.cleanup import blur_radius
from anonymize.opencv import cv2 as _cv2
from anonymize.stages import Avatar, InputError

_SKIN = ((224, 172, 140), (198, 134, 96), (141, 85, 56), (255, 219, 180))


@dataclasses.dataclass(frozen=True)
class ProceduralAvatar:
    """See the module docstring.

    Attributes:
      cell: px of the coarse pose grid.
      smooth: std of the outline's smoothing, in cells.
      seed: palette seed (public).
    """

    cell: int = 8
    smooth: float = 0.5
    seed: int = 0

    def __post_init__(self):
        if self.cell < 1 or self.smooth < 0:
            raise InputError("avatar.cell must be >= 1 and avatar.smooth >= 0.")

    def palette(self) -> np.ndarray:
        """float32 ``[3, 3]``: head, shirt and trousers colours."""
        rng = np.random.default_rng(self.seed)
        skin = _SKIN[int(rng.integers(len(_SKIN)))]
        shirt, trousers = rng.integers(40, 230, size=(2, 3))
        return np.asarray([skin, shirt, trousers], np.float32)

    def region(self, q: np.ndarray) -> np.ndarray:
        """bool ``[T, H, W]``: the avatar's region ``r`` (module docstring)."""
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

    def __call__(self, q: np.ndarray) -> Avatar:
        cv2 = _cv2()
        r = self.region(q)
        head, shirt, trousers = self.palette()
        rgb = np.zeros((*r.shape, 3), np.float32)
        ys = np.arange(r.shape[1], dtype=np.float32)[:, None]
        stripes = 1.0 + 0.08 * np.sin(2 * np.pi * ys / 6.0)
        for i, frame in enumerate(r.astype(np.uint8)):
            n, labels, stats, _ = cv2.connectedComponentsWithStats(frame, connectivity=8)
            if n == 1:
                continue
            dist = cv2.distanceTransform(frame, cv2.DIST_L2, 3)
            top = stats[labels, cv2.CC_STAT_TOP].astype(np.float32)
            height = np.maximum(stats[labels, cv2.CC_STAT_HEIGHT], 1).astype(np.float32)
            rel = (ys - top) / height
            depth = np.zeros(n, np.float32)
            np.maximum.at(depth, labels.ravel(), dist.ravel())
            shade = 0.6 + 0.4 * np.minimum(dist / np.maximum(depth[labels], 1.0), 1.0)
            colour = np.where((rel < 0.18)[..., None], head,
                              np.where((rel < 0.6)[..., None], shirt * stripes[..., None],
                                       trousers))
            rgb[i] = np.where(frame[..., None] > 0, colour * shade[..., None], 0.0)
        return Avatar(rgb=np.clip(rgb, 0, 255), region=r)
