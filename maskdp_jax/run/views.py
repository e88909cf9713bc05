"""Training on one view of every video: the context ablation of Schneider et al. 2024a/b, Table 3.

Table 3 of the MaskDP papers trains *without* DP on what one part of each video shows: the
avatar alone ("Avatar Only"), the background with the person removed ("Background Only"), or
both ("Anonymized"). ``config.view`` selects this for ``nonprivate`` runs:

* ``full``: the whole clip (every mode's default);
* ``public``: the public view, i.e. the public token cells (the avatar), every other cell filled
  (Table 3's "Avatar Only");
* ``background``: the background with the person removed, as the papers define "Background
  Only" (Schneider et al. 2024b: "Inpainted Background"): not cells of the anonymised clip but
  videos of their own, the room the avatar hides included. The embedded generator renders it
  (:mod:`maskdp_jax.data.synthetic`), a folder dataset reads it from ``input.background_dir``
  (written by ``python -m maskdp_jax.anonymize --background_dir``);
  :func:`maskdp_jax.run.datasets.get_datasets` loads it, so :func:`select_view` leaves it as it is;
* ``private``: the private view, i.e. the private token cells, public cells filled. Not Table 3's
  background row: the avatar's filled cells keep its silhouette and motion visible.

The views are the training tokeniser's (:meth:`maskdp_jax.core.tokenizer.Tokenizer.views`: the same
cells, erosion and fill value that ``maskdp`` trains on), applied to the training *and* the test
clips, so the run measures how well that part alone predicts the label (the paper's reading: how
much class information the context carries). The papers do not say which view the test clips
get; evaluating on the same view is the reading under which a row measures one part's
information rather than a train/test shift, and docs/guides/context.md states it.

The module also holds feature masking, the other way a run hides cells of every clip: the
per-subject masks of a feature-masking audit (``config.feature_masks``), applied by
:func:`hide_cells` in :class:`FeatureMaskedDataset`.

Not a privacy mechanism: nothing here is DP, and :func:`maskdp_jax.run.config.check_config` refuses
a view other than ``full`` in the private modes (``maskdp`` already trains on both views; ``dp`` on
a view would protect less than the whole video it claims to).
"""

from __future__ import annotations

import json
import math
import os

import einops
import jax
import numpy as np

from maskdp_jax import data
from maskdp_jax.core import tokenizer
from maskdp_jax.data import synthetic

VIEWS = ("full", "public", "background", "private")
# Views that are cells of the anonymised clip (the tokeniser's), made here from the masks.
CELL_VIEWS = ("public", "private")
HIDE_VIEWS = ("private", "both")  # where hide_cells hides the chosen cells


def hide_cells(video: np.ndarray, pixel_mask: np.ndarray, hidden: np.ndarray, *,
               tokens: tokenizer.Tokenizer, views: str = "private") -> np.ndarray:
    """Hide chosen cells of a batch of clips on the host (feature masking, Gu & Chen 2024 Alg. 1:
    :mod:`maskdp_jax.audit.feature_masking` chooses them, :class:`FeatureMaskedDataset` applies them
    in training).

    Args:
      video: ``[N, K, T, H, W, C]`` float32 normalised clips.
      pixel_mask: ``[N, K, T, H, W]`` 1 = public.
      hidden: ``[N, T', H', W']`` or ``[N, T' H' W']`` bool, the cells to hide in every clip of
        each video (``tokens``' cell grid).
      tokens: the model's tokeniser (cell geometry, the public cells' erosion, fill value).
      views: ``"private"`` hides only the private cells among ``hidden`` (additional hidden cells
        of the private view: the public view, a function of public pixels only, is unchanged
        bit for bit); ``"both"`` hides every cell of ``hidden``.

    Returns:
      a new ``video`` with the hidden cells' pixels set to the tokeniser's fill
      (:meth:`maskdp_jax.core.tokenizer.Tokenizer.fill`, what the views write into hidden cells).
    """
    if views not in HIDE_VIEWS:
        raise ValueError(f"views must be one of {HIDE_VIEWS}; got {views!r}.")
    st, sh, sw = tokens.patch_stride
    cells = np.asarray(hidden, bool).reshape(len(video), *tokens.grid(video.shape[2:]))
    hide = np.broadcast_to(cells[:, None], pixel_mask.shape[:2] + cells.shape[1:])
    if views == "private":
        hide = hide & ~tokenizer.host_public_cells(pixel_mask, patch_stride=tokens.patch_stride)
    pixels = einops.repeat(hide, "n k t h w -> n k (t st) (h sh) (w sw) 1", st=st, sh=sh, sw=sw)
    return np.where(pixels, tokens.fill(video.shape[-4:]), video).astype(video.dtype)


