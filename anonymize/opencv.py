"""The one import of OpenCV (``opencv-python-headless``, pinned in requirements.txt)."""

from __future__ import annotations


def cv2():
    """The ``cv2`` module, or an ImportError that says how to install it."""
    try:
        import cv2 as module
    except ImportError as e:  # pragma: no cover - requirements.txt pins it
        raise ImportError(
            "anonymize needs OpenCV: pip install -r requirements.txt (opencv-python-headless)."
        ) from e
    return module
