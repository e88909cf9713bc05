"""Masked tokenisation: pixel masks -> token cells -> public and private views.

A *token cell* is the block of pixels that one stride of the patch-embedding convolution advances
over (``patch_stride = (st, sh, sw)``, e.g. ``(2, 4, 4)`` for MViTv2). A cell is **public** only if
every pixel in it is public (conservative erosion); all other cells are **private**.

Privacy meaning. The pixel mask ``r`` (1 = public, e.g. a synthetic avatar; 0 = private) is itself
public information: masked adjacency (docs/design.md, paper Definition 2) changes only the
*values* of one video's private pixels, never the mask. Hence

* the public view is a function of ``(video[r == 1], r)`` only: changing any private pixel leaves it
  bit-identical (tested in ``tests/test_maskdp_jax_tokenizer.py``);
* the private view may contain public pixels (those of mixed cells); that is harmless because public
  pixels are not protected.

This module owns the token-cell geometry (:func:`.public_cells`, one erosion shared by the views
and the host-side checks) and the degenerate-mask check (:func:`warn_degenerate_masks`, videos with
no public or no private cell). The views are written for one clip and are jit/vmap friendly.
Checking mask *files* (rank, shape, binary values) is the data loader's business:
:func:`maskdp_jax.data.decode.binarize_mask`; masks handed to the library API are held to the
same values by :func:`check_mask_values`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import einops
import jax
import jax.numpy as jnp
import numpy as np


class Views(NamedTuple):
    """The two views of one clip (or of a batch of clips, with leading axes).

    Attributes:
      public: ``[..., T, H, W, C]`` pixels of public cells, every other pixel the hidden-cell
        fill (:func:`~maskdp_jax.core.tokenizer.hidden_fill`).
      private: ``[..., T, H, W, C]`` pixels of private cells, every other pixel the fill.
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
    return _erode(jnp.asarray(pixel_mask) > 0, patch_stride=patch_stride)


def _erode(public, *, patch_stride: tuple[int, int, int]):
    """``[..., T, H, W]`` bool pixels -> ``[..., T', H', W']`` bool cells, True where every pixel
    of the cell is public. einops keeps the array library: JAX in the views, NumPy on the host."""
    st, sh, sw = patch_stride
    return einops.reduce(
        public, "... (t st) (h sh) (w sw) -> ... t h w", "min", st=st, sh=sh, sw=sw
    )


def cells_to_pixels(cells: jnp.ndarray, *, patch_stride: tuple[int, int, int]) -> jnp.ndarray:
    """Broadcast a ``[T', H', W']`` cell mask back to ``[T'*st, H'*sh, W'*sw]`` pixels."""
    st, sh, sw = patch_stride
    return einops.repeat(cells, "t h w -> (t st) (h sh) (w sw)", st=st, sh=sh, sw=sw)


_TEXTURE_SEED = b"maskdp-jax hidden-cell texture"