class _Delegating:
    """A :class:`maskdp_jax.data.Dataset` made from another: every attribute a subclass does not
    define is the wrapped split's."""

    dataset: data.Dataset

    def __getattr__(self, name):  # class_names, labels, has_masks, get_masks, close, ...
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def num_classes(self) -> int:
        return self.dataset.num_classes


class _Wrapped(_Delegating):
    """A :class:`maskdp_jax.data.Dataset` that changes the wrapped split's clips: :meth:`get_batch`
    returns the wrapped batch with ``video`` replaced by :meth:`_video` of it, float32 model input
    even with ``normalize=False`` (fill values live in normalised units). Every other attribute is
    the wrapped split's."""

    def get_batch(self, indices: np.ndarray, *, num_clips: int = 1, seed=None,
                  normalize: bool = True) -> dict:
        del normalize  # computed on the normalised clip
        batch = dict(self.dataset.get_batch(indices, num_clips=num_clips, seed=seed))
        batch["video"] = self._video(batch)
        return batch

    def _video(self, batch: dict) -> np.ndarray:
        raise NotImplementedError


class ViewDataset(_Wrapped):
    """A :class:`maskdp_jax.data.Dataset` whose clips show one view of the wrapped split's clips.

    ``get_batch`` returns the wrapped batch with ``video`` replaced by the view; ``mask`` and
    ``label`` are unchanged. Every other attribute is the wrapped split's.

    Args:
      dataset: the split to wrap; it must carry masks.
      view: ``"public"`` or ``"private"``.
      tokens: the model's tokeniser (cell geometry and fill value).
    """

    def __init__(self, dataset: data.Dataset, *, view: str, tokens: tokenizer.Tokenizer):
        if view not in CELL_VIEWS:
            raise ValueError(f"view must be one of {CELL_VIEWS} to wrap a dataset; got {view!r}.")
        if not dataset.has_masks:
            raise ValueError(
                f"view {view!r} needs per-video masks, but dataset {dataset.name!r} has none "
                "(docs/guides/own_videos.md)."
            )
        self.dataset, self.view, self.tokens = dataset, view, tokens
        self._views = jax.jit(lambda v, m: getattr(tokens.views(v, m), view))
        self.name = f"{dataset.name}[{view} view]"

    def _video(self, batch: dict) -> np.ndarray:
        return np.asarray(self._views(batch["video"], batch["mask"]))


def select_view(
    train: data.Dataset, test: data.Dataset, *, view: str, tokens: tokenizer.Tokenizer
) -> tuple[data.Dataset, data.Dataset]:
    """``(train, test)`` showing ``view`` (unchanged for ``"full"`` and for ``"background"``,
    whose splits :func:`maskdp_jax.run.datasets.get_datasets` loaded as the background videos)."""
    if view not in CELL_VIEWS:
        return train, test
    return (ViewDataset(train, view=view, tokens=tokens),
            ViewDataset(test, view=view, tokens=tokens))


