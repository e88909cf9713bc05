"""Evaluation on a held-out split: multi-view logits and accuracy metrics.

Evaluation is not private: it reads the (held-out) test videos in the clear and its numbers are
published as they are, so it runs after training, outside the privacy guard's ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax.core import tokenizer, train_step
from maskdp_jax.data import Dataset

PyTree = Any
VIEWS = ("full", "public", "private", "two_view")


def predict(
    apply_fn: Callable[[PyTree, jnp.ndarray], jnp.ndarray],
    params: PyTree,
    dataset: Dataset,
    *,
    num_clips: int = 1,
    batch_size: int = 64,
    view: str = "full",
    tokens: tokenizer.Tokenizer | None = None,
) -> np.ndarray:
    """Logits for every video of ``dataset``, averaged over its ``num_clips`` evaluation views.

    Args:
      apply_fn: ``apply_fn(params, x [n, T, H, W, C]) -> logits [n, classes]``.
      params: full parameter tree.
      dataset: a :class:`maskdp_jax.data.Dataset` (``__len__``, ``pixel_norm`` and
        ``get_batch(indices, num_clips=K, seed=None, normalize=False)`` are read) returning
        ``video [n, V, T, H, W, C]`` with V fixed views (V = K, or K temporal x S spatial crops for
        real videos); uint8 clips are normalised on the device, as in training.
      num_clips: K, temporal views per video; the logits of all V views are averaged.
      batch_size: videos per device call (the last call is padded to keep one compiled shape).
      view: what the model sees of each test clip. ``"full"`` (the evaluation of every mode): the
        whole clip. Diagnostics for a model trained on views (``maskdp``), using the test videos'
        masks and the training tokeniser: ``"public"`` / ``"private"``: that view only;
        ``"two_view"``: the sum of the two views' log-probabilities (the model's two training
        inputs, combined as a product of experts).
      tokens: the training :class:`~maskdp_jax.core.tokenizer.Tokenizer` (cell geometry, fill
        value), needed for every view but ``"full"``. A batch that carries ``fill``
        (:class:`maskdp_jax.run.views.PublicFill`) fills the views' hidden cells with it.

    Returns:
      ``[N, classes]`` float32 logits (log-probabilities for ``"two_view"``).
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}; got {view!r}.")
    if view != "full" and tokens is None:
        raise ValueError(f"view {view!r} needs the tokeniser (tokens=Tokenizer(patch_stride=...)).")

    pixel_norm = dataset.pixel_norm

    def views_forward(params, video, mask, fill):
        video = train_step.model_video(video, pixel_norm)
        if view == "full":
            return apply_fn(params, video)
        if fill is not None:
            fill = train_step.model_video(fill, pixel_norm)
        split = tokens.views(video, mask, fill=fill)
        if view != "two_view":
            return apply_fn(params, getattr(split, view))
        return (jax.nn.log_softmax(apply_fn(params, split.public))
                + jax.nn.log_softmax(apply_fn(params, split.private)))

    forward = jax.jit(views_forward)
    outputs = []
    n = len(dataset)
    for start in range(0, n, batch_size):
        idx = np.arange(start, min(start + batch_size, n))
        padded = np.concatenate([idx, np.full(batch_size - len(idx), idx[-1])])
        batch = dataset.get_batch(padded, num_clips=num_clips, seed=None, normalize=False)
        video = batch["video"]
        views = video.shape[1]
        flat = video.reshape(batch_size * views, *video.shape[2:])
        if view == "full":
            mask = np.zeros(flat.shape[:4], np.uint8)  # unused
        elif batch.get("mask") is None:
            raise ValueError(f"view {view!r} needs per-video masks; {dataset.name!r} has none.")
        else:
            mask = batch["mask"].reshape(flat.shape[:4])
        fill = batch.get("fill") if view != "full" else None
        if fill is not None:  # the public backgrounds the model's views were trained with
            fill = fill.reshape(flat.shape)
        logits = np.asarray(forward(params, flat, mask, fill)).reshape(batch_size, views, -1)
        outputs.append(logits.mean(axis=1)[: len(idx)])
    return np.concatenate(outputs)


def accuracy_metrics(logits: np.ndarray, labels: np.ndarray, num_classes: int) -> dict:
    """Top-1, top-5, mean per-class accuracy (Toyota Smarthome's metric), per-class table and
    confusion matrix.

    Args:
      logits: ``[N, num_classes]``.
      labels: ``[N]`` int class indices.
      num_classes: number of classes.

    Returns:
      dict with ``top1``, ``top5`` (top-k with k = min(5, classes)), ``mean_class_accuracy``,
      ``per_class_accuracy`` (None for classes absent from ``labels``; they are left out of the
      mean), ``confusion`` (``[true][predicted]`` counts) and ``num_examples``.

    >>> m = accuracy_metrics(np.eye(3)[[0, 1, 1]], np.array([0, 1, 2]), 3)
    >>> round(m["top1"], 3), m["mean_class_accuracy"], m["confusion"][2]
    (0.667, 0.6666666666666666, [0, 1, 0])
    """
    labels = np.asarray(labels)
    logits = np.asarray(logits)
    pred = np.argmax(logits, axis=-1)
    correct = pred == labels
    k = min(5, num_classes)
    top_k = np.argsort(-logits, axis=-1)[:, :k]
    per_class = np.array([
        correct[labels == c].mean() if np.any(labels == c) else np.nan for c in range(num_classes)
    ])
    confusion = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(confusion, (labels, pred), 1)
    return {
        "top1": float(correct.mean()),
        "top5": float(np.mean(np.any(top_k == labels[:, None], axis=1))),
        "mean_class_accuracy": float(np.nanmean(per_class)),
        "per_class_accuracy": [None if np.isnan(a) else float(a) for a in per_class],
        "confusion": confusion.tolist(),
        "num_examples": int(len(labels)),
    }
