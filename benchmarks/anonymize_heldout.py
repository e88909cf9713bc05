"""The held-out and validation clips of the anonymisation benchmarks: where their frames come
from, how they are read, and how labelled people are counted.

Shared by ``benchmarks.anonymize_quality`` (our segmenters) and ``benchmarks/anonymize_deface.py``
(deface, which runs in an environment of its own, without maskdp_jax): this module imports only
the standard library, NumPy and OpenCV. The labels (``benchmarks/data/anonymize_heldout.json``)
were drawn by hand on the raw frames; their ``about`` field says how.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
import urllib.request

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABELS = os.path.join(ROOT, "benchmarks", "data", "anonymize_heldout.json")
#: Where ``--fetch`` unpacks the sample files by default.
SAMPLES_DIR = os.path.expanduser("~/.cache/maskdp_jax/opencv_samples")
#: The opencv-python source distribution the frames come from, and its digest.
SAMPLES_URL = ("https://files.pythonhosted.org/packages/4a/e7/b70a2d9ab205110d715906fc8ec83fbb0"
               "0404aeb3a37a0654fdb68eb0c8c/opencv-python-4.10.0.84.tar.gz")
SAMPLES_SHA256 = "72d234e4582e9658ffea8e9cae5b63d488ad06994ef12d81dc303b17472f3526"
#: The folders of the source distribution the sample files are taken from.
SAMPLE_FOLDERS = ("/samples/data/", "/samples/winrt/FaceDetection/FaceDetection/Assets/")
#: The table's columns: (name, test on a labelled person's view and tags).
CATEGORIES = (("front", lambda v, t: v == "front" and not t),
              ("side", lambda v, t: v == "side" and not t),
              ("back", lambda v, t: v == "back" and not t),
              ("distant", lambda v, t: "distant" in t),
              ("edge", lambda v, t: "edge" in t),
              ("group", lambda v, t: "group" in t),
              ("partial", lambda v, t: "partial" in t),
              ("all", lambda v, t: True))
#: A still's labelled person is labelled in a frame of its camera clip where at least this share
#: of their box is inside the frame (less, and too little of them shows to call it a person).
MIN_VISIBLE = 0.5
#: ... and is tagged ``edge`` there when the frame cuts more than this share of their box's
#: width or height.
EDGE_CUT = 0.1


def clips(split: str | None = None) -> dict[str, dict]:
    """The labelled clips by name, those of ``split`` (``"test"``, ``"validation"``) or all. A
    clip made from a still by a camera (``"still"``) comes with its people per labelled frame,
    in frame pixels (:func:`camera_people`), like a video's."""
    with open(LABELS) as f:
        found = json.load(f)["clips"]
    return {k: ({**c, "people": camera_people(c)} if "still" in c else c)
            for k, c in found.items() if split is None or c["split"] == split}


def camera_windows(clip: dict) -> np.ndarray:
    """float ``[frames, 4]``: the still's window ``(x0, y0, x1, y1)`` each frame shows, moved
    linearly from the clip's first ``camera`` window to its last (a pan and zoom)."""
    first, last = np.asarray(clip["camera"], np.float64)
    return first + np.linspace(0, 1, clip["frames"])[:, None] * (last - first)


def camera_people(clip: dict) -> dict[str, list]:
    """A still clip's labelled people per labelled frame (``str(i)`` -> ``[x0, y0, x1, y1, view,
    tags...]`` in frame pixels): each still box clipped to the frame's window and scaled to the
    frame, kept where :data:`MIN_VISIBLE` of it shows, tagged ``edge`` where the window cuts
    more than :data:`EDGE_CUT` of it, and with the clip's ``tags`` (e.g. ``group``)."""
    windows = camera_windows(clip)
    width, height = clip["size"]
    out = {}
    for i in clip["labelled"]:
        wx0, wy0, wx1, wy1 = windows[i]
        sx, sy = width / (wx1 - wx0), height / (wy1 - wy0)
        rows = []
        for x0, y0, x1, y1, view, *tags in clip["people"].values():
            cx0, cy0, cx1, cy1 = max(x0, wx0), max(y0, wy0), min(x1, wx1), min(y1, wy1)
            if cx1 <= cx0 or cy1 <= cy0:
                continue
            if (cx1 - cx0) * (cy1 - cy0) < MIN_VISIBLE * (x1 - x0) * (y1 - y0):
                continue
            cut = max((cx0 - x0) / (x1 - x0), (x1 - cx1) / (x1 - x0),
                      (cy0 - y0) / (y1 - y0), (y1 - cy1) / (y1 - y0))
            extra = [t for t in clip.get("tags", []) if t not in tags]
            if cut > EDGE_CUT and "edge" not in tags:
                extra.append("edge")
            box = [int(round((cx0 - wx0) * sx)), int(round((cy0 - wy0) * sy)),
                   int(round((cx1 - wx0) * sx)), int(round((cy1 - wy0) * sy))]
            rows.append([*box, view, *tags, *extra])
        out[str(i)] = rows
    return out


