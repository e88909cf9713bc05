"""``f_pos``: body poses, from a neural model shipped with this package or from files.

A pose is float32 ``[33, 3]``: ``(x, y, visibility)`` of the 33 BlazePose keypoints
(:data:`maskdp_jax.anonymize.pose.KEYPOINTS`) in frame pixels, visibility in [0, 1]. A video's poses
are a list with one float32 ``[n, 33, 3]`` array per frame (``n`` people, 0 where nobody was found).

* :class:`BlazePose`: MediaPipe's BlazePose GHUM "full" landmark model
  (``anonymize/weights/pose_landmark_full.tflite``, Apache-2.0, copied from the ``mediapipe``
  0.10.21 wheel: :mod:`maskdp_jax.anonymize.model_files`), run through OpenCV's DNN module on a
  square crop around a person. Besides the keypoints it outputs a person segmentation of the crop,
  which :class:`maskdp_jax.anonymize.segment.FacePeople` uses as the person mask. MediaPipe's own
  person detector (``pose_detection.tflite``) uses a TFLite operator (DENSIFY) that OpenCV cannot
  load, so the crops come from the face detector instead.
* :class:`PoseFiles` (``reads="none"``): poses you made, ``<dir>/<key stem>.json`` =
  ``{"poses": [[frame, x0, y0, v0, ..., x32, y32, v32], ...]}``, or else NTU RGB+D's own
  skeleton file (:func:`skeleton_poses`).

The poses are released outside DP exactly like the mask: the avatar is drawn from them.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from maskdp_jax.anonymize import annotations, model_files, skeletons
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError

#: Keypoints per pose.
NUM_KEYPOINTS = 33
#: The BlazePose keypoints' names, in the model's order.
KEYPOINTS = ("nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner",
             "right_eye", "right_eye_outer", "left_ear", "right_ear", "mouth_left",
             "mouth_right", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
             "left_wrist", "right_wrist", "left_pinky", "right_pinky", "left_index",
             "right_index", "left_thumb", "right_thumb", "left_hip", "right_hip", "left_knee",
             "right_knee", "left_ankle", "right_ankle", "left_heel", "right_heel",
             "left_foot_index", "right_foot_index")
#: Limbs drawn by a pose-driven avatar: (keypoint a, keypoint b, part) with part 0 = head,
#: 1 = torso / arms, 2 = legs (the avatar's palette rows).
BONES = ((11, 12, 1), (11, 23, 1), (12, 24, 1), (23, 24, 1), (11, 13, 1), (13, 15, 1),
         (12, 14, 1), (14, 16, 1), (23, 25, 2), (25, 27, 2), (24, 26, 2), (26, 28, 2),
         (27, 31, 2), (28, 32, 2))
_INPUT = 256
#: The crop around a person is this many times the distance between the model's two alignment
#: points (hips' centre, and the top of the circle around the whole body) on a side: MediaPipe's
#: own tracking crop (a square of the circle's diameter, grown 25 %).
ROI_SCALE = 2.5


class PoseOutput(NamedTuple):
    """What :class:`BlazePose` returns for one crop.

    Attributes:
      pose: float32 ``[33, 3]`` keypoints in frame pixels.
      presence: the model's person-presence score in [0, 1].
      mask: bool ``[H, W]`` the person's pixels (segmentation above 0.5, only inside the crop).
      roi: float64 ``(x0, y0, x1, y1)``: the square crop the model's alignment points say holds
        the whole person (may reach past the frame); where it leaves the crop given, the person
        was cut off and a second pass on ``roi`` sees all of them.
    """

    pose: np.ndarray
    presence: float
    mask: np.ndarray
    roi: np.ndarray


class BlazePose:
    """BlazePose landmarks and person segmentation of one person in a square crop.

    ``__call__(frame, box)``: uint8 ``[H, W, 3]`` RGB and a square ``(x0, y0, x1, y1)`` around
    the person (may reach past the frame: zero padding) -> :class:`PoseOutput`.
    """

    def __init__(self):
        self.path = model_files.path("pose_landmark_full.tflite")
        self._net = _cv2().dnn.readNetFromTFLite(self.path)
        self._names = self._net.getUnconnectedOutLayersNames()

    def __call__(self, frame: np.ndarray, box: np.ndarray):
        cv2 = _cv2()
        h, w = frame.shape[:2]
        x0, y0, x1, _ = (float(v) for v in box[:4])
        s = _INPUT / (x1 - x0)
        to_crop = np.array([[s, 0, -x0 * s], [0, s, -y0 * s]])
        crop = cv2.warpAffine(frame, to_crop, (_INPUT, _INPUT), flags=cv2.INTER_AREA,
                              borderMode=cv2.BORDER_CONSTANT)
        self._net.setInput(crop.astype(np.float32).transpose(2, 0, 1)[None] / 255)
        out = dict(zip(self._names, self._net.forward(self._names), strict=True))
        # outputs: Identity [1, 195] = 39 x (x, y, z, visibility, presence) in crop px (the last
        # 6 are auxiliary), Identity_1 [1, 1] person presence, Identity_2 segmentation logits
        landmarks = out["Identity"].reshape(-1, 5)
        lm = landmarks[:NUM_KEYPOINTS]
        pose = np.stack([x0 + lm[:, 0] / s, y0 + lm[:, 1] / s,
                         0.5 + 0.5 * np.tanh(lm[:, 3] / 2)], 1).astype(np.float32)  # sigmoid
        centre = np.array([x0, y0]) + landmarks[NUM_KEYPOINTS, :2] / s
        half = ROI_SCALE / 2 * np.hypot(*(landmarks[NUM_KEYPOINTS + 1, :2]
                                          - landmarks[NUM_KEYPOINTS, :2])) / s
        logits = out["Identity_2"][0, 0]
        mask = cv2.warpAffine(logits, to_crop, (w, h),
                              flags=cv2.WARP_INVERSE_MAP | cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=-1.0) > 0
        return PoseOutput(pose, float(out["Identity_1"].ravel()[0]), mask,
                          np.concatenate([centre - half, centre + half]))


class PoseFiles:
    """Poses read from ``<poses_dir>/<key stem>.json`` (module docstring) or, where that file
    does not exist, from NTU RGB+D's skeleton file of the video
    (:func:`maskdp_jax.anonymize.skeletons.skeleton_path`); ``reads="none"``."""

    reads = "none"

    def __init__(self, poses_dir: str):
        if not os.path.isdir(poses_dir):
            raise InputError(f"{poses_dir}: pose directory not found.")
        self.poses_dir = poses_dir

    def __call__(self, video: np.ndarray, key: str) -> list[np.ndarray]:
        t = len(video)
        path = os.path.splitext(os.path.join(self.poses_dir, key))[0] + ".json"
        skeleton = skeletons.skeleton_path(self.poses_dir, key)
        if not os.path.exists(path) and os.path.exists(skeleton):
            return skeleton_poses(skeleton, t, video.shape[1:3])
        rows = annotations.read_frame_rows(
            path, field="poses", what="pose", width=1 + 3 * NUM_KEYPOINTS, num_frames=t,
            layout="[[frame, x0, y0, v0, ..., x32, y32, v32], ...]")
        return [r.reshape(-1, NUM_KEYPOINTS, 3).astype(np.float32) for r in rows]


def pose_from_joints(joints: np.ndarray, size: tuple[int, int], *,
                     color_size: tuple[int, int] = skeletons.COLOR_SIZE) -> np.ndarray:
    """float32 ``[33, 3]`` keypoints (x, y in video pixels, visibility) of one NTU body's joints
    (``[j, 3]`` rows of :func:`maskdp_jax.anonymize.skeletons.read_joints`, in ``color_size``
    coordinates) for a video of ``size = (h, w)``: each joint on the keypoint
    :data:`maskdp_jax.anonymize.skeletons.TO_BLAZEPOSE` names, its visibility from its tracking
    state (:data:`maskdp_jax.anonymize.skeletons.STATE_VISIBILITY`); keypoints without a joint,
    and joints without finite coordinates, are 0 with visibility 0."""
    h, w = size
    out = np.zeros((NUM_KEYPOINTS, 3), np.float32)
    for joint, keypoint in skeletons.TO_BLAZEPOSE.items():
        if joint < len(joints) and np.isfinite(joints[joint, :2]).all():
            x, y, state = joints[joint]
            out[keypoint] = (x * w / color_size[0], y * h / color_size[1],
                             skeletons.STATE_VISIBILITY[int(min(max(state, 0), 2))])
    return out


def skeleton_poses(path: str, num_frames: int, size: tuple[int, int]) -> list[np.ndarray]:
    """Per frame, float32 ``[n, 33, 3]`` poses (:func:`pose_from_joints`) of an NTU
    ``.skeleton`` file for a video of ``num_frames`` frames of ``size = (h, w)``: one per body
    with at least two tracked joints (the bodies
    :func:`maskdp_jax.anonymize.skeletons.read_boxes` gives boxes for).

    Raises:
      InputError: as :func:`maskdp_jax.anonymize.skeletons.read_frames`.
    """
    out = []
    for bodies in skeletons.read_frames(path, num_frames):
        poses = [pose_from_joints(j, size) for j in bodies if (j[:, 2] > 0).sum() >= 2]
        out.append(np.asarray(poses, np.float32).reshape(-1, NUM_KEYPOINTS, 3))
    return out


def check_poses(poses, num_frames: int, key: str) -> list[np.ndarray]:
    """``poses`` as a list of float32 ``[n, 33, 3]``, one per frame, or an InputError."""
    if len(poses) != num_frames:
        raise InputError(f"{key}: the pose stage returned {len(poses)} frames of poses for a "
                         f"video of {num_frames} frames.")
    out = []
    for p in poses:
        p = np.asarray(p, np.float32)
        if p.ndim != 3 or p.shape[1:] != (NUM_KEYPOINTS, 3) or not np.all(np.isfinite(p)):
            raise InputError(f"{key}: poses must be finite float32 [n, {NUM_KEYPOINTS}, 3] per "
                             f"frame; got {p.shape}.")
        out.append(p)
    return out
