"""Whole people without a face: OpenCV's HOG people detector (Dalal & Triggs 2005).

The detector is a linear SVM over histograms of oriented gradients in a 64 x 128 px window,
trained on the INRIA Person dataset; its 3,781 coefficients are compiled into OpenCV
(``cv2.HOGDescriptor_getDefaultPeopleDetector()``, OpenCV's licence: Apache-2.0 since 4.5,
BSD-3-Clause before), so they ship with the ``opencv-python-headless`` we install and nothing is
downloaded. :data:`COEFFICIENTS_SHA256` is their digest, checked when a detector is made, as the
model files' digests are (:mod:`maskdp_jax.anonymize.model_files`).

Why this detector: it finds upright people by their silhouette, so front, back and side views
alike, and it is the only person detector whose weights ship in a package we install under a
permissive licence and run offline (MediaPipe's own person detector, ``pose_detection.tflite``,
needs a TFLite operator OpenCV cannot load; the CNN detectors on PyPI download their weights or
are AGPL). Its boxes are proposals: :class:`maskdp_jax.anonymize.segment.FacePeople` keeps one
only where BlazePose, run on the box, says a person is present, which removes the poles, signs and
vans a gradient template also matches (docs/guides/anonymize.md measures both).

A person must be about 96 px tall in the window's scale to be found; :class:`HOGBodies` scales each
frame so that people of ``min_height`` px are, and pads the frame so that a person cut by its edge
can still fill a window.
"""

from __future__ import annotations

import hashlib

import numpy as np

from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError

#: SHA-256 of the detector's float32 coefficients (measured on OpenCV 4.14).
COEFFICIENTS_SHA256 = "cb2198952eaa5bc7e43d950b9f2aa1966528063c7295c7262133e7fa0d3d564c"
#: Height (px) of a person inside the detector's 64 x 128 window.
WINDOW_PERSON = 96
#: What this detector is, for summaries (the model files' ``describe`` line).
DESCRIPTION = ("HOG people detector (Dalal & Triggs 2005, INRIA Person; coefficients compiled "
               "into OpenCV, Apache-2.0)")


def coefficients() -> np.ndarray:
    """The detector's float32 coefficients, checked against :data:`COEFFICIENTS_SHA256`."""
    coef = np.asarray(_cv2().HOGDescriptor_getDefaultPeopleDetector(), np.float32).ravel()
    found = hashlib.sha256(coef.tobytes()).hexdigest()
    if found != COEFFICIENTS_SHA256:
        raise InputError(f"OpenCV's HOG people detector has other coefficients (SHA-256 {found}, "
                         f"expected {COEFFICIENTS_SHA256}): this OpenCV build is not the one the "
                         "body detector was measured with; install the pinned "
                         "opencv-python-headless (pip install -r requirements.txt).")
    return coef


class HOGBodies:
    """Upright people's boxes in RGB frames.

    Args:
      min_height: height (px, in the frame) of the smallest person searched for. The frame is
        scaled by ``96 / min_height`` before detection: smaller values find more distant people
        and cost about the square of the scale.
      max_side: the scaled frame's longer side is at most this many px (with its padding): on
        large frames the smallest person found is then taller than ``min_height``, and the
        cost per frame stays bounded, as the face detector's ``max_side`` bounds its.
      threshold: the SVM score a window needs (OpenCV's ``hitThreshold``; 0 is OpenCV's default).
      border: fraction of the frame's height padded on each side (replicated edge pixels), so a
        person cut by the frame's edge still fills a window.
      nms: IoU above which overlapping boxes are merged (OpenCV's NMS, highest score kept).
    """

    def __init__(self, *, min_height: int = 48, max_side: int = 1792, threshold: float = 0.0,
                 border: float = 0.1, nms: float = 0.4):
        if min_height < 16 or max_side < 128 or not 0 <= border <= 1 or not 0 < nms <= 1:
            raise InputError("HOGBodies needs min_height >= 16 px, max_side >= 128 px, "
                             "0 <= border <= 1, 0 < nms <= 1.")
        self.min_height, self.max_side, self.threshold, self.border, self.nms = (
            min_height, max_side, threshold, border, nms)
        self._hog = _cv2().HOGDescriptor()
        self._hog.setSVMDetector(coefficients())

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """uint8 ``[H, W, 3]`` RGB -> float64 ``[n, 5]``: ``(x0, y0, x1, y1, score)`` in the
        frame's pixels (ends exclusive; boxes may reach past the frame into the padding)."""
        cv2 = _cv2()
        h, w = frame.shape[:2]
        pad = int(round(self.border * h))
        s = min(WINDOW_PERSON / self.min_height, self.max_side / (max(h, w) + 2 * pad))
        image = cv2.copyMakeBorder(np.ascontiguousarray(frame[..., ::-1]), pad, pad, pad, pad,
                                   cv2.BORDER_REPLICATE)
        if s != 1:
            image = cv2.resize(image, None, fx=s, fy=s,
                               interpolation=cv2.INTER_LINEAR if s > 1 else cv2.INTER_AREA)
        if image.shape[0] < 128 or image.shape[1] < 64:
            return np.zeros((0, 5))
        found, weights = self._hog.detectMultiScale(image, hitThreshold=self.threshold,
                                                    winStride=(8, 8), padding=(16, 16),
                                                    scale=1.05)
        found = np.reshape(np.asarray(found, np.float64), (-1, 4))
        if not len(found):
            return np.zeros((0, 5))
        score = np.ravel(weights).astype(np.float64)
        boxes = np.concatenate([found[:, :2], found[:, :2] + found[:, 2:]], 1) / s - pad
        keep = cv2.dnn.NMSBoxes([[float(x0), float(y0), float(x1 - x0), float(y1 - y0)]
                                 for x0, y0, x1, y1 in boxes],
                                (score - score.min() + 1.0).tolist(), 0.0, self.nms)
        # NMSBoxes keeps scores strictly above a threshold >= 0: shifted to start at 1, every
        # box is a candidate and only the scores' order counts
        keep = np.reshape(np.asarray(keep, np.int64), -1)
        return np.concatenate([boxes[keep], score[keep, None]], 1)
