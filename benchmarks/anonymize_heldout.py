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
#: The table's columns: (name, test on a labelled person's view and tags).
CATEGORIES = (("front", lambda v, t: v == "front" and not t),
              ("side", lambda v, t: v == "side" and not t),
              ("back", lambda v, t: v == "back" and not t),
              ("distant", lambda v, t: "distant" in t),
              ("edge", lambda v, t: "edge" in t),
              ("all", lambda v, t: True))


def clips(split: str | None = None) -> dict[str, dict]:
    """The labelled clips by name, those of ``split`` (``"test"``, ``"validation"``) or all."""
    with open(LABELS) as f:
        found = json.load(f)["clips"]
    return {k: c for k, c in found.items() if split is None or c["split"] == split}


def samples(directory: str, fetch: bool) -> str:
    """The folder holding OpenCV's sample files the clips use; with ``fetch`` downloads the
    opencv-python source distribution (digest checked) and unpacks just those files."""
    names = sorted({n for c in clips().values() for n in c.get("files", [c.get("file")])})
    if all(os.path.exists(os.path.join(directory, n)) for n in names):
        return directory
    if not fetch:
        sys.exit(f"{directory} lacks {names}: rerun with --fetch (downloads the opencv-python "
                 f"4.10.0.84 source distribution from PyPI, 95 MB) or pass --samples=DIR "
                 "holding opencv/samples/data of an OpenCV source tree.")
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
            if os.path.basename(member.name) in names and "/samples/data/" in member.name:
                with tar.extractfile(member) as src, open(
                        os.path.join(directory, os.path.basename(member.name)), "wb") as dst:
                    dst.write(src.read())
    os.remove(archive)
    return directory


def frames(clip: dict, directory: str) -> np.ndarray:
    """uint8 ``[T, H, W, 3]`` RGB frames of one clip (videos read, not seeked: exact indices)."""
    if "files" in clip:
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