class FeatureMaskedDataset(_Wrapped):
    """A :class:`maskdp_jax.data.Dataset` whose clips hide the cells a feature-masking audit chose
    for each video's subject (Gu & Chen 2024 Alg. 1; :mod:`maskdp_jax.audit.feature_masking`).

    ``get_batch`` returns the wrapped batch with those cells hidden by
    :func:`hide_cells` (``views="private"``: extra hidden cells of the
    private view, public cells untouched; ``"both"``: hidden everywhere). The masks are fixed
    pre-processing, so the run's DP guarantee holds for the masked videos, *provided* the masks
    were chosen on other data than this training set (the audit fits its models on an auxiliary
    split for that reason).

    Args:
      dataset: the split to wrap; it must carry masks and subjects.
      keep: ``[Z, T' H' W']`` bool, per subject the cells kept.
      grid: ``(T', H', W')``, the model's token-cell grid of one clip.
      views: ``"private"`` or ``"both"``.
      tokens: the model's tokeniser.
    """

    def __init__(self, dataset: data.Dataset, *, keep: np.ndarray, grid: tuple[int, int, int],
                 views: str, tokens: tokenizer.Tokenizer):
        subjects = getattr(dataset, "subjects", None)
        if subjects is None:
            raise ValueError(
                f"feature masks are chosen per subject, but dataset {dataset.name!r} has no "
                "subjects (the embedded dataset: set --config.input.num_subjects to the audit's)."
            )
        keep = np.asarray(keep, bool)
        if keep.ndim != 2 or keep.shape[1] != math.prod(grid):
            raise ValueError(f"feature masks hold {keep.shape[1:]} cells per subject; the "
                             f"model's clips have {grid} = {math.prod(grid)} cells. Run the "
                             "audit with this model and clip size.")
        if int(np.max(subjects)) >= len(keep):
            raise ValueError(f"dataset {dataset.name!r} has subjects up to "
                             f"{int(np.max(subjects))}, the feature masks only {len(keep)}.")
        if views not in HIDE_VIEWS:
            raise ValueError(f"feature_mask_views must be one of {HIDE_VIEWS}; got "
                             f"{views!r}.")
        self.dataset, self.keep, self.views, self.tokens = dataset, keep, views, tokens
        self.name = f"{dataset.name}[feature-masked, {views}]"

    def _video(self, batch: dict) -> np.ndarray:
        return hide_cells(batch["video"], batch["mask"], ~self.keep[np.asarray(batch["subject"])],
                          tokens=self.tokens, views=self.views)


FILLS = ("texture", "constant", "backgrounds")
FILL_STREAM = 7  # the fill draw's own stream of a batch's public seed


