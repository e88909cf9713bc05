"""The one import of OpenCV (``opencv-python-headless``, pinned in requirements.txt)."""

from __future__ import annotations


def cv2():
    """The ``cv2`` module, or an ImportError that says how to install it."""
    try:
        import cv2 as module
    except ImportError as e:  # pragma: no cover - requirements-dev.txt installs it
        raise ImportError(
            "anonymize needs OpenCV (opencv-python-headless): pip install -r requirements.txt "
            "(or pip install -e .)."
        ) from e
    return module
