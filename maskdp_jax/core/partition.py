"""Split a parameter tree into the trainable part and the frozen part, and merge them back.

Gradients are taken w.r.t. the trainable part only; the frozen part is closed over. This is what
makes backprop stop at the lowest trainable layer (no gradient is ever computed for a frozen
parameter, rather than computed and masked), and it keeps every gradient pytree, clipped sum and
noise draw restricted to trainable leaves: the clip norm and the noise dimension are those of the
parameters actually released by training.
"""

from __future__ import annotations

from typing import Any

from flax import traverse_util

PyTree = Any


def split(params: PyTree, mask: PyTree) -> tuple[dict, dict]:
    """Split ``params`` by a boolean ``mask`` of the same structure (True = trainable).

    Returns:
      ``(trainable, frozen)``: two nested dicts holding disjoint subsets of the leaves.

    Raises:
      ValueError: no trainable parameter, or mask/params structures differ.
    """
    flat = traverse_util.flatten_dict(params)
    flat_mask = traverse_util.flatten_dict(mask)
    if flat.keys() != flat_mask.keys():
        missing = sorted(set(flat) ^ set(flat_mask))[:5]
        raise ValueError(f"trainable mask does not match the parameter tree; differing: {missing}.")
    trainable = {k: v for k, v in flat.items() if flat_mask[k]}
    if not trainable:
        raise ValueError("the fine-tuning strategy selects no trainable parameter.")
    frozen = {k: v for k, v in flat.items() if not flat_mask[k]}
    return traverse_util.unflatten_dict(trainable), traverse_util.unflatten_dict(frozen)


def merge(trainable: PyTree, frozen: PyTree) -> dict:
    """Inverse of :func:`split`."""
    flat = traverse_util.flatten_dict(frozen)
    flat.update(traverse_util.flatten_dict(trainable))
    return traverse_util.unflatten_dict(flat)
