r"""Feature cache: the frozen prefix's output for a fixed grid of clips of every training video.

With selective fine-tuning (the papers' setting) only the LayerNorms of the last blocks, the final
norm and the head train, and DP training uses no augmentation. So what enters the lowest
trainable block is a fixed function of (video, clip position, view). The cache stores it once,
and training then runs only the trainable suffix. The cache is written by ``run.features``,
which runs the model; this module holds the layout and the reader, a
:class:`maskdp_jax.data.Dataset` whose clips are features.

What is cached, per training video ``i``:

* a fixed grid of ``G`` clips: the split's evaluation views for ``num_clips=G`` (evenly spread,
  centre crop), the same for every run and independent of the data;
* for ``maskdp`` the public and the private view of each clip (the tokeniser's views, made before
  the prefix, as the step makes them) and their ``has_public`` / ``has_private`` flags; for
  ``dp`` and ``nonprivate`` the whole clip;
* the tokens entering the first trainable block, ``[1 + t*h*w, dim]``. When only the final norm
  and the head train, the class token alone ``[1, dim]`` is stored, because the rest is unused.

A training step takes, for each sampled video, K of its G cached clips, drawn without replacement
from ``numpy.random.default_rng(seed)`` (:func:`grid_choice`). The seed is the loader's per-batch
seed, as for pixel clips. This is a coarser clip sampling than the uniform offsets of pixel
training (G positions instead of every frame), and docs/guides/feature_cache.md says so.

Layout (a :mod:`maskdp_jax.data.store` directory: one store, two payloads)::

    <view>.features   [N, G, tokens, dim] float32 or bfloat16, one file per view
    flags.u8          [N, G, 2] uint8: has_public, has_private (maskdp only)
    meta.json, done.txt

Privacy: the cache is pre-processing by a fixed function of each video alone. The frozen weights
are public (pre-trained, or initialised from the public seed), the grid is data-independent, and
the Poisson sampler, clipping, noise and accountant are unchanged. The views are cut before the
prefix, so a video's public-view features depend only on its public pixels. The cache holds
private data, the videos' features, and must be kept as private as the videos: next to the
checkpoints (``<workdir>/private/feature_cache`` by default), never beside the reports.
"""

from __future__ import annotations

import dataclasses
import os

import ml_dtypes
import numpy as np

from maskdp_jax.data import store

CACHE = store.Kind(
    "feature cache",
    "train.py and --config.feature_cache.enabled=True (it writes the cache before the first step)",
    "from other videos or clips, another model, weights or cut, grid, views or dtype",
)
DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
FLAGS = "flags.u8"
VIEWS_BY_MODE = {"maskdp": ("public", "private"), "dp": ("full",), "nonprivate": ("full",)}


@dataclasses.dataclass(frozen=True)
class CacheLayout:
    """The shape of a cache.

    Attributes:
      num_videos: N, the training split's videos.
      grid: G, cached clips per video.
      tokens / dim: one clip's features ``[tokens, dim]``.
      views: ``("public", "private")`` (maskdp) or ``("full",)``.
      dtype: ``"float32"`` or ``"bfloat16"`` on disk (the step computes in float32).
    """

    num_videos: int
    grid: int
    tokens: int
    dim: int
    views: tuple[str, ...]
    dtype: str = "float32"

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"feature_cache.dtype must be one of {sorted(DTYPES)}; "
                             f"got {self.dtype!r}.")
        if self.views not in VIEWS_BY_MODE.values():
            raise ValueError(f"views must be one of {sorted(set(VIEWS_BY_MODE.values()))}; "
                             f"got {self.views}.")

    @property
    def settings(self) -> list:
        """``[G, tokens, dim, views, dtype]``: what a cache's meta and fingerprint record."""
        return [self.grid, self.tokens, self.dim, list(self.views), self.dtype]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.num_videos, self.grid, self.tokens, self.dim)

    @property
    def has_flags(self) -> bool:
        return self.views == VIEWS_BY_MODE["maskdp"]

    def files(self) -> dict[str, int]:
        """File name -> bytes."""
        size = int(np.prod(self.shape)) * DTYPES[self.dtype].itemsize
        out = {f"{v}.features": size for v in self.views}
        if self.has_flags:
            out[FLAGS] = self.num_videos * self.grid * 2
        return out

    def bytes_per_clip(self) -> int:
        """Disk bytes of one cached clip, every view."""
        return sum(self.files().values()) // (self.num_videos * self.grid)

    def open(self, directory: str, mode: str = "r") -> dict[str, np.memmap]:
        """The cache's arrays, memory-mapped (``mode`` ``"r"`` or ``"r+"``)."""
        out = {v: np.memmap(os.path.join(directory, f"{v}.features"), DTYPES[self.dtype], mode,
                            shape=self.shape) for v in self.views}
        if self.has_flags:
            out["flags"] = np.memmap(os.path.join(directory, FLAGS), np.uint8, mode,
                                     shape=(self.num_videos, self.grid, 2))
        return out