class PublicFill(_Delegating):
    """A :class:`maskdp_jax.data.Dataset` whose training batches carry ``fill``: for every clip a
    clip of a public background, written into the clip's hidden cells by the views instead of
    the tokeniser's fixed pattern (domain randomisation of the hidden cells).

    Why. A model trained on views whose hidden cells all show one pattern is tested on full
    videos whose cells show real backgrounds: a shift between what MaskDP's noise-free public
    pass sees and what the model is judged on. Backgrounds drawn from a public distribution make
    the public view look like a full video whose background carries no label.

    Privacy: the backgrounds come from ``bank``, public clips that hold no private pixel, and
    which of them a clip gets is drawn from the batch's public ``seed`` alone (the stream
    ``FILL_STREAM``), never from the data; so the public view stays a function of public
    pixels (the mask, the avatar's cells and a public draw), as the invariance test checks.
    Evaluation views (``seed=None``) carry a fixed background per video (its index modulo the
    bank), read only by the view diagnostics (:func:`maskdp_jax.run.evaluation.predict`): full
    videos, what a run is judged on, have no hidden cell.

    Args:
      dataset: the training split.
      bank: ``uint8 [M, F, H, W, 3]`` public background videos of the split's frame size, ``F``
        at least the clip length.
    """

    def __init__(self, dataset: data.Dataset, *, bank: np.ndarray):
        bank = np.asarray(bank)
        if bank.dtype != np.uint8 or bank.ndim != 5 or bank.shape[-1] != 3:
            raise ValueError(f"the fill bank must be uint8 [M, F, H, W, 3]; got {bank.dtype} "
                             f"{bank.shape}.")
        self.dataset, self.bank = dataset, bank
        self.name = f"{dataset.name}[public fill]"

    def get_batch(self, indices: np.ndarray, *, num_clips: int = 1, seed=None,
                  normalize: bool = True) -> dict:
        batch = dict(self.dataset.get_batch(indices, num_clips=num_clips, seed=seed,
                                            normalize=normalize))
        n, k, t = batch["mask"].shape[:3]
        if self.bank.shape[2:4] != batch["mask"].shape[3:5] or self.bank.shape[1] < t:
            raise ValueError(f"the fill bank's videos {self.bank.shape[1:4]} (F, H, W) do not "
                             f"fit clips of {batch['mask'].shape[2:5]} (T, H, W).")
        span = self.bank.shape[1] - t
        if seed is None:  # evaluation views: a fixed background per video, its centre clip
            which = np.broadcast_to((np.asarray(indices) % len(self.bank))[:, None], (n, k))
            start = np.full((n, k), span // 2)
        else:
            rng = np.random.default_rng([*np.atleast_1d(seed), FILL_STREAM])
            which = rng.integers(0, len(self.bank), (n, k))
            start = rng.integers(0, span + 1, (n, k))
        fill = self.bank[which[..., None], start[..., None] + np.arange(t)]
        batch["fill"] = self.dataset.pixel_norm(fill) if normalize else fill
        return batch


def fill_texture(fill: str) -> float:
    """The tokeniser's ``fill_texture`` for the hidden-cell fill ``fill`` (``FILLS``):
    ``constant`` writes ``fill_value`` alone (the flat grey the papers most likely used;
    :func:`maskdp_jax.core.tokenizer.hidden_fill` says what it does to LayerNorm gradients at random
    initial weights), the others keep the ±1 texture (``backgrounds`` uses it only where a view is
    made without a background, never in training)."""
    if fill not in FILLS:
        raise ValueError(f"hidden_fill must be one of {FILLS}; got {fill!r}.")
    return 0.0 if fill == "constant" else 1.0


def public_fill(train: data.Dataset, *, fill: str, input_config) -> data.Dataset:
    """The training split with the hidden-cell fill ``fill`` (``FILLS``): ``texture`` and
    ``constant``, the tokeniser's fixed fill (unchanged split, :func:`fill_texture`);
    ``backgrounds``, :class:`PublicFill` with the rooms of the embedded dataset's public corpus
    (``setting="pretrain"``, rendered without avatars,
    :func:`maskdp_jax.data.synthetic.public_rooms`).

    Raises:
      ValueError: an unknown fill, or ``backgrounds`` on a dataset without a public background
        source (only the embedded dataset has one).
    """
    if fill not in FILLS:
        raise ValueError(f"hidden_fill must be one of {FILLS}; got {fill!r}.")
    if fill != "backgrounds":
        return train
    if input_config.dataset != "synthetic":
        raise ValueError(
            f"--config.hidden_fill=backgrounds draws public backgrounds from the embedded "
            f"dataset's public corpus; dataset {input_config.dataset!r} has no public background "
            "source. Use --config.hidden_fill=texture.")
    bank = synthetic.public_rooms(frames=input_config.frames, size=input_config.size)
    return PublicFill(train, bank=bank)


def load_feature_masks(path: str, *, version: str = "optimized") -> np.ndarray:
    """``[Z, K']`` bool kept cells from a feature-masking audit's ``report.json``
    (``python -m maskdp_jax.audit --config=configs/audit_feature_masking.py``): ``version`` is
    ``"optimized"`` (the MILP's masks) or ``"random"`` (the control)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"feature masks {path!r} not found: run `python -m maskdp_jax.audit "
            "--config=configs/audit_feature_masking.py --workdir=DIR` and pass "
            "DIR/report.json.")
    with open(path) as f:
        report = json.load(f)
    if report.get("audit") != "feature_masking":
        raise ValueError(f"{path!r} is not a feature-masking audit report (audit = "
                         f"{report.get('audit')!r}).")
    if version not in report["keep"]:
        raise ValueError(f"feature_mask_version must be one of {sorted(report['keep'])}; got "
                         f"{version!r}.")
    return np.asarray(report["keep"][version], bool)


def mask_features(train: data.Dataset, test: data.Dataset, *, path: str, version: str,
                  views: str, tokens: tokenizer.Tokenizer, clip_shape: tuple[int, ...]
                  ) -> tuple[data.Dataset, data.Dataset]:
    """``(train, test)`` with the cells of ``path``'s masks hidden (:class:`FeatureMaskedDataset`;
    the test clips too, so accuracy is measured on what the model was trained to see)."""
    keep = load_feature_masks(path, version=version)
    return tuple(FeatureMaskedDataset(split, keep=keep, grid=tokens.grid(clip_shape), views=views,
                                      tokens=tokens)
                 for split in (train, test))
