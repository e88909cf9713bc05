"""``B`` (Schneider et al. 2024b, Sec. 3): unflicker person masks across frames, grow them slightly,
and give them Gaussian alpha edges for blending. Also the blur and erosion that merging and
composition share (:func:`soft_edges`, :func:`erode`), so that the public mask is eroded by exactly
the radius the blending uses.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError


def blur_radius(sigma: float) -> int:
    """Half-width of the Gaussian kernel used for ``sigma`` (OpenCV kernel ``2 r + 1``, r = ⌈3σ⌉):
    a pixel farther than ``r`` (Chebyshev distance) from every pixel outside a mask has alpha
    exactly 1."""
    return int(math.ceil(3 * sigma)) if sigma > 0 else 0


def soft_edges(mask: np.ndarray, sigma: float, *, centred: bool = False) -> np.ndarray:
    """bool ``[T, H, W]`` -> float32 alpha ``[T, H, W]``, the mask blurred by a Gaussian of
    ``sigma`` px (kernel half-width :func:`blur_radius`).

    ``centred=False`` (cleanup: the edge falls *outside* the mask): alpha is exactly 1 on the mask.
    ``centred=True`` (compositing: the edge straddles the outline): alpha is exactly 1 on
    ``erode(mask, blur_radius(sigma))``, the pixels whose whole kernel lies in the mask (set so
    rather than left to the blur's float rounding), and below 1 elsewhere: those are the only
    pixels where an overlay is not mixed with what lies under it.
    """
    cv2 = _cv2()
    alpha = mask.astype(np.float32)
    r = blur_radius(sigma)
    if r == 0:
        return alpha
    out = np.empty_like(alpha)
    for i, frame in enumerate(alpha):
        out[i] = cv2.GaussianBlur(frame, (2 * r + 1, 2 * r + 1), sigma,
                                  borderType=cv2.BORDER_REPLICATE)
    if not centred:
        return np.maximum(out, alpha)
    inside = erode(mask, r)
    out = np.minimum(out, np.float32(np.nextafter(np.float32(1), np.float32(0))))
    return np.where(inside, np.float32(1), out)


def erode(mask: np.ndarray, radius: int) -> np.ndarray:
    """bool ``[T, H, W]``: pixels whose whole ``(2 radius + 1)²`` square lies in ``mask`` (pixels
    outside the frame count as outside the mask)."""
    if radius <= 0:
        return mask.copy()
    cv2 = _cv2()
    kernel = np.ones((2 * radius + 1, 2 * radius + 1), np.uint8)
    out = np.empty_like(mask)
    for i, frame in enumerate(mask.astype(np.uint8)):
        out[i] = cv2.erode(frame, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
    return out


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """bool ``[T, H, W]`` grown by a disc of ``radius`` px."""
    if radius <= 0:
        return mask.copy()
    cv2 = _cv2()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    out = np.empty_like(mask)
    for i, frame in enumerate(mask.astype(np.uint8)):
        out[i] = cv2.dilate(frame, kernel) > 0
    return out


@dataclasses.dataclass(frozen=True)
class MaskCleanup:
    """The cleanup ``B``.

    Attributes:
      window: odd number of frames of the temporal majority vote (1 = none): a pixel is person in
        frame t if it is in more than half of frames ``t - window//2 .. t + window//2`` (the
        window is cut at the video's ends).
      grow: px the unflickered mask is grown by. 0 by default, as in ``configs/anonymize.py``
        (one default for the library and the command; a test keeps them equal): the default
        segmenter's masks follow the person's outline, each px of growth puts avatar, and so
        public pixels, on whatever lies next to the person (``docs/results/anonymize_quality``),
        and the alpha edge below already removes the person a few px past the mask (those
        pixels are private). Grow for a segmenter that misses hair and edges (the former GrabCut
        default grew 3 px).
      edge_sigma: std (px) of the Gaussian alpha edge outside the grown mask.
    """

    window: int = 5
    grow: int = 0
    edge_sigma: float = 2.0

    def __post_init__(self):
        if self.window < 1 or self.window % 2 == 0:
            raise InputError(f"cleanup.window must be odd and >= 1; got {self.window}.")
        if self.grow < 0 or self.edge_sigma < 0:
            raise InputError("cleanup.grow and cleanup.edge_sigma must be >= 0.")

    @property
    def temporal_radius(self) -> int:
        """Frames either side that one frame's output depends on (the pipeline cleans chunks of
        frames with that many more on each side)."""
        return self.window // 2

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = unflicker(q, self.window)
        q = dilate(q, self.grow)
        return q, soft_edges(q, self.edge_sigma)


def unflicker(q: np.ndarray, window: int) -> np.ndarray:
    """Temporal majority vote over ``window`` frames (see :class:`MaskCleanup`)."""
    if window == 1:
        return q.copy()
    k = window // 2
    counts = np.concatenate([np.zeros((1, *q.shape[1:]), np.int32),
                             np.cumsum(q, axis=0, dtype=np.int32)])
    t = np.arange(len(q))
    lo, hi = np.maximum(t - k, 0), np.minimum(t + k + 1, len(q))
    votes = counts[hi] - counts[lo]
    return 2 * votes > (hi - lo)[:, None, None]
