r"""Person boxes and poses from a dataset's own skeletons: NTU RGB+D's ``.skeleton`` files.

NTU RGB+D 60/120 ship, for every clip ``SsssCcccPpppRrrrAaaa_rgb.avi``, a Kinect v2 skeleton file
``SsssCcccPpppRrrrAaaa.skeleton`` (Shahroudy et al. 2016; the format of the dataset's own reader,
``read_skeleton`` in its GitHub repository). With them a user needs no person detector: the
segmenter reads boxes, not pixels (``reads="boxes"``), so the public mask cannot depend on what
else the frame shows. No library reads the format (it is the dataset's own text layout), hence
this reader. The layout, whitespace-separated, one record per line::

    F                                   frames
    per frame:  B                       bodies in this frame (0 allowed)
      per body: 10 numbers              bodyID clippedEdges handLeftConfidence handLeftState
                                        handRightConfidence handRightState isRestricted
                                        leanX leanY trackingState
                J                       joints (25)
                per joint: 12 numbers   x y z depthX depthY colorX colorY
                                        orientationW orientationX orientationY orientationZ
                                        trackingState

A body's box is the extent of its tracked joints (``trackingState`` > 0) in the colour image,
padded because the joints are centres, not outlines: the head joint is the head's middle and the
foot joints are the ankles' front, and the hands' joints are palm centres (:data:`PAD`, in
units of the joints' height). The colour coordinates are of NTU's 1920×1080 frames
(:data:`COLOR_SIZE`) and are scaled to the video's size, so a resized copy of the dataset gets
its boxes too. GrabCut then finds the person inside the box (:class:`~maskdp_jax.anonymize.segment
.GrabCutPeople`).

A body's pose for the avatar (:func:`maskdp_jax.anonymize.pose.skeleton_poses`, read by
:class:`maskdp_jax.anonymize.pose.PoseFiles` where no ``.json`` pose file exists) is its joints
placed at the BlazePose keypoints they correspond to (:data:`TO_BLAZEPOSE`), visibility 1 for
a tracked joint, 0.5 for one Kinect inferred, 0 for the rest and for the keypoints Kinect has no
joint for (eyes, ears, mouth). Toyota Smarthome's skeletons (LCR-Net's JSON poses) are another
format: convert them to box files (:func:`maskdp_jax.anonymize.segment.read_boxes`) and pose
files.
"""

from __future__ import annotations

import os

import numpy as np

from maskdp_jax.anonymize.stages import InputError

#: NTU RGB+D's colour frame, (width, height): the space of the files' colorX, colorY.
COLOR_SIZE = (1920, 1080)
#: The padding of a joints' box (top, bottom, each side) in fractions of its height. The head
#: joint lies about half a head (≈ 0.06 of a standing body) below the crown, the ankle joints
#: above the soles, and the hands' joints inside the fingers. Set from that anatomy, not tuned
#: on any clip (no NTU video can be downloaded here).
PAD = (0.12, 0.06, 0.08)
_BODY_FIELDS, _JOINT_FIELDS = 10, 12
#: Kinect v2 joint (NTU's order, 0-based) -> BlazePose keypoint (pose.KEYPOINTS): head -> nose,
#: shoulders, elbows, wrists, hand tips -> index fingers, thumbs, hips, knees, ankles, feet ->
#: foot indices. Kinect's left is the person's left, as BlazePose's is.
TO_BLAZEPOSE = {3: 0, 4: 11, 8: 12, 5: 13, 9: 14, 6: 15, 10: 16, 21: 19, 23: 20, 22: 21, 24: 22,
                12: 23, 16: 24, 13: 25, 17: 26, 14: 27, 18: 28, 15: 31, 19: 32}
#: Visibility given to a joint by its Kinect tracking state (0 not tracked, 1 inferred, 2
#: tracked).
STATE_VISIBILITY = (0.0, 0.5, 1.0)


def skeleton_path(boxes_dir: str, key: str) -> str:
    """The skeleton file of video ``key`` in ``boxes_dir``: ``<stem>.skeleton``, where NTU's
    ``_rgb`` suffix of the video's stem is dropped (``S001C001P001R001A001_rgb.avi`` →
    ``S001C001P001R001A001.skeleton``)."""
    stem = os.path.splitext(os.path.join(boxes_dir, key))[0]
    if stem.endswith("_rgb"):
        stem = stem[: -len("_rgb")]
    return stem + ".skeleton"


