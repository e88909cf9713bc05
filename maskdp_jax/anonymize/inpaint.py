"""``f_inp``: remove the person (each an :class:`maskdp_jax.anonymize.stages.Inpainter`).

Every pixel these return is computed from the background, i.e. from *private* pixels; the
pipeline never marks an inpainted pixel public.

* :class:`TemporalMedian` (static cameras): each pixel's median over the frames where it is not
  person; pixels that are person in every frame are filled by OpenCV's Telea inpainting of that
  background plate. The paper uses a flow-guided video inpainting network [35]; for the fixed
  cameras of NTU RGB+D and Toyota Smarthome a background plate is what that network would recover.
* :class:`OpenCVInpaint` (moving cameras): OpenCV's Telea inpainting frame by frame.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from maskdp_jax.anonymize.opencv import cv2 as _cv2


@dataclasses.dataclass(frozen=True)
class TemporalMedian:
    """Background plate by temporal median (module docstring).

    The plate is fitted once (:meth:`fit`) on at most ``max_frames`` frames spread evenly over
    the video, then fills the person's pixels of any chunk of frames (:class:`Plate`): memory
    and time do not grow with the video's length beyond that subsample.

    Attributes:
      radius: Telea inpainting radius (px) for pixels never seen without the person.
      rows_per_chunk: rows of the subsample whose median is taken at once (bounds memory:
        float32 ``max_frames x rows x W x 3``).
      max_frames: frames the plate is fitted on.
    """

    radius: int = 5
    rows_per_chunk: int = 32
    max_frames: int = 64

    def fit_frames(self, num_frames: int) -> np.ndarray:
        """int64 indices of the frames of a ``num_frames``-frame video the plate is fitted on:
        at most ``max_frames``, evenly spread (a streaming pipeline keeps only these)."""
        return np.unique(np.linspace(0, num_frames - 1, min(num_frames, self.max_frames))
                         .round().astype(np.int64))

    def fit(self, video: np.ndarray, q: np.ndarray) -> Plate:
        """uint8 ``[T, H, W, 3]`` and bool ``[T, H, W]`` -> the :class:`Plate` of the subsample
        (:meth:`fit_frames`; given just those frames, it uses them all): each pixel's median over
        the subsampled frames where it is not person; pixels that are person in every subsampled
        frame are filled by Telea inpainting."""
        cv2 = _cv2()
        t, h, w, _ = video.shape
        idx = self.fit_frames(t)
        plate = np.zeros((h, w, 3), np.float32)
        for y in range(0, h, self.rows_per_chunk):
            rows = slice(y, y + self.rows_per_chunk)
            seen = np.where(q[idx, rows, :, None], np.nan, video[idx, rows].astype(np.float32))
            with warnings.catch_warnings():  # person in every frame: no median, inpainted below
                warnings.filterwarnings("ignore", message="All-NaN slice")
                plate[rows] = np.nan_to_num(np.nanmedian(seen, axis=0), nan=0.0)
        never = q[idx].all(axis=0)
        if never.any():
            plate8 = np.clip(np.rint(plate), 0, 255).astype(np.uint8)
            plate = cv2.inpaint(plate8, never.astype(np.uint8), self.radius,
                                cv2.INPAINT_TELEA).astype(np.float32)
        return Plate(plate)

    def __call__(self, video: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self.fit(video, q)(video, q)


@dataclasses.dataclass(frozen=True)
class Plate:
    """A fitted background plate (float32 ``[H, W, 3]``): fills the person's pixels of any
    frames of its video."""

    plate: np.ndarray

    def __call__(self, video: np.ndarray, q: np.ndarray) -> np.ndarray:
        """uint8 ``[t, H, W, 3]``, bool ``[t, H, W]`` -> float32 ``[t, H, W, 3]``."""
        return np.where(q[..., None], self.plate[None], video.astype(np.float32))


@dataclasses.dataclass(frozen=True)
class OpenCVInpaint:
    """OpenCV's Telea inpainting of each frame's person pixels (moving cameras)."""

    radius: int = 5

    def __call__(self, video: np.ndarray, q: np.ndarray) -> np.ndarray:
        cv2 = _cv2()
        out = np.empty(video.shape, np.float32)
        for i, (frame, person) in enumerate(zip(video, q, strict=True)):
            out[i] = cv2.inpaint(np.ascontiguousarray(frame), person.astype(np.uint8),
                                 self.radius, cv2.INPAINT_TELEA)
        return out

