"""Per-frame annotation files of a video: the person boxes and poses a dataset or a user supplies.

One reader for both (:func:`read_frame_rows`), used by the box segmenter
(:mod:`maskdp_jax.anonymize.segment`) and the pose files (:mod:`maskdp_jax.anonymize.pose`).
"""

from __future__ import annotations

import json

import numpy as np

from maskdp_jax.data import decode


def read_frame_rows(path: str, *, field: str, what: str, width: int, num_frames: int,
                    layout: str) -> list[np.ndarray]:
    """Per-frame rows from a JSON file ``{field: [[frame, v1, ..., v_{width-1}], ...]}``: for each
    of ``num_frames`` frames the ``[n, width - 1]`` float64 rows of that frame (n may be 0).

    Raises:
      data.decode.BadVideoError: the file is unreadable, not of that layout (``layout`` is quoted
        in the message), or a frame index is not an integer in ``[0, num_frames)``.
    """
    try:
        with open(path) as f:
            rows = np.reshape(np.asarray(json.load(f)[field], np.float64), (-1, width))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise decode.BadVideoError(
            path, f"{what} file unreadable ({type(e).__name__}: {e}); expected "
                  f'{{"{field}": {layout}}}.') from e
    frame = rows[:, 0].astype(np.int64)
    if rows.size and (frame.min() < 0 or frame.max() >= num_frames
                      or not np.array_equal(frame, rows[:, 0])):
        raise decode.BadVideoError(
            path, f"{what} frame indices must be integers in [0, {num_frames}).")
    return [rows[frame == i, 1:] for i in range(num_frames)]
