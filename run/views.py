"""Training on one view of every video: the context ablation of seeds 000/001, Table 3.

Table 3 of the MaskDP papers trains *without* DP on what one part of each video shows: the
avatar alone ("Avatar Only"), the background with the person removed ("Background Only"), or
both ("Anonymized"). ``config.view`` selects this for ``nonprivate`` runs:

* ``full``: the whole clip (every mode's default);
* ``public``: the public view, i.e. the public token cells (the avatar), every other cell filled;
* ``private``: the private view, i.e. the private token cells (the background), public cells filled.

The views are the training tokeniser's (:meth:`maskdp_jax.tokenizer.Tokenizer.views`: the same
cells, erosion and fill value that ``maskdp`` trains on), applied to the training *and* the test
clips, so the run measures how well that part alone predicts the label (the paper's reading: how
much class information the context carries). The papers do not say which view the test clips
get; evaluating on the same view is the reading under which a row measures one part's
information rather than a train/test shift, and we state it in the README.

Not a privacy mechanism: nothing here is DP, and :func:`run.config.check_config` refuses a view
other than ``full`` in the private modes (``maskdp`` already trains on both views; ``dp`` on a
view would protect less than the whole video it claims to).
"""

from __future__ import annotations

import jax
import numpy as np

import data
from maskdp_jax import tokenizer

VIEWS = ("full", "public", "private")


class ViewDataset:
    """A :class:`data.Dataset` whose clips show one view of the wrapped split's clips.

    ``get_batch`` returns the wrapped batch with ``video`` replaced by the view; ``mask`` and
    ``label`` are unchanged. Every other attribute is the wrapped split's.

    Args:
      dataset: the split to wrap; it must carry masks.
      view: ``"public"`` or ``"private"``.
      tokens: the model's tokeniser (cell geometry and fill value).
    """

    def __init__(self, dataset: data.Dataset, *, view: str, tokens: tokenizer.Tokenizer):
        if view not in VIEWS[1:]:
            raise ValueError(f"view must be one of {VIEWS[1:]} to wrap a dataset; got {view!r}.")
        if not dataset.has_masks:
            raise ValueError(
                f"view {view!r} needs per-video masks, but dataset {dataset.name!r} has none "
                "(README: 'Your own videos and masks')."
            )
        self.dataset, self.view, self.tokens = dataset, view, tokens
        self._views = jax.jit(lambda v, m: getattr(tokens.views(v, m), view))
        self.name = f"{dataset.name}[{view} view]"

    def __getattr__(self, name):  # class_names, labels, has_masks, get_masks, close, ...
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def num_classes(self) -> int:
        return self.dataset.num_classes

    def get_batch(self, indices: np.ndarray, *, num_clips: int = 1, seed=None,
                  normalize: bool = True) -> dict:
        """The wrapped batch with ``video`` the view: float32 model input even with
        ``normalize=False`` (the fill value lives in normalised units)."""
        del normalize  # a view is computed on the normalised clip
        batch = dict(self.dataset.get_batch(indices, num_clips=num_clips, seed=seed))
        batch["video"] = np.asarray(self._views(batch["video"], batch["mask"]))
        return batch


def select_view(
    train: data.Dataset, test: data.Dataset, *, view: str, tokens: tokenizer.Tokenizer
) -> tuple[data.Dataset, data.Dataset]:
    """``(train, test)`` showing ``view`` (unchanged for ``"full"``)."""
    if view == "full":
        return train, test
    return (ViewDataset(train, view=view, tokens=tokens),
            ViewDataset(test, view=view, tokens=tokens))