def grid_choice(seed, *, num_videos: int, grid: int, num_clips: int) -> np.ndarray:
    """``[n, K]`` cached clip positions of the videos of one batch: K distinct of G per video,
    uniformly, from ``numpy.random.default_rng(seed)``.

    >>> grid_choice([0, 1], num_videos=2, grid=4, num_clips=4).shape
    (2, 4)
    """
    if not 1 <= num_clips <= grid:
        raise ValueError(f"K = {num_clips} clips per video cannot be drawn from a grid of "
                         f"{grid} cached clips; set feature_cache.clips_per_video >= K.")
    keys = np.random.default_rng(seed).random((num_videos, grid))
    return np.argsort(keys, axis=1, kind="stable")[:, :num_clips]


class FeatureCache:
    """A complete cache opened for training: a :class:`maskdp_jax.data.Dataset` whose clips are
    features.

    ``get_batch(indices, num_clips=K, seed=s)`` returns ``label [n]`` and, per view, float32
    ``[n, K, tokens, dim]``: ``video`` (``dp``, ``nonprivate``), or ``public`` and ``private``
    with ``has_public`` / ``has_private`` ``[n, K]`` (``maskdp``: the step's views, made before
    the prefix). It serves training steps only: evaluation reads the test videos.

    Args:
      directory: the cache.
      layout: its shape.
      fingerprint: what the run needs (``run.features.fingerprint``); another cache is refused.
      source: the pixel split it was made from (name, class names, labels).
    """

    has_masks = False  # features, not pixels: get_masks is the source's
    pixel_norm = None  # the clips are already the suffix's input

    def __init__(self, directory: str, *, layout: CacheLayout, fingerprint: str, source):
        self.meta = store.open_complete(directory, kind=CACHE, fingerprint=fingerprint)
        self.directory, self.layout = directory, layout
        self.name = f"{source.name}[feature cache]"
        self.class_names, self.labels = source.class_names, source.labels
        if len(self.labels) != layout.num_videos:
            raise ValueError(f"the feature cache in {directory} holds {layout.num_videos} "
                             f"videos but {source.name} has {len(self.labels)}.")
        self._arrays = layout.open(directory)

    def __len__(self) -> int:
        return self.layout.num_videos

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        raise ValueError(f"{self.name} holds features, not pixel masks; read the masks from the "
                         "pixel split.")

    def get_batch(self, indices: np.ndarray, *, num_clips: int = 1, seed=None,
                  normalize: bool = True) -> dict[str, np.ndarray]:
        del normalize  # features are the suffix's input
        if seed is None:
            raise ValueError(f"{self.name} serves training steps (a seed picks the cached "
                             "clips); evaluation reads the test videos.")
        indices = np.asarray(indices, np.int64)
        pos = grid_choice(seed, num_videos=len(indices), grid=self.layout.grid,
                          num_clips=num_clips)
        rows = indices[:, None]
        out = {"label": self.labels[indices]}
        for view in self.layout.views:
            out["video" if view == "full" else view] = np.asarray(
                self._arrays[view][rows, pos], np.float32)
        if self.layout.has_flags:
            flags = self._arrays["flags"][rows, pos].astype(bool)
            out["has_public"], out["has_private"] = flags[..., 0], flags[..., 1]
        return out
