"""What every dataset split is: the :class:`Dataset` protocol, and :func:`mask_chunks` over it.

The sources (:class:`maskdp_jax.data.synthetic.SyntheticMaskedActions`,
:class:`maskdp_jax.data.video_dataset.VideoDataset`,
:class:`maskdp_jax.data.tfds_ucf101.TfdsUcf101`) satisfy it structurally; the trainer, the
evaluation and the batch splitter read a split only through it, so they do not know which source
they read.
"""

from __future__ import annotations

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