def samples(directory: str, fetch: bool) -> str:
    """The folder holding OpenCV's sample files the clips use; with ``fetch`` downloads the
    opencv-python source distribution (digest checked) and unpacks just those files."""
    names = sorted({n for c in clips().values()
                    for n in c.get("files", [c.get("file", c.get("still"))])})
    if all(os.path.exists(os.path.join(directory, n)) for n in names):
        return directory
    if not fetch:
        sys.exit(f"{directory} lacks {names}: rerun with --fetch (downloads the opencv-python "
                 f"4.10.0.84 source distribution from PyPI, 95 MB) or pass --samples=DIR "
                 "holding those files of an OpenCV source tree (opencv/samples/data and "
                 "opencv/samples/winrt/FaceDetection/FaceDetection/Assets).")
    os.makedirs(directory, exist_ok=True)
    archive = os.path.join(directory, "opencv-python-4.10.0.84.tar.gz")
    if not os.path.exists(archive):
        urllib.request.urlretrieve(SAMPLES_URL, archive + ".part")
        os.replace(archive + ".part", archive)
    with open(archive, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != SAMPLES_SHA256:
        os.remove(archive)
        sys.exit(f"{SAMPLES_URL} has SHA-256 {digest}, expected {SAMPLES_SHA256}; removed.")
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if (os.path.basename(member.name) in names
                    and any(folder in member.name for folder in SAMPLE_FOLDERS)):
                with tar.extractfile(member) as src, open(
                        os.path.join(directory, os.path.basename(member.name)), "wb") as dst:
                    dst.write(src.read())
    os.remove(archive)
    return directory


def frames(clip: dict, directory: str) -> np.ndarray:
    """uint8 ``[T, H, W, 3]`` RGB frames of one clip (videos read, not seeked: exact indices; a
    still's camera clip resampled bilinearly from each frame's window)."""
    if "still" in clip:
        still = cv2.imread(os.path.join(directory, clip["still"]))[..., ::-1]
        width, height = clip["size"]
        out = []
        for wx0, wy0, wx1, wy1 in camera_windows(clip):
            sx, sy = width / (wx1 - wx0), height / (wy1 - wy0)
            warp = np.array([[sx, 0, -wx0 * sx], [0, sy, -wy0 * sy]])
            out.append(cv2.warpAffine(still, warp, (width, height), flags=cv2.INTER_LINEAR,
                                      borderMode=cv2.BORDER_REPLICATE))
    elif "files" in clip:
        out = [cv2.imread(os.path.join(directory, n))[..., ::-1] for n in clip["files"]]
    else:
        capture = cv2.VideoCapture(os.path.join(directory, clip["file"]))
        out = []
        for i in range(clip["start"] + clip["frames"]):
            ok, frame = capture.read()
            if not ok:
                sys.exit(f"{clip['file']}: frame {i} could not be read.")
            if i >= clip["start"]:
                out.append(frame[..., ::-1])
    return np.ascontiguousarray(np.stack(out))


def count(people: list[dict], key: str) -> dict[str, tuple[int, int]]:
    """Per :data:`CATEGORIES` column, (people whose ``key`` is true, people) among ``people``
    (dicts with ``view``, ``tags`` and ``key``)."""
    out = {}
    for name, test in CATEGORIES:
        chosen = [p for p in people if test(p["view"], p["tags"])]
        out[name] = (sum(bool(p[key]) for p in chosen), len(chosen))
    return out
