"""Masked tokenisation: pixel masks -> token cells -> public and private views.

A *token cell* is the block of pixels that one stride of the patch-embedding convolution advances
over (``patch_stride = (st, sh, sw)``, e.g. ``(2, 4, 4)`` for MViTv2). A cell is **public** only if
every pixel in it is public (conservative erosion); all other cells are **private**.

Privacy meaning. The pixel mask ``r`` (1 = public, e.g. a synthetic avatar; 0 = private) is itself
public information: masked adjacency (SPEC.md, paper Definition 2) changes only the *values* of one
video's private pixels, never the mask. Hence

* the public view is a function of ``(video[r == 1], r)`` only: changing any private pixel leaves it
  bit-identical (tested in ``tests/test_tokenizer.py``);
* the private view may contain public pixels (those of mixed cells); that is harmless because public
  pixels are not protected.

Everything here is written for one clip and is jit/vmap friendly. Host-side validation of masks
coming from files lives in :func:`validate_pixel_mask`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import einops
import jax.numpy as jnp
import numpy as np


class Views(NamedTuple):
    """The two views of one clip (or of a batch of clips, with leading axes).

    Attributes:
      public: ``[..., T, H, W, C]`` pixels of public cells, every other pixel ``fill_value``.
      private: ``[..., T, H, W, C]`` pixels of private cells, every other pixel ``fill_value``.
      has_public: ``[...]`` bool, the clip has at least one public cell.
      has_private: ``[...]`` bool, the clip has at least one private cell.
    """

    public: jnp.ndarray
    private: jnp.ndarray
    has_public: jnp.ndarray
    has_private: jnp.ndarray


def _check_divisible(shape: tuple[int, ...], patch_stride: tuple[int, int, int]) -> None:
    if len(shape) != 3:
        raise ValueError(f"pixel mask must be [T, H, W]; got shape {shape}.")
    for name, size, stride in zip("THW", shape, patch_stride, strict=True):
        if size % stride:
            raise ValueError(
                f"mask {name}={size} is not divisible by the patch stride {stride} "
                f"(patch_stride={patch_stride}); resize or crop clips to a multiple of it."
            )


def public_cells(pixel_mask: jnp.ndarray, *, patch_stride: tuple[int, int, int]) -> jnp.ndarray:
    """Token-cell mask of one clip.

    Args:
      pixel_mask: ``[T, H, W]`` with 1 (or True) = public pixel, 0 = private pixel.
      patch_stride: ``(st, sh, sw)``, the stride of the model's patch embedding.

    Returns:
      ``[T // st, H // sh, W // sw]`` bool, True where *every* pixel of the cell is public.

    >>> import numpy as np
    >>> m = np.ones((2, 4, 4), np.uint8); m[0, 0, 0] = 0
    >>> public_cells(m, patch_stride=(1, 2, 2)).astype(int).tolist()
    [[[0, 1], [1, 1]], [[1, 1], [1, 1]]]
    """
    _check_divisible(tuple(pixel_mask.shape), patch_stride)
    st, sh, sw = patch_stride
    public = jnp.asarray(pixel_mask) > 0
    return einops.reduce(
        public, "(t st) (h sh) (w sw) -> t h w", "min", st=st, sh=sh, sw=sw
    )


def cells_to_pixels(cells: jnp.ndarray, *, patch_stride: tuple[int, int, int]) -> jnp.ndarray:
    """Broadcast a ``[T', H', W']`` cell mask back to ``[T'*st, H'*sh, W'*sw]`` pixels."""
    st, sh, sw = patch_stride
    return einops.repeat(cells, "t h w -> (t st) (h sh) (w sw)", st=st, sh=sh, sw=sw)


def make_views(
    video: jnp.ndarray,
    pixel_mask: jnp.ndarray,
    *,
    patch_stride: tuple[int, int, int],
    fill_value: float = 0.0,
) -> Views:
    """Split one clip into its public and private view.

    Args:
      video: ``[T, H, W, C]`` float, normalised pixels.
      pixel_mask: ``[T, H, W]``, 1 = public (not protected), 0 = private (protected by DP).
      patch_stride: the patch-embedding stride that defines token cells.
      fill_value: value written where a view hides a cell (0 is the dataset mean after
        normalisation). It is a constant, so it carries no information about either part.

    Returns:
      :class:`Views` for the clip.
    """
    cells = public_cells(pixel_mask, patch_stride=patch_stride)
    public_pixels = cells_to_pixels(cells, patch_stride=patch_stride)[..., None]
    fill = jnp.asarray(fill_value, video.dtype)
    return Views(
        public=jnp.where(public_pixels, video, fill),
        private=jnp.where(public_pixels, fill, video),
        has_public=jnp.any(cells),
        has_private=jnp.any(~cells),
    )


def validate_pixel_mask(
    mask: np.ndarray, *, video_shape: tuple[int, ...], source: str = "mask"
) -> np.ndarray:
    """Check a mask loaded on the host and return it as ``uint8`` in {0, 1}.

    Accepted values are {0, 1} (bool or integer) or {0, 255} (8-bit mask images/videos).

    Args:
      mask: ``[T, H, W]`` array as read from disk.
      video_shape: ``(T, H, W[, C])`` of the video it belongs to.
      source: file or dataset name, used in error messages.

    Returns:
      ``[T, H, W]`` uint8 with 1 = public, 0 = private.

    Raises:
      ValueError: wrong rank, shape different from the video's, or values outside {0,1}/{0,255}.
    """
    mask = np.asarray(mask)
    if mask.ndim != 3:
        raise ValueError(f"{source}: mask must be [T, H, W]; got shape {mask.shape}.")
    if tuple(mask.shape) != tuple(video_shape[:3]):
        raise ValueError(
            f"{source}: mask shape {mask.shape} does not match the video's [T, H, W] "
            f"{tuple(video_shape[:3])}."
        )
    values = np.unique(mask)
    if mask.dtype == bool or set(values.tolist()) <= {0, 1}:
        return mask.astype(np.uint8)
    if set(values.tolist()) <= {0, 255}:
        return (mask == 255).astype(np.uint8)
    raise ValueError(
        f"{source}: mask values must be binary, {{0, 1}} or {{0, 255}} (1/255 = public); "
        f"found {values[:10].tolist()}{' ...' if values.size > 10 else ''}."
    )


def warn_degenerate_masks(
    masks: np.ndarray, *, patch_stride: tuple[int, int, int], source: str = "dataset"
) -> tuple[int, int]:
    """Warn about videos with no private or no public token cells.

    Args:
      masks: ``[N, T, H, W]`` (or ``[N, K, T, H, W]``) pixel masks, 1 = public.
      patch_stride: the patch-embedding stride.
      source: dataset name for the message.

    Returns:
      ``(num_all_public, num_all_private)`` counts of videos.
    """
    masks = np.asarray(masks) > 0
    n = masks.shape[0]
    flat = masks.reshape(n, -1, *masks.shape[-3:])
    st, sh, sw = patch_stride
    t, h, w = flat.shape[-3:]
    _check_divisible((t, h, w), patch_stride)
    cells = flat.reshape(n, flat.shape[1], t // st, st, h // sh, sh, w // sw, sw).min(
        axis=(3, 5, 7)
    )
    all_public = int(np.sum(cells.all(axis=(1, 2, 3, 4))))
    all_private = int(np.sum(~cells.any(axis=(1, 2, 3, 4))))
    if all_public:
        warnings.warn(
            f"{source}: {all_public}/{n} videos have no private token cell. They train without "
            "noise and contribute no private gradient; under masked adjacency they have nothing "
            "protected (their content is treated as public).",
            stacklevel=2,
        )
    if all_private:
        warnings.warn(
            f"{source}: {all_private}/{n} videos have no public token cell (after conservative "
            "erosion to the patch grid). For them MaskDP is ordinary DP-SGD on the whole video; "
            "they contribute no public gradient.",
            stacklevel=2,
        )
    return all_public, all_private