def hidden_fill(clip_shape: tuple[int, ...], *, patch_stride: tuple[int, int, int],
                fill_value: float = 0.0, fill_texture: float = 1.0) -> np.ndarray:
    """What a view writes into the cells it hides: ``[T, H, W, C]`` float32, the same fixed
    ``[st, sh, sw, C]`` pattern in every cell, ``fill_value + fill_texture * s`` with signs
    ``s = ±1`` read from the bits of sha256 in counter mode (the same on every platform and
    NumPy version).

    Why a texture and not a constant. A constant cell (``fill_texture=0``) enters the patch
    embedding as a flat patch, and a cell that is hidden throughout its window becomes the token
    ``kernel . fill + bias``: with ``fill_value`` 0 it is the bias alone, exactly 0 at initial
    weights. The tokens of every hidden cell are then the same zero-variance vector, and each
    LayerNorm they enter (block 0's ``norm1``, then the q/k/v pooling norms) multiplies their
    gradient by ``1 / sqrt(eps) = 1e3``. Measured at initial weights on the embedded dataset
    (``benchmarks/public_view_grad.py``, docs/benchmarks.md "Public view at initial
    weights"): with a constant fill the public view's gradient norm was 4e4-9e4 times the full
    video's (``mvit_test``, ``mvit_cpu``, ``mvit_tiny``, ``mvit_v2_s``), all of it in
    ``patch_embed.bias``. A ``±1`` pattern has the variance of normalised pixels, so a hidden
    token ``kernel . pattern + bias`` has the variance of a content token at any weights, and
    the public gradient is of the full video's order (median ratio 0.6-1.3). A learned mask
    token after the patch embedding (MAE, BEiT) measured the same order (0.9); the texture was
    chosen because it lives in pixel space: no new parameter (converted checkpoints load
    unchanged), and every model and every consumer of views (training, the feature cache, the
    view ablation, feature masking) receives hidden cells through the one function it already
    takes, clips, with no token mask to pass along. Tiling one pattern makes every fully hidden
    cell the same token, so it acts as a fixed mask token the patch embedding can still learn.

    Privacy meaning: a function of the clip's shape and the constants only, so it carries no
    information about either part of any video.

    Args:
      clip_shape: ``(T, H, W, C)`` of one clip, T, H, W multiples of ``patch_stride``.
      patch_stride: ``(st, sh, sw)``, one cell.
      fill_value: the centre of the fill, in normalised units (0 is the dataset mean).
      fill_texture: the pattern's amplitude; 0 gives the constant ``fill_value``.

    >>> f = hidden_fill((2, 8, 8, 3), patch_stride=(2, 4, 4))
    >>> f.shape, sorted(set(f.ravel().tolist())), bool((f[:, :4] == f[:, 4:]).all())
    ((2, 8, 8, 3), [-1.0, 1.0], True)
    """
    t, h, w, c = clip_shape
    _check_divisible((t, h, w), patch_stride)
    st, sh, sw = patch_stride
    size = st * sh * sw * c
    digest = b"".join(hashlib.sha256(_TEXTURE_SEED + i.to_bytes(4, "big")).digest()
                      for i in range(-(-size // 256)))
    bits = np.unpackbits(np.frombuffer(digest, np.uint8))[:size].reshape(st, sh, sw, c)
    cell = fill_value + fill_texture * (2.0 * bits.astype(np.float32) - 1.0)
    return np.tile(cell, (t // st, h // sh, w // sw, 1)).astype(np.float32)


def make_views(
    video: jnp.ndarray,
    pixel_mask: jnp.ndarray,
    *,
    patch_stride: tuple[int, int, int],
    fill_value: float = 0.0,
    fill_texture: float = 1.0,
    fill: jnp.ndarray | None = None,
) -> Views:
    """Split one clip into its public and private view.

    Args:
      video: ``[T, H, W, C]`` float, normalised pixels.
      pixel_mask: ``[T, H, W]``, 1 = public (not protected), 0 = private (protected by DP).
      patch_stride: the patch-embedding stride that defines token cells.
      fill_value, fill_texture: what a view writes where it hides a cell
        (:func:`~maskdp_jax.core.tokenizer.hidden_fill`): a fixed pattern, so it carries no
        information about either part.
      fill: ``[T, H, W, C]`` normalised pixels to write into hidden cells instead of the fixed
        pattern (a public background, :class:`maskdp_jax.run.views.PublicFill`). Privacy: the
        caller's promise that it is independent of every private pixel; the public view is then
        a function of the public pixels, the mask and ``fill``.

    Returns:
      :class:`Views` for the clip.
    """
    cells = public_cells(pixel_mask, patch_stride=patch_stride)
    public_pixels = cells_to_pixels(cells, patch_stride=patch_stride)[..., None]
    if fill is None:
        fill = jnp.asarray(hidden_fill(tuple(video.shape), patch_stride=tuple(patch_stride),
                                       fill_value=fill_value, fill_texture=fill_texture),
                           video.dtype)
    elif fill.shape != video.shape:
        raise ValueError(f"fill shape {tuple(fill.shape)} must be the clip's "
                         f"{tuple(video.shape)}.")
    return Views(
        public=jnp.where(public_pixels, video, fill),
        private=jnp.where(public_pixels, fill, video),
        has_public=jnp.any(cells),
        has_private=jnp.any(~cells),
    )


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """The tokeniser of one model: its token-cell geometry and the fill of hidden cells.

    Any model whose input is cut into a regular grid of patches has one: a video model's patch
    embedding advances by ``(st, sh, sw)`` pixels, an image model's (a ViT, or a CNN's stem read
    as a patch grid) by ``(sh, sw)``. Images are clips of one frame: a 2-D ``patch_stride`` makes
    :meth:`views` take ``[..., H, W, C]`` inputs and ``[..., H, W]`` masks.

    Attributes:
      patch_stride: ``(st, sh, sw)`` for videos or ``(sh, sw)`` for images, the stride of the
        model's patch embedding (one cell).
      fill_value, fill_texture: what a view writes where it hides a cell, a fixed pattern that
        carries no information about either part
        (:func:`~maskdp_jax.core.tokenizer.hidden_fill`, which says why a texture).

    >>> Tokenizer(patch_stride=(16, 16)).grid((224, 224, 3))
    (14, 14)
    """

    patch_stride: tuple[int, ...]
    fill_value: float = 0.0
    fill_texture: float = 1.0

    def __post_init__(self):
        stride = tuple(self.patch_stride)
        if len(stride) not in (2, 3) or not all(
                isinstance(s, int | np.integer) and s >= 1 for s in stride):
            raise ValueError(f"patch_stride must be 3 positive integers (st, sh, sw) for videos "
                             f"or 2 (sh, sw) for images; got {self.patch_stride!r}.")
        object.__setattr__(self, "patch_stride", tuple(int(s) for s in stride))

    @property
    def is_image(self) -> bool:
        """Whether inputs are images ``[..., H, W, C]`` (a 2-D stride) rather than clips."""
        return len(self.patch_stride) == 2

    @property
    def clip_stride(self) -> tuple[int, int, int]:
        """The stride as a clip's ``(st, sh, sw)`` (an image is a clip of one frame)."""
        return (1, *self.patch_stride) if self.is_image else self.patch_stride

    def views(self, video: jnp.ndarray, pixel_mask: jnp.ndarray,
              fill: jnp.ndarray | None = None) -> Views:
        """:func:`.make_views` of every clip (or image) of a batch.

        Args:
          video: ``[..., T, H, W, C]`` float (``[..., H, W, C]`` for an image tokeniser), any
            number of leading axes (e.g. ``[P, K]``).
          pixel_mask: ``[..., T, H, W]`` (``[..., H, W]``) with the same leading axes, 1 = public.
          fill: None (the fixed pattern) or, shaped like ``video``, public pixels to write into
            each clip's hidden cells (:func:`.make_views`; independent of every private pixel).

        Returns:
          :class:`Views` with the shapes of ``video`` (``has_*`` of shape ``[...]``).
        """
        if fill is not None and fill.shape != video.shape:
            raise ValueError(f"fill shape {tuple(fill.shape)} must be the inputs' shape "
                             f"{tuple(video.shape)}.")
        if self.is_image:
            video, pixel_mask = video[..., None, :, :, :], pixel_mask[..., None, :, :]
            fill = None if fill is None else fill[..., None, :, :, :]
        if pixel_mask.shape != video.shape[:-1]:
            raise ValueError(f"pixel_mask shape {tuple(pixel_mask.shape)} must be the inputs' "
                             f"shape without channels {tuple(video.shape[:-1])}.")
        lead = video.shape[:-4]
        flat = video.reshape(-1, *video.shape[-4:])
        mask = pixel_mask.reshape(-1, *pixel_mask.shape[-3:])
        kw = dict(patch_stride=self.clip_stride, fill_value=self.fill_value,
                  fill_texture=self.fill_texture)
        if fill is None:
            views = jax.vmap(lambda v, m: make_views(v, m, **kw))(flat, mask)
        else:
            views = jax.vmap(lambda v, m, f: make_views(v, m, fill=f, **kw))(
                flat, mask, fill.reshape(flat.shape))
        views = Views(*(x.reshape(*lead, *x.shape[1:]) for x in views))
        if self.is_image:
            views = views._replace(public=views.public[..., 0, :, :, :],
                                   private=views.private[..., 0, :, :, :])
        return views

    def fill(self, clip_shape: tuple[int, ...]) -> np.ndarray:
        """:func:`~maskdp_jax.core.tokenizer.hidden_fill` of a ``(T, H, W, C)`` clip (an
        ``(H, W, C)`` image): float32 NumPy of that shape."""
        shape = (1, *clip_shape) if self.is_image else tuple(clip_shape)
        fill = hidden_fill(shape, patch_stride=self.clip_stride, fill_value=self.fill_value,
                           fill_texture=self.fill_texture)
        return fill[0] if self.is_image else fill

    def grid(self, clip_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The cells of a ``[T, H, W, ...]`` clip, ``(T', H', W')`` (of an ``[H, W, ...]`` image,
        ``(H', W')``)."""
        n = len(self.patch_stride)
        _check_divisible(tuple(clip_shape[:n]) if n == 3 else (1, *clip_shape[:2]),
                         self.clip_stride)
        return tuple(d // s for d, s in zip(clip_shape[:n], self.patch_stride, strict=True))


def tokenizer_for(model: Any, *, fill_value: float = 0.0) -> Tokenizer:
    """The :class:`Tokenizer` of a model that declares its token grid.

    A model declares it with an attribute ``patch_stride`` (the stride of its patch embedding:
    ``(st, sh, sw)`` or ``(sh, sw)``; MViT, and any module written like it) or, for a ViT whose
    patches do not overlap, ``patch_size`` (stride = size).

    Raises:
      ValueError: the model declares neither; the message says how to declare the grid.

    >>> import types
    >>> tokenizer_for(types.SimpleNamespace(patch_size=(16, 16))).patch_stride
    (16, 16)
    """
    for name in ("patch_stride", "patch_size"):
        stride = getattr(model, name, None)
        if stride is not None:
            if isinstance(stride, int):
                raise ValueError(f"{type(model).__name__}.{name} = {stride} is ambiguous: give a "
                                 "tuple, (sh, sw) for images or (st, sh, sw) for videos.")
            return Tokenizer(patch_stride=tuple(stride), fill_value=fill_value)
    raise ValueError(
        f"cannot derive the token grid of {type(model).__name__}: it has no patch_stride or "
        "patch_size attribute. Declare one on the model (the stride of its patch embedding, "
        "(sh, sw) for images or (st, sh, sw) for videos), or build "
        "maskdp_jax.Tokenizer(patch_stride=...) yourself. A token cell must be the block of "
        "pixels one output position of the first layer advances over.")


def check_mask_values(masks: Any, *, name: str = "masks") -> None:
    """Refuses pixel masks that are not binary, by the data loader's rule: bool, or values all
    in {0, 1} or all in {0, 255} (1 / 255 = public), of any dtype.

    Why: the views take every pixel ``> 0`` as public, so a soft mask (0.5 at an anonymiser's
    edge) or a mix such as {0, 1, 255} would silently turn uncertain pixels public, outside the
    guarantee; guessing a threshold could do the same. Host-side (NumPy) on concrete arrays.

    Raises:
      ValueError: any other value (NaN included); the message names the offending values.

    >>> check_mask_values(np.array([0, 255], np.uint8))
    >>> check_mask_values(np.array([0.0, 0.5]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: masks must be binary (bool, or values in {0, 1} or in {0, 255}; ...
    """
    masks = np.asarray(masks)
    if masks.dtype == np.bool_ or masks.size == 0:
        return
    values = np.unique(masks)
    binary = (set(values.tolist()) <= {0, 1}) or (set(values.tolist()) <= {0, 255})
    if not binary:
        shown = values[:6].tolist() + (["..."] if len(values) > 6 else [])
        raise ValueError(
            f"{name} must be binary (bool, or values in {{0, 1}} or in {{0, 255}}; 1 / 255 = "
            f"public); got values {shown}. Threshold a soft mask yourself, where you decide "
            "which pixels the guarantee gives up.")


def host_public_cells(masks: np.ndarray, *, patch_stride: tuple[int, int, int]) -> np.ndarray:
    """:func:`.public_cells` of ``[..., T, H, W]`` masks on the host (NumPy): ``[..., T', H', W']``
    bool.

    >>> m = np.ones((3, 2, 4, 4), np.uint8); m[1, 0, 0, 0] = 0
    >>> host_public_cells(m, patch_stride=(2, 2, 2)).reshape(3, -1).sum(axis=1).tolist()
    [4, 3, 4]
    """
    public = np.asarray(masks) > 0
    _check_divisible(public.shape[-3:], patch_stride)
    return _erode(public, patch_stride=patch_stride)


def public_cells_batch(masks: np.ndarray, *, patch_stride: tuple[int, int, int]) -> np.ndarray:
    """``[N]`` number of public token cells of each video's ``[T, H, W]`` mask (host NumPy, the
    erosion of :func:`.public_cells`).

    >>> m = np.zeros((2, 2, 4, 4), np.uint8); m[1] = 1
    >>> public_cells_batch(m, patch_stride=(2, 2, 2)).tolist()
    [0, 4]
    """
    cells = host_public_cells(masks, patch_stride=patch_stride)
    return cells.reshape(len(cells), -1).sum(axis=1)


def warn_degenerate_masks(
    masks: np.ndarray | Iterable[np.ndarray],
    *,
    patch_stride: tuple[int, int, int],
    source: str = "dataset",
    explain_no_public: Callable[[], str | None] | None = None,
) -> tuple[int, int]:
    """Warn, once with the totals, about videos with no private or no public token cell.

    Host side (NumPy), with the erosion of :func:`.public_cells`. A video is counted over all its
    clips: all-public if every cell of every clip is public, all-private if none is.

    Args:
      masks: ``[N, T, H, W]`` or ``[N, K, T, H, W]`` pixel masks (1 = public), or an iterable of
        such chunks, so that a video dataset's masks can be streamed
        (``data.mask_chunks(dataset)``) instead of held in memory.
      patch_stride: the patch-embedding stride.
      source: dataset name for the message.
      explain_no_public: called only when some video has no public cell; its text (where the
        public region was lost and the fix) ends that warning, so one check gives one warning.

    Returns:
      ``(num_all_public, num_all_private)`` counts of videos.

    >>> m = np.zeros((2, 2, 4, 4), np.uint8); m[:, :, :2, :2] = 1  # one public cell each
    >>> warn_degenerate_masks([m[:1], m[1:]], patch_stride=(2, 2, 2))  # two chunks, no warning
    (0, 0)
    """
    chunks = [masks] if hasattr(masks, "shape") else masks
    n = all_public = all_private = 0
    for chunk in chunks:
        public = np.asarray(chunk) > 0
        if public.ndim not in (4, 5):
            raise ValueError(
                f"{source}: masks must be [N, (K,) T, H, W]; got shape {public.shape}."
            )
        _check_divisible(public.shape[-3:], patch_stride)
        if not len(public):
            continue
        cells = _erode(public, patch_stride=patch_stride).reshape(len(public), -1)
        n += len(public)
        all_public += int(np.sum(cells.all(axis=1)))
        all_private += int(np.sum(~cells.any(axis=1)))
    if all_public:
        warnings.warn(
            f"{source}: {all_public}/{n} videos have no private token cell. They train without "
            "noise and contribute no private gradient; under masked adjacency they have nothing "
            "protected (their content is treated as public).",
            stacklevel=2,
        )
    if all_private:
        why = explain_no_public() if explain_no_public is not None else None
        warnings.warn(
            f"{source}: {all_private}/{n} videos have no public token cell (after conservative "
            "erosion to the patch grid). For them MaskDP is ordinary DP-SGD on the whole video; "
            "they contribute no public gradient." + (f" {why}" if why else ""),
            stacklevel=2,
        )
    return all_public, all_private
