"""Checks of a split's class labels (public under masked adjacency, but they must be valid).

JAX does not raise on a bad label: in the cross-entropy a label >= num_classes gives a NaN loss
(whose per-example gradient the clipper then zeroes and merely counts), a label of -1 silently
means the last class, and a float label is truncated. Each trains another task than the one
reported, so :func:`check_labels` refuses them when a split is built
(:func:`maskdp_jax.data.check_splits`), before any training. A class without training videos is
refused by the folder layouts (:mod:`maskdp_jax.data.layouts`, naming the class); the synthetic
dataset has every class in every split.

>>> import numpy as np
>>> check_labels(np.array([0, 1, 2], np.int32), num_classes=3, source="demo")
>>> check_labels(np.array([0, 3]), num_classes=3, source="demo")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: demo: labels must be class indices in [0, 3); found 1 outside (e.g. 3). ...
"""

from __future__ import annotations

import numpy as np


def check_labels(
    labels: np.ndarray, *, num_classes: int, source: str, num_examples: int | None = None
) -> None:
    """Refuse labels that are not valid class indices of the split.

    Args:
      labels: ``[N]`` class indices, an integer dtype.
      num_classes: number of classes of the classifier.
      source: dataset or split name for the message.
      num_examples: N, the number of videos the labels belong to (checked if given).

    Raises:
      TypeError: labels of a non-integer dtype.
      ValueError: wrong rank or length, indices outside ``[0, num_classes)``.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{source}: labels must be a 1-D array [N]; got shape {labels.shape}.")
    if num_examples is not None and len(labels) != num_examples:
        raise ValueError(
            f"{source}: {len(labels)} labels for {num_examples} videos; every video needs "
            "exactly one label."
        )
    if labels.dtype == bool or not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(
            f"{source}: labels must be integer class indices; got dtype {labels.dtype}. Map "
            "class names or float labels to int32 indices in [0, num_classes)."
        )
    bad = labels[(labels < 0) | (labels >= num_classes)]
    if bad.size:
        raise ValueError(
            f"{source}: labels must be class indices in [0, {num_classes}); found {bad.size} "
            f"outside (e.g. {bad[0]}). Check the class index file or num_classes."
        )