def read_joints(path: str) -> list[list[np.ndarray]]:
    """Per frame, per body, its joints ``[j, 3]``: colour-image x, y and Kinect tracking state
    (0 not tracked, 1 inferred, 2 tracked), in the file's joint order.

    Raises:
      InputError: the file cannot be read, ends early, or holds a line of the wrong length or
        a value that is not a number; the message names the file and the line.
    """
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the skeleton file ({err}).") from err
    at = 0

    def row(width: int, what: str) -> list[float]:
        nonlocal at
        while at < len(lines) and not lines[at].strip():
            at += 1  # blank lines: the dataset's files end with one
        if at >= len(lines):
            raise InputError(f"{path}: the skeleton file ends before its {what}.")
        fields = lines[at].split()
        at += 1
        if len(fields) != width:
            raise InputError(f"{path}, line {at}: expected {width} numbers ({what}); got "
                             f"{len(fields)}.")
        try:
            return [float(v) for v in fields]
        except ValueError as err:
            raise InputError(f"{path}, line {at}: {what} is not numbers ({err}).") from err

    def count(what: str) -> int:
        value = row(1, what)[0]
        if value != int(value) or value < 0:
            raise InputError(f"{path}, line {at}: {what} must be a whole number >= 0; got "
                             f"{value:g}.")
        return int(value)

    frames = []
    for t in range(count("frame count")):
        bodies = []
        for _ in range(count(f"body count of frame {t}")):
            row(_BODY_FIELDS, f"body line of frame {t}")
            joints = [row(_JOINT_FIELDS, f"joint of frame {t}")
                      for _ in range(count(f"joint count of frame {t}"))]
            bodies.append(np.asarray([(j[5], j[6], j[11] if np.isfinite(j[5:7]).all() else 0)
                                      for j in joints], np.float64).reshape(-1, 3))
        frames.append(bodies)
    return frames


def boxes_from_joints(joints: np.ndarray, size: tuple[int, int], *,
                      pad: tuple[float, float, float] = PAD,
                      color_size: tuple[int, int] = COLOR_SIZE) -> np.ndarray | None:
    """The padded box ``[x0, y0, x1, y1]`` (float, video pixels) of one body's tracked joints
    (``[j, 3]`` rows of :func:`read_joints`, tracking state > 0) in ``color_size`` coordinates,
    for a video of ``size = (height, width)``; None for fewer than two tracked joints."""
    joints = joints[joints[:, 2] > 0, :2]
    if len(joints) < 2:
        return None
    h, w = size
    xy = joints * np.array([w / color_size[0], h / color_size[1]])
    (x0, y0), (x1, y1) = xy.min(axis=0), xy.max(axis=0)
    tall = max(y1 - y0, 1.0)
    top, bottom, side = pad
    return np.array([x0 - side * tall, y0 - top * tall, x1 + side * tall, y1 + bottom * tall])


def read_frames(path: str, num_frames: int) -> list[list[np.ndarray]]:
    """:func:`read_joints` of a skeleton file that must have ``num_frames`` frames.

    Raises:
      InputError: a bad file, or a frame count other than the video's (the skeletons of another
        clip, or a clip cut after its skeletons were made).
    """
    frames = read_joints(path)
    if len(frames) != num_frames:
        raise InputError(f"{path}: {len(frames)} skeleton frames for a video of {num_frames} "
                         "frames; the file belongs to another clip, or the clip was cut.")
    return frames


def read_boxes(path: str, num_frames: int, size: tuple[int, int]) -> list[np.ndarray]:
    """Per frame, float ``[n, 4]`` person boxes of an NTU ``.skeleton`` file (:func:`read_joints`,
    :func:`boxes_from_joints`) for a video of ``num_frames`` frames of ``size = (h, w)``.

    Raises:
      InputError: a bad file (:func:`read_joints`), or a frame count other than the video's
        (boxes of another clip, or a clip cut after its skeletons were made).
    """
    out = []
    for bodies in read_frames(path, num_frames):
        boxes = [b for b in (boxes_from_joints(j, size) for j in bodies) if b is not None]
        out.append(np.asarray(boxes, np.float64).reshape(-1, 4))
    return out
