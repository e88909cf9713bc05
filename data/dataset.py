"""What every dataset split is: the :class:`Dataset` protocol, and :func:`mask_chunks` over it.

The sources (:class:`maskdp_jax.data.synthetic.SyntheticMaskedActions`,
:class:`maskdp_jax.data.video_dataset.VideoDataset`,
:class:`maskdp_jax.data.tfds_ucf101.TfdsUcf101`) satisfy it structurally; the trainer, the
evaluation and the batch splitter read a split only through it, so they do not know which source
they read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import numpy as np

from maskdp_jax.data import clips


@runtime_checkable
class Dataset(Protocol):
    """One split of a masked video dataset.

    Attributes:
      name: ``"<dataset>/<split>"``, for messages.
      class_names: ``[num_classes]`` names; a label indexes them.
      labels: ``[N]`` int32 class indices.
      has_masks: whether the split carries pixel masks; without them every pixel is private
        (``dp`` and ``nonprivate`` train, ``maskdp`` refuses).
      pixel_norm: how the split's uint8 pixels become the model's input
        (:class:`maskdp_jax.data.clips.PixelNorm`).
    """

    name: str
    class_names: tuple[str, ...]
    labels: np.ndarray
    has_masks: bool
    pixel_norm: clips.PixelNorm

    @property
    def num_classes(self) -> int:
        """``len(class_names)``."""

    def __len__(self) -> int:
        """N, the number of videos."""

    def get_batch(
        self, indices: np.ndarray, *, num_clips: int = 1, seed: int | None = None,
        normalize: bool = True,
    ) -> dict[str, np.ndarray]:
        """Clips of videos ``indices``.

        Args:
          indices: ``[n]`` video indices.
          num_clips: K clips per video.
          seed: training draws the views from ``numpy.random.default_rng(seed)``; ``None`` gives
            the fixed evaluation views (for real videos ``K * eval_crops`` of them), whose logits
            the evaluation averages.
          normalize: False leaves ``video`` as uint8 pixels, normalised later by ``pixel_norm``
            (the training step does it on the device: less to copy and to transfer). A split
            whose clips are not pixels (a view of another split, ``run.views``) returns its
            float32 model input either way.

        Returns:
          ``video`` float32 ``[n, K, T, H, W, 3]`` (normalised; uint8 pixels with
          ``normalize=False``), ``mask`` uint8
          ``[n, K, T, H, W]`` (1 = public, *not protected*; 0 = private) and ``label`` int32
          ``[n]``.
        """

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        """Pixel masks of the centre evaluation view of videos ``indices``, without decoding video.

        Returns:
          uint8 ``[n, T, H, W]``, 1 = public: ``get_batch(indices, num_clips=1)["mask"][:, 0]``
          for the fixed views.

        Raises:
          ValueError: the split has no masks (``has_masks`` is False).
        """


def mask_chunks(dataset: Dataset, *, chunk: int = 64) -> Iterator[np.ndarray]:
    """The centre-view masks of every video of ``dataset``, ``chunk`` videos at a time.

    Yields:
      uint8 ``[n <= chunk, T, H, W]`` (:meth:`Dataset.get_masks`), in index order; a video
      dataset reads only its mask files, so the whole split is never in memory.
    """
    for start in range(0, len(dataset), chunk):
        yield dataset.get_masks(np.arange(start, min(start + chunk, len(dataset))))


def check_masks(dataset: Dataset) -> None:
    """Read every centre-view mask of ``dataset`` once (:func:`mask_chunks`), so that a malformed
    mask file is refused (:func:`maskdp_jax.data.decode.binarize_mask`) before a run or a clip store
    writes anything, not steps into it.

    Raises:
      ValueError: naming the file and what is wrong with it.
    """
    for _ in mask_chunks(dataset):
        pass


class Subset:
    """The videos ``indices`` of a split, themselves a :class:`Dataset` (every attribute not
    defined here is the wrapped split's).

    Args:
      dataset: the split to take videos from.
      indices: ``[n]`` distinct video indices of ``dataset``.
      name: the subset's name for messages and reports.
    """

    def __init__(self, dataset: Dataset, indices: np.ndarray, *, name: str):
        indices = np.asarray(indices, np.int64)
        if len(np.unique(indices)) != len(indices) or (
                len(indices) and not 0 <= indices.min() <= indices.max() < len(dataset)):
            raise ValueError(f"{name}: subset indices must be distinct indices of "
                             f"{dataset.name} (0..{len(dataset) - 1}).")
        self.dataset, self.indices, self.name = dataset, indices, name
        self.labels = np.asarray(dataset.labels)[indices]
        subjects = getattr(dataset, "subjects", None)
        self.subjects = None if subjects is None else np.asarray(subjects)[indices]

    def __getattr__(self, name):  # class_names, has_masks, pixel_norm, clip_frames, ...
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def num_classes(self) -> int:
        return self.dataset.num_classes

    def get_batch(self, indices: np.ndarray, **kwargs) -> dict[str, np.ndarray]:
        """:meth:`Dataset.get_batch` of the subset's videos ``indices``."""
        return self.dataset.get_batch(self.indices[np.asarray(indices)], **kwargs)

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        """:meth:`Dataset.get_masks` of the subset's videos ``indices``."""
        return self.dataset.get_masks(self.indices[np.asarray(indices)])

    def mask_coverage(self, indices: np.ndarray) -> np.ndarray:
        """The wrapped split's ``mask_coverage`` of the subset's videos ``indices``."""
        return self.dataset.mask_coverage(self.indices[np.asarray(indices)])

    def fingerprint(self) -> str:
        """sha256 of the wrapped split's fingerprint and the subset's indices."""
        h = hashlib.sha256(self.dataset.fingerprint().encode())
        h.update(self.indices.tobytes())
        return h.hexdigest()


def validation_split(train: Dataset, *, fraction: float, seed: int) -> tuple[Subset, Subset]:
    """``(train', validation)``: a seeded, class-stratified ``fraction`` of the training videos
    held out for choosing hyper-parameters, so that the test split is read only for the numbers
    a study reports.

    Both parts are training data: a run evaluated on the validation part publishes an accuracy
    measured on private videos it did not train on, outside its DP guarantee, like any
    held-out accuracy. ``seed`` is public; the draw depends only on it and the labels.

    Raises:
      ValueError: ``fraction`` outside (0, 1), or a class with fewer than 2 videos.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1); got {fraction}.")
    labels = np.asarray(train.labels)
    rng = np.random.default_rng([seed, 3])
    held = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        if len(members) < 2:
            raise ValueError(f"{train.name}: class {c} has {len(members)} video(s); a "
                             "validation split needs at least 2 per class.")
        k = min(len(members) - 1, max(1, round(fraction * len(members))))
        held.append(rng.choice(members, k, replace=False))
    held = np.sort(np.concatenate(held))
    kept = np.setdiff1d(np.arange(len(labels)), held)
    return (Subset(train, kept, name=f"{train.name}[train part]"),
            Subset(train, held, name=f"{train.name}[validation]"))
